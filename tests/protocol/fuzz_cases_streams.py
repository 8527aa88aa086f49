"""The streams-group decoders (KIP-1071) and valid encodings for tests/protocol/test_fuzz.py,
which feeds them random bytes and mutated valid buffers (they must raise DecodeError and
nothing else)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st

from streamtasks.protocol import streams_group_codec as H
from streamtasks.protocol import streams_group_describe_codec as D
from tests.protocol import strategies_streams as S

__all__ = ["STREAMS_CASES"]

Decoder = Callable[[bytes], Any]


def _cases() -> dict[str, tuple[Decoder, st.SearchStrategy[bytes]]]:
    cases: dict[str, tuple[Decoder, st.SearchStrategy[bytes]]] = {}
    codecs: list[tuple[str, Any, Any, Callable[[int], st.SearchStrategy[Any]]]] = [
        (
            "heartbeat request",
            H.encode_streams_heartbeat_request,
            H.decode_streams_heartbeat_request,
            S.heartbeat_requests,
        ),
        (
            "heartbeat response",
            H.encode_streams_heartbeat_response,
            H.decode_streams_heartbeat_response,
            S.heartbeat_responses,
        ),
        (
            "describe request",
            D.encode_streams_describe_request,
            D.decode_streams_describe_request,
            S.describe_requests,
        ),
        (
            "describe response",
            D.encode_streams_describe_response,
            D.decode_streams_describe_response,
            S.describe_responses,
        ),
    ]
    for name, encode, decode, strategy in codecs:
        for v in (0, 1):
            cases[f"streams {name} v{v}"] = (
                functools.partial(decode, version=v),
                strategy(v).map(functools.partial(encode, version=v)),
            )
    return cases


STREAMS_CASES = _cases()
