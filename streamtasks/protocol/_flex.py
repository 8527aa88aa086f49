"""Kafka's flexible-version encodings (KIP-482) over the bounds-checked :mod:`._buf` primitives.

Compact strings, bytes and arrays carry ``uvarint(length + 1)`` (0 is null); every struct ends
in a tagged-field section (``uvarint count``, then per field ``uvarint tag``, ``uvarint size``
and ``size`` bytes). Readers raise :class:`~streamtasks.errors.DecodeError` and never trust a
length beyond the bytes left; writers raise :class:`~streamtasks.errors.LocalProtocolError` for
values Kafka cannot carry (strings longer than 32,767 UTF-8 bytes, as Kafka's own writer).

Two rules are stricter than Kafka's reader, never than its writer: a varint must be in its
shortest form (inherited from :class:`._buf.Reader`), a boolean byte must be 0 or 1, and a tag
may appear only once in a section.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TypeVar

from streamtasks.errors import DecodeError, LocalProtocolError
from streamtasks.protocol._buf import INT16_MAX, INT32_MAX, Reader, Writer

__all__ = [
    "check_version",
    "finish",
    "read_bool",
    "read_compact_array_count",
    "read_compact_bytes",
    "read_compact_int32s",
    "read_compact_nullable_array_count",
    "read_compact_nullable_string",
    "read_compact_string",
    "read_compact_uuids",
    "read_nullable_struct_marker",
    "read_tagged_fields",
    "write_bool",
    "write_compact_array_count",
    "write_compact_bytes",
    "write_compact_int32s",
    "write_compact_nullable_array_count",
    "write_compact_nullable_string",
    "write_compact_string",
    "write_compact_uuids",
    "write_tagged_fields",
]

T = TypeVar("T")

# A compact length is uvarint(length + 1); Kafka reads it as an unsigned 32-bit value.
_MAX_COMPACT = INT32_MAX


def check_version(version: int, versions: tuple[int, int], what: str, *, decoding: bool) -> None:
    """A version outside ``versions`` (lowest, highest): DecodeError when decoding, else
    LocalProtocolError."""
    lo, hi = versions
    if not lo <= version <= hi:
        message = f"{what} version {version} is not supported (only {lo}-{hi})"
        raise DecodeError(message) if decoding else LocalProtocolError(message)


def finish(r: Reader) -> None:
    """A message body must end where its last field does."""
    if r.remaining:
        raise r.fail(f"{r.remaining} trailing byte(s)")


def _compact_length(r: Reader, field: str) -> int | None:
    raw = r.uvarint(field, _MAX_COMPACT)
    return None if raw == 0 else raw - 1


def read_compact_nullable_string(r: Reader, field: str) -> str | None:
    length = _compact_length(r, field)
    if length is None:
        return None
    if length > INT16_MAX:
        raise r.fail(f"{field} has length {length}, above Kafka's string limit {INT16_MAX}")
    raw = r.raw(length)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise r.fail(f"{field} is not valid UTF-8: {exc.reason}") from None


def read_compact_string(r: Reader, field: str) -> str:
    value = read_compact_nullable_string(r, field)
    if value is None:
        raise r.fail(f"{field} must not be null")
    return value


def read_compact_bytes(r: Reader, field: str) -> bytes:
    length = _compact_length(r, field)
    if length is None:
        raise r.fail(f"{field} must not be null")
    return r.raw(length)


def read_compact_nullable_array_count(r: Reader, field: str, min_element_size: int) -> int | None:
    count = _compact_length(r, field)
    if count is None:
        return None
    if count * min_element_size > r.remaining:
        raise r.fail(
            f"{field} claims {count} element(s) of at least {min_element_size} byte(s) "
            f"but only {r.remaining} byte(s) are left"
        )
    return count


def read_compact_array_count(r: Reader, field: str, min_element_size: int) -> int:
    count = read_compact_nullable_array_count(r, field, min_element_size)
    if count is None:
        raise r.fail(f"{field} must not be null")
    return count


def read_compact_int32s(r: Reader, field: str) -> tuple[int, ...]:
    count = read_compact_array_count(r, field, 4)
    return tuple(r.int32() for _ in range(count))


def read_compact_uuids(r: Reader, field: str) -> tuple[uuid.UUID, ...]:
    count = read_compact_array_count(r, field, 16)
    return tuple(r.uuid() for _ in range(count))


def read_bool(r: Reader, field: str) -> bool:
    value = r.int8()
    if value not in (0, 1):
        raise r.fail(f"{field} is the byte {value}, not a boolean (0 or 1)")
    return value == 1


def read_nullable_struct_marker(r: Reader, field: str) -> bool:
    """A nullable struct starts with int8 -1 (null) or 1 (present); True when present."""
    marker = r.int8()
    if marker == -1:
        return False
    if marker != 1:
        raise r.fail(f"{field} starts with {marker}, expected -1 (null) or 1")
    return True


def read_tagged_fields(
    r: Reader,
    what: str,
    known: Mapping[int, Callable[[Reader], T]],
) -> dict[int, T]:
    """Read a tagged-field section. Fields with a tag in ``known`` are parsed by their reader
    from exactly their ``size`` bytes (a reader that stops early or runs over is an error);
    unknown tags are skipped, as Kafka skips them."""
    count = r.uvarint(f"{what} tagged field count", INT32_MAX)
    if count * 2 > r.remaining:
        raise r.fail(f"{what}: {count} tagged field(s) cannot fit in {r.remaining} byte(s)")
    found: dict[int, T] = {}
    seen: set[int] = set()
    for _ in range(count):
        tag = r.uvarint(f"{what} tag", INT32_MAX)
        if tag in seen:
            raise r.fail(f"{what}: tag {tag} appears twice")
        seen.add(tag)
        size = r.uvarint(f"{what} tag {tag} size", INT32_MAX)
        body = r.raw(size)
        parse = known.get(tag)
        if parse is None:
            continue
        sub = Reader(body, f"{r.what}: {what} tag {tag}")
        found[tag] = parse(sub)
        if sub.remaining:
            raise r.fail(f"{what}: tag {tag} has {sub.remaining} byte(s) after its value")
    return found


# -- writers -----------------------------------------------------------------------------------


def _utf8(value: str, field: str) -> bytes:
    try:
        raw = value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise LocalProtocolError(f"{field} cannot be encoded as UTF-8: {exc.reason}") from None
    if len(raw) > INT16_MAX:
        raise LocalProtocolError(f"{field} is {len(raw)} bytes long, above Kafka's limit {INT16_MAX}")
    return raw


def write_compact_nullable_string(w: Writer, value: str | None, field: str) -> None:
    if value is None:
        w.uvarint(0)
        return
    raw = _utf8(value, field)
    w.uvarint(len(raw) + 1)
    w.raw(raw)


def write_compact_string(w: Writer, value: str, field: str) -> None:
    write_compact_nullable_string(w, value, field)


def write_compact_bytes(w: Writer, value: bytes, field: str) -> None:
    if len(value) >= _MAX_COMPACT:
        raise LocalProtocolError(f"{field} is {len(value)} bytes long, too long for Kafka")
    w.uvarint(len(value) + 1)
    w.raw(value)


def write_compact_nullable_array_count(w: Writer, count: int | None, field: str) -> None:
    if count is None:
        w.uvarint(0)
        return
    if not 0 <= count < _MAX_COMPACT:
        raise LocalProtocolError(f"{field} has {count} elements, too many for Kafka")
    w.uvarint(count + 1)


def write_compact_array_count(w: Writer, count: int, field: str) -> None:
    write_compact_nullable_array_count(w, count, field)


def write_compact_int32s(w: Writer, values: Sequence[int], field: str) -> None:
    write_compact_array_count(w, len(values), field)
    for value in values:
        w.int32(value, field)


def write_compact_uuids(w: Writer, values: Sequence[uuid.UUID], field: str) -> None:
    write_compact_array_count(w, len(values), field)
    for value in values:
        w.raw(value.bytes)


def write_bool(w: Writer, value: bool) -> None:
    w.int8(1 if value else 0)


def write_tagged_fields(w: Writer, fields: Iterable[tuple[int, bytes]]) -> None:
    """A tagged-field section from (tag, encoded value) pairs; tags are written ascending."""
    ordered = sorted(fields)
    w.uvarint(len(ordered))
    previous = -1
    for tag, body in ordered:
        if tag == previous:
            raise LocalProtocolError(f"tag {tag} written twice")
        previous = tag
        w.uvarint(tag)
        w.uvarint(len(body))
        w.raw(body)
