"""Frames as the server sees them: the request header, the body after it, response frames,
and kio's generated classes for the APIs the server decodes with kio.

A request frame's payload is ``api_key:int16 api_version:int16 correlation_id:int32
client_id:string?`` then, for a flexible version (request header v2), a tagged-field section,
then the body. A response is ``correlation_id:int32`` then, for a flexible version except
ApiVersions (response header v1), an empty tagged-field section, then the body.
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass
from typing import Any

from kio.index import KioIndexError, load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from streamtasks.errors import DecodeError
from streamtasks.protocol._buf import Reader
from streamtasks.protocol._flex import read_tagged_fields

__all__ = [
    "API_VERSIONS",
    "PRIVATE_API_KEYS",
    "RequestHeader",
    "decode_kio_request",
    "encode_kio_response",
    "kio_request_class",
    "kio_response_class",
    "parse_request",
    "response_frame",
]

API_VERSIONS = 18
#: ConsumerGroupPrepareAssignment / InstallAssignment (docs/protocol.md): flexible, v0 only.
PRIVATE_API_KEYS = frozenset({30848, 30849})
_FLEXIBLE_FROM = {68: 0, 69: 0, 88: 0, 89: 0, 30848: 0, 30849: 0}

_readers: dict[type[Any], Any] = {}
_writers: dict[type[Any], Any] = {}


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str


def kio_request_class(api_key: int, version: int) -> type[Any]:
    try:
        return load_request_schema(api_key, version)
    except (KioIndexError, ImportError) as exc:
        raise DecodeError(f"no schema for api {api_key} v{version}: {exc}") from None


def kio_response_class(api_key: int, version: int) -> type[Any]:
    try:
        return load_response_schema(api_key, version)
    except (KioIndexError, ImportError) as exc:
        raise DecodeError(f"no schema for api {api_key} v{version}: {exc}") from None


def _flexible(api_key: int, version: int) -> bool:
    if api_key in _FLEXIBLE_FROM:
        return version >= _FLEXIBLE_FROM[api_key]
    return bool(kio_request_class(api_key, version).__flexible__)


def parse_request(payload: bytes, *, body: bool = True) -> tuple[RequestHeader, bytes]:
    """The header and the body of one request frame's payload; DecodeError when the header is
    malformed or (with ``body``) names an API and version with no known schema."""
    r = Reader(payload, "request header")
    api_key, api_version, correlation_id = r.int16(), r.int16(), r.int32()
    client_id = r.kafka_nullable_string("client id") or ""
    header = RequestHeader(
        api_key=api_key, api_version=api_version, correlation_id=correlation_id, client_id=client_id
    )
    if not body:
        return header, b""
    if _flexible(api_key, api_version):
        read_tagged_fields(r, "request header", {})
    return header, payload[r.position :]


def response_frame(correlation_id: int, body: bytes, *, flexible_header: bool) -> bytes:
    """The whole response frame (size prefix included)."""
    header = struct.pack(">i", correlation_id) + (b"\0" if flexible_header else b"")
    return struct.pack(">i", len(header) + len(body)) + header + body


def decode_kio_request(api_key: int, version: int, body: bytes) -> Any:
    """A request body as kio's entity; DecodeError on anything kio cannot read, or trailing bytes."""
    cls = kio_request_class(api_key, version)
    if cls not in _readers:
        _readers[cls] = entity_reader(cls)
    try:
        entity, end = _readers[cls](memoryview(body), 0)
    except Exception as exc:  # kio's native reader raises KeyError, ValueError, its own errors...
        raise DecodeError(f"malformed {cls.__name__} v{version}: {exc!r}") from None
    if end != len(body):
        raise DecodeError(f"{cls.__name__} v{version}: {len(body) - end} trailing byte(s)")
    return entity


def encode_kio_response(entity: Any, correlation_id: int) -> bytes:
    """The response frame of a kio response entity (its header version from its schema)."""
    cls = type(entity)
    if cls not in _writers:
        _writers[cls] = entity_writer(cls)
    buf = io.BytesIO()
    _writers[cls](buf, entity)
    flexible_header = cls.__header_schema__.__version__ >= 1
    return response_frame(correlation_id, buf.getvalue(), flexible_header=flexible_header)
