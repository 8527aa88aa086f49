"""Bounds-checked binary reader and writer shared by every codec (``streamtasks.protocol``, and
the assignors that write and read their own user data, such as KIP-341's sticky userdata).

Pure and dependency-free but for the error tree, so that every layer above ``streamtasks.errors``
may use it.

Two families of primitives live here:

* Kafka's fixed-width, big-endian encoding (``int16``/``int32``/``int64``, int16-length strings,
  int32-length bytes and arrays) used by the consumer protocol and KIP-341 userdata;
* unsigned LEB128 varints (``uvarint``) used by the compact streamtasks userdata.

Every read checks the buffer first and raises :class:`~streamtasks.errors.DecodeError` on
truncation, on a negative length, on a length or element count that cannot fit in what is left
of the buffer, and on varints that overflow or are not in their shortest form. No read ever
allocates more than the remaining bytes could hold. Writers raise
:class:`~streamtasks.errors.LocalProtocolError` for values the wire format cannot carry.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence

from streamtasks.errors import DecodeError, LocalProtocolError

__all__ = [
    "INT16_MAX",
    "INT16_MIN",
    "INT32_MAX",
    "INT32_MIN",
    "INT64_MAX",
    "INT64_MIN",
    "Reader",
    "Writer",
    "uvarint_size",
]

INT16_MIN, INT16_MAX = -(1 << 15), (1 << 15) - 1
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
_UVARINT_MAX = (1 << 64) - 1

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


def uvarint_size(value: int) -> int:
    """Number of bytes :meth:`Writer.uvarint` uses for ``value``."""
    return max(1, (value.bit_length() + 6) // 7)


class Reader:
    """Reads primitives from an immutable buffer, never past its end."""

    __slots__ = ("_data", "_pos", "what")

    def __init__(self, data: bytes | bytearray | memoryview, what: str = "buffer") -> None:
        if not isinstance(data, bytes | bytearray | memoryview):
            raise DecodeError(f"{what}: expected bytes, got {type(data).__name__}")
        self._data = bytes(data)
        self._pos = 0
        #: What is being decoded, for error messages ("consumer subscription", ...).
        self.what = what

    @property
    def position(self) -> int:
        return self._pos

    @property
    def remaining(self) -> int:
        return len(self._data) - self._pos

    def fail(self, message: str) -> DecodeError:
        """A :class:`DecodeError` naming what is decoded and where."""
        return DecodeError(f"{self.what}: {message} (at byte {self._pos} of {len(self._data)})")

    def _need(self, n: int) -> None:
        if n > len(self._data) - self._pos:
            raise self.fail(f"truncated: need {n} more byte(s), {self.remaining} left")

    # -- fixed width -------------------------------------------------------------------------

    def raw(self, n: int) -> bytes:
        if n < 0:
            raise self.fail(f"negative length {n}")
        self._need(n)
        start = self._pos
        self._pos += n
        return self._data[start : self._pos]

    def int8(self) -> int:
        self._need(1)
        (value,) = _I8.unpack_from(self._data, self._pos)
        self._pos += 1
        return int(value)

    def int16(self) -> int:
        self._need(2)
        (value,) = _I16.unpack_from(self._data, self._pos)
        self._pos += 2
        return int(value)

    def int32(self) -> int:
        self._need(4)
        (value,) = _I32.unpack_from(self._data, self._pos)
        self._pos += 4
        return int(value)

    def int32s(self, count: int) -> tuple[int, ...]:
        """``count`` int32 values in one read (the caller has checked ``count >= 0``)."""
        self._need(4 * count)
        values = struct.unpack_from(f">{count}i", self._data, self._pos)
        self._pos += 4 * count
        return values

    def int64(self) -> int:
        self._need(8)
        (value,) = _I64.unpack_from(self._data, self._pos)
        self._pos += 8
        return int(value)

    def uuid(self) -> uuid.UUID:
        return uuid.UUID(bytes=self.raw(16))

    def _text(self, raw: bytes, field: str) -> str:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise self.fail(f"{field} is not valid UTF-8: {exc.reason}") from None

    # -- Kafka's classic (non-flexible) encodings ----------------------------------------------

    def kafka_string(self, field: str) -> str:
        """Kafka STRING: int16 length then UTF-8; null (-1) is an error."""
        value = self.kafka_nullable_string(field)
        if value is None:
            raise self.fail(f"{field} must not be null")
        return value

    def kafka_nullable_string(self, field: str) -> str | None:
        length = self.int16()
        if length == -1:
            return None
        if length < 0:
            raise self.fail(f"{field} has negative length {length}")
        self._need(length)
        return self._text(self.raw(length), field)

    def kafka_nullable_bytes(self, field: str) -> bytes | None:
        length = self.int32()
        if length == -1:
            return None
        if length < 0:
            raise self.fail(f"{field} has negative length {length}")
        self._need(length)
        return self.raw(length)

    def kafka_array_length(self, field: str, min_element_size: int) -> int:
        """Kafka ARRAY length (int32, non-nullable), checked against the bytes left."""
        count = self.int32()
        if count == -1:
            raise self.fail(f"{field} must not be null")
        if count < 0:
            raise self.fail(f"{field} has negative length {count}")
        if count * min_element_size > self.remaining:
            raise self.fail(
                f"{field} claims {count} element(s) of at least {min_element_size} byte(s) "
                f"but only {self.remaining} byte(s) are left"
            )
        return count

    # -- compact streamtasks encodings ---------------------------------------------------------

    def uvarint(self, field: str, max_value: int = _UVARINT_MAX) -> int:
        """Unsigned LEB128, shortest form only, at most ``max_value``."""
        data = self._data
        pos = self._pos
        end = len(data)
        if pos < end and data[pos] < 0x80:  # one byte: the common case
            result = data[pos]
            if result > max_value:
                raise self.fail(f"{field} is {result}, above the maximum {max_value}")
            self._pos = pos + 1
            return result
        result = 0
        shift = 0
        while True:
            if pos >= end:
                raise self.fail(f"truncated varint in {field}")
            byte = data[pos]
            pos += 1
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                if byte == 0 and shift:
                    raise self.fail(f"varint in {field} is not in its shortest form")
                break
            shift += 7
            if shift > 63:
                raise self.fail(f"varint in {field} is longer than 10 bytes")
        if result > max_value:
            raise self.fail(f"{field} is {result}, above the maximum {max_value}")
        self._pos = pos
        return result

    def count(self, field: str, min_element_size: int = 1) -> int:
        """A uvarint element count, checked against the bytes left."""
        n = self.uvarint(field, INT32_MAX)
        if n * min_element_size > self.remaining:
            raise self.fail(
                f"{field} claims {n} element(s) of at least {min_element_size} byte(s) "
                f"but only {self.remaining} byte(s) are left"
            )
        return n

    def vstring(self, field: str) -> str:
        """uvarint length then UTF-8."""
        length = self.uvarint(field, INT32_MAX)
        self._need(length)
        return self._text(self.raw(length), field)

    def nullable_vstring(self, field: str) -> str | None:
        """uvarint (length + 1) then UTF-8; 0 stands for null."""
        length = self.uvarint(field, INT32_MAX)
        if length == 0:
            return None
        self._need(length - 1)
        return self._text(self.raw(length - 1), field)


class Writer:
    """Appends primitives to a growing buffer; rejects values the wire cannot carry."""

    __slots__ = ("_buf",)

    def __init__(self) -> None:
        self._buf = bytearray()

    def getvalue(self) -> bytes:
        return bytes(self._buf)

    def __len__(self) -> int:
        return len(self._buf)

    @staticmethod
    def _range(value: int, lo: int, hi: int, field: str) -> None:
        if not lo <= value <= hi:
            raise LocalProtocolError(f"{field} = {value} does not fit in [{lo}, {hi}]")

    def raw(self, data: bytes) -> None:
        self._buf += data

    def int8(self, value: int, field: str = "int8") -> None:
        self._range(value, -128, 127, field)
        self._buf += _I8.pack(value)

    def int16(self, value: int, field: str = "int16") -> None:
        self._range(value, INT16_MIN, INT16_MAX, field)
        self._buf += _I16.pack(value)

    def int32(self, value: int, field: str = "int32") -> None:
        self._range(value, INT32_MIN, INT32_MAX, field)
        self._buf += _I32.pack(value)

    def int32s(self, values: Sequence[int], field: str = "int32") -> None:
        """Every value as an int32, in one write; the error names the first that does not fit."""
        if values and (min(values) < INT32_MIN or max(values) > INT32_MAX):
            for value in values:
                self._range(value, INT32_MIN, INT32_MAX, field)
        self._buf += struct.pack(f">{len(values)}i", *values)

    def int64(self, value: int, field: str = "int64") -> None:
        self._range(value, INT64_MIN, INT64_MAX, field)
        self._buf += _I64.pack(value)

    @staticmethod
    def _utf8(value: str, field: str) -> bytes:
        try:
            return value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise LocalProtocolError(f"{field} cannot be encoded as UTF-8: {exc.reason}") from None

    def kafka_nullable_string(self, value: str | None, field: str) -> None:
        if value is None:
            self._buf += _I16.pack(-1)
            return
        raw = self._utf8(value, field)
        self._range(len(raw), 0, INT16_MAX, f"length of {field}")
        self._buf += _I16.pack(len(raw))
        self._buf += raw

    def kafka_nullable_bytes(self, value: bytes | None, field: str) -> None:
        if value is None:
            self._buf += _I32.pack(-1)
            return
        self._range(len(value), 0, INT32_MAX, f"length of {field}")
        self._buf += _I32.pack(len(value))
        self._buf += value

    def kafka_array_length(self, count: int, field: str) -> None:
        self._range(count, 0, INT32_MAX, f"length of {field}")
        self._buf += _I32.pack(count)

    def uvarint(self, value: int, field: str = "uvarint") -> None:
        self._range(value, 0, _UVARINT_MAX, field)
        buf = self._buf
        while value > 0x7F:
            buf.append((value & 0x7F) | 0x80)
            value >>= 7
        buf.append(value)

    def vstring(self, value: str, field: str) -> None:
        raw = self._utf8(value, field)
        self.uvarint(len(raw), f"length of {field}")
        self._buf += raw

    def nullable_vstring(self, value: str | None, field: str) -> None:
        if value is None:
            self._buf.append(0)
            return
        raw = self._utf8(value, field)
        self.uvarint(len(raw) + 1, f"length of {field}")
        self._buf += raw
