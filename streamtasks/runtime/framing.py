"""Kafka request/response framing over kio's generated message classes, without IO.

A request on the wire is ``int32 size`` + request header + body; a response is ``int32 size`` +
response header + body. :func:`encode_request` builds the whole frame, :class:`FrameDecoder`
cuts a byte stream into frames, :func:`decode_response` parses one frame's payload.
"""

from __future__ import annotations

import io
import struct
from typing import Any, TypeVar

from kio.serial import entity_reader, entity_writer
from kio.serial.errors import DecodeError as KioDecodeError

from streamtasks.errors import DecodeError
from streamtasks.protocol._buf import Reader
from streamtasks.protocol._flex import read_tagged_fields

__all__ = [
    "MAX_FRAME_BYTES",
    "FrameDecoder",
    "decode_response",
    "encode_raw_request",
    "encode_request",
    "split_flexible_response",
]

#: Largest response frame accepted (Kafka's socket.request.max.bytes default is 100 MiB).
MAX_FRAME_BYTES = 100 * 1024 * 1024

R = TypeVar("R")

_writers: dict[type[Any], Any] = {}
_readers: dict[type[Any], Any] = {}


def _writer(cls: type[Any]) -> Any:
    if cls not in _writers:
        _writers[cls] = entity_writer(cls)
    return _writers[cls]


def _reader(cls: type[Any]) -> Any:
    if cls not in _readers:
        _readers[cls] = entity_reader(cls)
    return _readers[cls]


def encode_request(request: Any, *, correlation_id: int, client_id: str = "streamtasks") -> bytes:
    """The complete frame (size prefix included) for a kio request entity."""
    cls = type(request)
    header_cls = cls.__header_schema__
    header = header_cls(
        request_api_key=cls.__api_key__,
        request_api_version=cls.__version__,
        correlation_id=correlation_id,
        client_id=client_id,
    )
    buf = io.BytesIO()
    buf.write(b"\0\0\0\0")
    _writer(header_cls)(buf, header)
    _writer(cls)(buf, request)
    frame = buf.getbuffer()
    struct.pack_into(">i", frame, 0, len(frame) - 4)
    return bytes(frame)


def decode_response(payload: bytes, response_type: type[R]) -> tuple[int, R]:
    """Parse one response frame's payload (without the size prefix): (correlation id, body)."""
    view = memoryview(payload)
    try:
        header, offset = _reader(response_type.__header_schema__)(view, 0)  # type: ignore[attr-defined]
        body, _ = _reader(response_type)(view, offset)
    except (KioDecodeError, ValueError, IndexError, TypeError, struct.error, UnicodeDecodeError) as exc:
        raise DecodeError(f"malformed {response_type.__name__}: {exc}") from exc
    return int(header.correlation_id), body


def encode_raw_request(
    api_key: int, api_version: int, body: bytes, *, correlation_id: int, client_id: str = "streamtasks"
) -> bytes:
    """The complete frame for a request body encoded elsewhere (streamtasks' own codecs, which
    keep fields kio does not know): request header v2 (the flexible requests' header) + body."""
    client = client_id.encode()
    header = struct.pack(">hhih", api_key, api_version, correlation_id, len(client)) + client + b"\0"
    return struct.pack(">i", len(header) + len(body)) + header + body


def split_flexible_response(payload: bytes) -> tuple[int, bytes]:
    """A flexible response frame's payload (response header v1) as (correlation id, body)."""
    r = Reader(payload, "response header v1")
    correlation_id = r.int32()
    read_tagged_fields(r, "response header", {})
    return correlation_id, payload[r.position :]


class FrameDecoder:
    """Feed it bytes as they arrive; it yields complete frame payloads."""

    __slots__ = ("_buf", "_max")

    def __init__(self, max_frame_bytes: int = MAX_FRAME_BYTES) -> None:
        self._buf = bytearray()
        self._max = max_frame_bytes

    def limit(self, max_frame_bytes: int) -> None:
        """Change the largest frame accepted from the next frame on (a server accepts only
        small frames before a client has authenticated, as Kafka does)."""
        self._max = max_frame_bytes

    def feed(self, data: bytes) -> list[bytes]:
        self._buf += data
        frames: list[bytes] = []
        while len(self._buf) >= 4:
            (size,) = struct.unpack_from(">i", self._buf, 0)
            if size < 0 or size > self._max:
                raise DecodeError(f"frame size {size} outside 0..{self._max}")
            if len(self._buf) < 4 + size:
                break
            frames.append(bytes(self._buf[4 : 4 + size]))
            del self._buf[: 4 + size]
        return frames
