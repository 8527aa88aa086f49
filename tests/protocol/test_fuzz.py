"""Every decoder, fed random bytes and mutated valid buffers, raises DecodeError and nothing else.
A buffer the streamtasks userdata decoders accept re-encodes to the same bytes (canonical form)."""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamtasks.errors import DecodeError
from streamtasks.protocol import (
    LATEST_VERSION,
    FaustAssignment,
    FaustSubscription,
    decode_assignment,
    decode_assignment_info,
    decode_faust_assignment,
    decode_faust_client_metadata,
    decode_faust_subscription,
    decode_sticky_userdata,
    decode_subscription,
    decode_subscription_info,
    encode_assignment,
    encode_assignment_info,
    encode_faust_assignment,
    encode_faust_client_metadata,
    encode_faust_subscription,
    encode_sticky_userdata,
    encode_subscription,
    encode_subscription_info,
    metadata_version,
    peek_version,
)
from tests.protocol import strategies as S
from tests.protocol.fuzz_cases_kip848 import KIP848_CASES
from tests.protocol.fuzz_cases_streams import STREAMS_CASES

Decoder = Callable[[bytes], Any]

# decoder, strategy of valid encodings
CASES: dict[str, tuple[Decoder, st.SearchStrategy[bytes]]] = {
    "subscription": (decode_subscription, S.subscriptions.map(encode_subscription)),
    "assignment": (decode_assignment, S.assignments.map(encode_assignment)),
    "sticky v1 reader": (decode_sticky_userdata, S.sticky_userdata.map(encode_sticky_userdata)),
    "sticky v0 reader": (
        lambda b: decode_sticky_userdata(b, max_version=0),
        S.sticky_userdata.map(lambda u: encode_sticky_userdata(u, 0)),
    ),
    "subscription info": (decode_subscription_info, S.subscription_infos.map(encode_subscription_info)),
    "assignment info": (decode_assignment_info, S.assignment_infos().map(encode_assignment_info)),
    "userdata header": (peek_version, S.subscription_infos.map(encode_subscription_info)),
    "kip-848 metadata version": (
        lambda b: metadata_version(-1, b),
        S.subscription_infos.map(encode_subscription_info),
    ),
    "faust client metadata": (
        decode_faust_client_metadata,
        S.faust_metadata.map(encode_faust_client_metadata),
    ),
    "faust subscription": (
        decode_faust_subscription,
        st.builds(
            FaustSubscription,
            topics=st.lists(S.topic_names, max_size=3).map(tuple),
            metadata=S.faust_metadata,
        ).map(encode_faust_subscription),
    ),
    "faust assignment": (
        decode_faust_assignment,
        st.builds(
            FaustAssignment,
            partitions=st.lists(S.topic_partitions(S.small_partitions), max_size=4).map(tuple),
            metadata=S.faust_metadata,
        ).map(encode_faust_assignment),
    ),
}
CASES.update(KIP848_CASES)
CASES.update(STREAMS_CASES)


def only_decode_errors(decode: Decoder, data: bytes) -> object:
    try:
        return decode(data)
    except DecodeError:
        return None


@pytest.mark.parametrize("name", sorted(CASES))
@given(data=st.binary(max_size=200))
def test_random_bytes(name: str, data: bytes) -> None:
    decode, _ = CASES[name]
    only_decode_errors(decode, data)


@pytest.mark.parametrize("name", sorted(CASES))
@given(st.data())
def test_mutated_valid_buffers(name: str, data: st.DataObject) -> None:
    decode, valid = CASES[name]
    original = data.draw(valid, label="valid")
    assert decode(original) is not None
    only_decode_errors(decode, data.draw(S.mutated(original), label="mutated"))


@given(st.data())
def test_zlib_payloads_in_faust_assignments(data: st.DataObject) -> None:
    """Mutations inside the compressed JSON, not only in the envelope."""
    payload = data.draw(S.faust_metadata.map(encode_faust_client_metadata))
    envelope = b"\x00\x04\x00\x00\x00\x00"
    compressed = zlib.compress(data.draw(S.mutated(payload)))
    compressed = data.draw(st.sampled_from([compressed, data.draw(S.mutated(compressed))]))
    only_decode_errors(decode_faust_assignment, envelope + len(compressed).to_bytes(4, "big") + compressed)


@given(st.data())
def test_accepted_userdata_is_canonical(data: st.DataObject) -> None:
    """Whatever the userdata decoders accept re-encodes to exactly the same bytes."""
    kind = data.draw(st.sampled_from(["subscription", "assignment"]))
    if kind == "subscription":
        valid = data.draw(S.subscription_infos.map(encode_subscription_info))
        decode: Decoder = decode_subscription_info
        encode: Callable[[Any], bytes] = encode_subscription_info
    else:
        valid = data.draw(S.assignment_infos().map(encode_assignment_info))
        decode, encode = decode_assignment_info, encode_assignment_info
    candidate = data.draw(S.mutated(valid))
    decoded = only_decode_errors(decode, candidate)
    if decoded is not None and getattr(decoded, "version", 0) <= LATEST_VERSION:
        assert encode(decoded) == candidate
