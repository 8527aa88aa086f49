from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kio.schema.heartbeat.v4.response import HeartbeatResponse

from streamtasks.errors import DecodeError
from streamtasks.protocol import classic_group as cg
from streamtasks.runtime.framing import FrameDecoder, decode_response, encode_request
from streamtasks.runtime.group_wire import to_wire


def test_request_frame_starts_with_its_size_and_header() -> None:
    req = to_wire(cg.HeartbeatRequest(group_id="g", generation_id=3, member_id="m", group_instance_id=None))
    frame = encode_request(req, correlation_id=77, client_id="c")
    (size,) = struct.unpack_from(">i", frame)
    assert size == len(frame) - 4
    api_key, api_version, correlation = struct.unpack_from(">hhi", frame, 4)
    assert (api_key, api_version, correlation) == (12, 4, 77)


@given(st.lists(st.binary(max_size=50), max_size=8), st.integers(1, 7))
def test_frames_survive_any_chunking(payloads: list[bytes], chunk: int) -> None:
    stream = b"".join(struct.pack(">i", len(p)) + p for p in payloads)
    decoder = FrameDecoder()
    out: list[bytes] = []
    for i in range(0, len(stream), chunk):
        out += decoder.feed(stream[i : i + chunk])
    assert out == payloads


@pytest.mark.parametrize("size", [-1, 2**31 - 1])
def test_forged_frame_sizes_are_decode_errors(size: int) -> None:
    with pytest.raises(DecodeError, match="frame size"):
        FrameDecoder(max_frame_bytes=1024).feed(struct.pack(">i", size) + b"xx")


def test_truncated_response_is_a_decode_error() -> None:
    # correlation id 5, then a flexible header's tag buffer, then half an int32 of throttle time
    with pytest.raises(DecodeError, match="HeartbeatResponse"):
        decode_response(b"\x00\x00\x00\x05\x00\x00\x00", HeartbeatResponse)
