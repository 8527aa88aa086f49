"""faust's assignor protocol: bytes equal faust-streaming's own ClientMetadata JSON and aiokafka's
consumer protocol structs, and faust reads what we write."""

from __future__ import annotations

import zlib
from collections.abc import Mapping

import pytest
from aiokafka.coordinator.protocol import (
    ConsumerProtocolMemberAssignment,
    ConsumerProtocolMemberMetadata,
)
from faust.assignor.client_assignment import ClientAssignment, ClientMetadata
from hypothesis import given
from hypothesis import strategies as st

from streamtasks.errors import DecodeError
from streamtasks.protocol import (
    FaustAssignment,
    FaustClientMetadata,
    FaustSubscription,
    decode_assignment,
    decode_faust_assignment,
    decode_faust_client_metadata,
    decode_faust_subscription,
    encode_faust_assignment,
    encode_faust_client_metadata,
    encode_faust_subscription,
    faust_client_metadata,
)
from streamtasks.protocol.faust_compat import MAX_INFLATED_SIZE
from tests.protocol import strategies as S
from topology.ids import TopicPartition


def faust_own(meta: FaustClientMetadata) -> ClientMetadata:
    """faust's ClientMetadata with the same content, mappings in sorted key order."""

    def tps(m: Mapping[str, tuple[int, ...]]) -> dict[str, list[int]]:
        return {t: list(m[t]) for t in sorted(m)}

    return ClientMetadata(
        assignment=ClientAssignment(actives=tps(meta.actives), standbys=tps(meta.standbys)),
        url=meta.url,
        changelog_distribution={
            h: tps(meta.changelog_distribution[h]) for h in sorted(meta.changelog_distribution)
        },
        external_topic_distribution={
            h: tps(meta.external_topic_distribution[h]) for h in sorted(meta.external_topic_distribution)
        },
        topic_groups={t: meta.topic_groups[t] for t in sorted(meta.topic_groups)},
    )


@given(meta=S.faust_metadata)
def test_client_metadata_bytes_equal_faust(meta: FaustClientMetadata) -> None:
    ours = encode_faust_client_metadata(meta)
    assert ours == faust_own(meta).dumps()
    assert decode_faust_client_metadata(ours) == meta


@given(meta=S.faust_metadata)
def test_faust_reads_what_we_write(meta: FaustClientMetadata) -> None:
    theirs = ClientMetadata.loads(encode_faust_client_metadata(meta))
    assert theirs.url == meta.url
    assert dict(theirs.topic_groups) == dict(meta.topic_groups)
    assert dict(theirs.changelog_distribution) == {
        h: {t: list(ps) for t, ps in tps.items()} for h, tps in meta.changelog_distribution.items()
    }


@given(topics=st.lists(S.topic_names, max_size=4, unique=True), meta=S.faust_metadata)
def test_subscription_bytes_equal_aiokafka(topics: list[str], meta: FaustClientMetadata) -> None:
    ours = encode_faust_subscription(FaustSubscription(topics=tuple(topics), metadata=meta))
    theirs = ConsumerProtocolMemberMetadata(4, sorted(topics), faust_own(meta).dumps()).encode()
    assert ours == theirs
    decoded = decode_faust_subscription(theirs)
    assert (decoded.topics, decoded.metadata, decoded.version) == (tuple(sorted(topics)), meta, 4)


@given(
    partitions=st.lists(S.topic_partitions(S.small_partitions), max_size=8, unique=True),
    meta=S.faust_metadata,
)
def test_assignment_bytes_equal_what_faust_sends(
    partitions: list[TopicPartition], meta: FaustClientMetadata
) -> None:
    grouped: dict[str, list[int]] = {}
    for tp in sorted(partitions):
        grouped.setdefault(tp.topic, []).append(tp.partition)
    theirs = ConsumerProtocolMemberAssignment(
        4, sorted(grouped.items()), zlib.compress(faust_own(meta).dumps())
    ).encode()
    ours = encode_faust_assignment(FaustAssignment(partitions=tuple(partitions), metadata=meta))
    assert ours == theirs
    decoded = decode_faust_assignment(theirs)
    assert (sorted(decoded.partitions), decoded.metadata) == (sorted(partitions), meta)


def test_consumer_protocol_decoder_reads_faust_assignments() -> None:
    meta = FaustClientMetadata(url="http://a/", actives={"t": (0,)})
    data = encode_faust_assignment(FaustAssignment(partitions=(TopicPartition("t", 0),), metadata=meta))
    generic = decode_assignment(data)
    assert (generic.version, generic.assigned_partitions) == (4, (TopicPartition("t", 0),))
    assert generic.user_data is not None
    assert decode_faust_client_metadata(zlib.decompress(generic.user_data)) == meta


def test_decoding_follows_faust_defaults() -> None:
    minimal = b'{"assignment":{"actives":{"t":[1]},"standbys":{}},"url":"u","changelog_distribution":{}}'
    meta = decode_faust_client_metadata(minimal)
    assert meta.actives == {"t": (1,)}
    assert (meta.external_topic_distribution, meta.topic_groups) == ({}, {})
    with_nulls = minimal[:-1] + b',"topic_groups":null,"external_topic_distribution":null}'
    assert decode_faust_client_metadata(with_nulls) == meta


def test_convenience_builder() -> None:
    data = faust_client_metadata(url="http://a/", actives={"t": [3, 1]}, topic_groups={"t": 0})
    assert data == (
        b'{"assignment":{"actives":{"t":[3,1]},"standbys":{}},"url":"http://a/",'
        b'"changelog_distribution":{},"external_topic_distribution":{},"topic_groups":{"t":0}}'
    )


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"not json",
        b"[]",
        b'{"assignment":{"actives":{},"standbys":{}},"url":5,"changelog_distribution":{}}',
        b'{"assignment":{"actives":{"t":[true]},"standbys":{}},"url":"u","changelog_distribution":{}}',
        b'{"assignment":{"actives":{"t":[4294967296]},"standbys":{}},"url":"u","changelog_distribution":{}}',
        b'{"assignment":{"actives":{},"standbys":{}},"url":"u"}',
        b"[" * 100_000,
        b"\xff\xfe",
    ],
)
def test_bad_client_metadata_is_a_decode_error(data: bytes) -> None:
    with pytest.raises(DecodeError):
        decode_faust_client_metadata(data)


def test_inflating_stops_at_the_limit() -> None:
    deflater = zlib.compressobj()
    chunk = bytes(1 << 20)
    bomb = b"".join(deflater.compress(chunk) for _ in range(MAX_INFLATED_SIZE // len(chunk) + 2))
    bomb += deflater.flush()
    assert len(bomb) < 200_000
    data = ConsumerProtocolMemberAssignment(4, [], bomb).encode()
    with pytest.raises(DecodeError, match="inflates beyond"):
        decode_faust_assignment(data)
    truncated = ConsumerProtocolMemberAssignment(4, [], zlib.compress(b"{}")[:-3]).encode()
    with pytest.raises(DecodeError, match="truncated zlib"):
        decode_faust_assignment(truncated)
