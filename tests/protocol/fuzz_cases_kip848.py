"""The KIP-848 decoders and valid encodings for tests/protocol/test_fuzz.py, which feeds them
random bytes and mutated valid buffers (they must raise DecodeError and nothing else)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st

from streamtasks.protocol import assignment_rpc as A
from streamtasks.protocol import consumer_group_codec as C
from tests.protocol import strategies_kip848 as S

Decoder = Callable[[bytes], Any]

KIP848_CASES: dict[str, tuple[Decoder, st.SearchStrategy[bytes]]] = {
    "heartbeat request v0": (
        lambda b: C.decode_heartbeat_request(b, 0),
        S.heartbeat_requests(0).map(lambda m: C.encode_heartbeat_request(m, 0)),
    ),
    "heartbeat request v1": (
        C.decode_heartbeat_request,
        S.heartbeat_requests(1).map(C.encode_heartbeat_request),
    ),
    "heartbeat response": (
        C.decode_heartbeat_response,
        S.heartbeat_responses().map(C.encode_heartbeat_response),
    ),
    "describe request": (C.decode_describe_request, S.describe_requests.map(C.encode_describe_request)),
    "describe response v0": (
        lambda b: C.decode_describe_response(b, 0),
        S.describe_responses(0).map(lambda m: C.encode_describe_response(m, 0)),
    ),
    "describe response v1": (
        C.decode_describe_response,
        S.describe_responses(1).map(C.encode_describe_response),
    ),
    "prepare request": (A.decode_prepare_request, S.prepare_requests.map(A.encode_prepare_request)),
    "prepare response": (A.decode_prepare_response, S.prepare_responses.map(A.encode_prepare_response)),
    "install request": (A.decode_install_request, S.install_requests.map(A.encode_install_request)),
    "install response": (A.decode_install_response, S.install_responses.map(A.encode_install_response)),
}
