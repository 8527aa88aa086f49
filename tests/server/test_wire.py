"""Request headers as the server reads them: v1 for non-flexible versions, v2 (tagged fields)
for flexible ones, the private keys flexible; DecodeError for what cannot be read."""

from __future__ import annotations

import struct

import pytest

from streamtasks.errors import DecodeError
from streamtasks.runtime.framing import encode_raw_request
from streamtasks.server.wire import parse_request, response_frame


def test_flexible_header_of_a_private_key() -> None:
    frame = encode_raw_request(30848, 0, b"BODY", correlation_id=7, client_id="c")
    header, body = parse_request(frame[4:])
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (30848, 0, 7, "c")
    assert body == b"BODY"


def test_non_flexible_header_has_no_tagged_fields() -> None:
    payload = struct.pack(">hhih", 8, 2, 3, 1) + b"c" + b"BODY"  # OffsetCommit v2: header v1
    header, body = parse_request(payload)
    assert header.api_key == 8
    assert body == b"BODY"


@pytest.mark.parametrize(
    "payload",
    [
        b"",
        b"\x00\x08\x00",
        struct.pack(">hhih", 8, 2, 3, 50) + b"short",
        struct.pack(">hhih", 12345, 99, 1, -1),
    ],
)
def test_unreadable_headers(payload: bytes) -> None:
    with pytest.raises(DecodeError):
        parse_request(payload)


def test_response_frames() -> None:
    assert response_frame(5, b"x", flexible_header=True) == struct.pack(">ii", 6, 5) + b"\x00x"
    assert response_frame(5, b"x", flexible_header=False) == struct.pack(">ii", 5, 5) + b"x"
