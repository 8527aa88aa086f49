"""Serdes: how a :class:`~streamtasks.state.store.TypedStore` turns keys and values into bytes.

A serde is anything with ``serialize(obj) -> bytes`` and ``deserialize(bytes) -> obj``
(:class:`Serde`). The built-in ones use the byte layouts of Kafka's own serializers, so a store's
changelog topic can be read by a Kafka Streams application and vice versa:

=========  ==========================================================================
``BYTES``  the bytes themselves
``STRING`` UTF-8 (strict: undecodable bytes are an error, not replacement characters)
``INT64``  8 bytes, big-endian two's complement (Kafka's ``LongSerializer``)
``JSON``   compact UTF-8 JSON with sorted keys, so equal values give equal bytes
=========  ==========================================================================

Bytes a serde cannot read raise :class:`SerdeError` naming the serde; a value of the wrong
Python type raises :class:`TypeError`. A store orders its keys by their *serialized* bytes: for
``INT64`` that puts negative numbers after all non-negative ones.
"""

from __future__ import annotations

import json
import struct
from typing import Any, Protocol, TypeVar

from streamtasks.errors import SerdeError

__all__ = [
    "BYTES",
    "INT64",
    "JSON",
    "STRING",
    "BytesSerde",
    "Int64Serde",
    "JsonSerde",
    "Serde",
    "StringSerde",
]

T = TypeVar("T")

_INT64 = struct.Struct(">q")


class Serde(Protocol[T]):
    """Turns values of one type into bytes and back; ``deserialize(serialize(x)) == x``."""

    def serialize(self, obj: T, /) -> bytes: ...

    def deserialize(self, data: bytes, /) -> T: ...


def _require(serde: str, obj: object, expected: type) -> None:
    if not isinstance(obj, expected):
        raise TypeError(f"serde {serde} serializes {expected.__name__}, got {type(obj).__name__}")


class BytesSerde:
    """Bytes as they are."""

    name = "BYTES"

    def serialize(self, obj: bytes, /) -> bytes:
        _require(self.name, obj, bytes)
        return bytes(obj)

    def deserialize(self, data: bytes, /) -> bytes:
        return bytes(data)

    def __repr__(self) -> str:
        return self.name


class StringSerde:
    """``str`` as strict UTF-8."""

    name = "STRING"

    def serialize(self, obj: str, /) -> bytes:
        _require(self.name, obj, str)
        try:
            return obj.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise SerdeError(f"serde {self.name}: cannot encode {obj!r} as UTF-8 ({exc.reason})") from None

    def deserialize(self, data: bytes, /) -> str:
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise SerdeError(
                f"serde {self.name}: not UTF-8 ({exc.reason} at byte {exc.start} of {len(data)})"
            ) from None

    def __repr__(self) -> str:
        return self.name


class Int64Serde:
    """``int`` in ``[-2**63, 2**63)`` as 8 big-endian bytes (two's complement)."""

    name = "INT64"

    def serialize(self, obj: int, /) -> bytes:
        if isinstance(obj, bool):
            raise TypeError(f"serde {self.name} serializes int, got bool")
        _require(self.name, obj, int)
        try:
            return _INT64.pack(obj)
        except struct.error:
            raise SerdeError(f"serde {self.name}: {obj} does not fit in 64 signed bits") from None

    def deserialize(self, data: bytes, /) -> int:
        if len(data) != _INT64.size:
            raise SerdeError(f"serde {self.name}: expected {_INT64.size} bytes, got {len(data)}")
        value: int = _INT64.unpack(data)[0]
        return value

    def __repr__(self) -> str:
        return self.name


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


class JsonSerde:
    """JSON values (dicts, lists, str, int, float, bool, None) as compact, key-sorted UTF-8.

    ``NaN`` and infinities are rejected both ways (they are not JSON); tuples come back as lists.
    """

    name = "JSON"

    def serialize(self, obj: Any, /) -> bytes:
        try:
            text = json.dumps(obj, separators=(",", ":"), sort_keys=True, ensure_ascii=False, allow_nan=False)
        except TypeError as exc:
            raise TypeError(f"serde {self.name}: {exc}") from None
        except ValueError as exc:  # NaN, infinity, circular reference
            raise SerdeError(f"serde {self.name}: cannot serialize: {exc}") from None
        try:
            return text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise SerdeError(f"serde {self.name}: cannot encode as UTF-8 ({exc.reason})") from None

    def deserialize(self, data: bytes, /) -> Any:
        try:
            return json.loads(data.decode("utf-8"), parse_constant=_reject_constant)
        except UnicodeDecodeError as exc:
            raise SerdeError(f"serde {self.name}: not UTF-8 ({exc.reason} at byte {exc.start})") from None
        except ValueError as exc:  # json.JSONDecodeError is a ValueError
            raise SerdeError(f"serde {self.name}: not JSON: {exc}") from None
        except RecursionError:
            raise SerdeError(f"serde {self.name}: JSON nested too deeply") from None

    def __repr__(self) -> str:
        return self.name


BYTES: Serde[bytes] = BytesSerde()
STRING: Serde[str] = StringSerde()
INT64: Serde[int] = Int64Serde()
JSON: Serde[Any] = JsonSerde()
