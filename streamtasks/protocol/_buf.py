"""The codecs' reader and writer: :mod:`streamtasks.wire` (which the assignors use too)."""

from streamtasks.wire import (
    INT16_MAX,
    INT16_MIN,
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    Reader,
    Writer,
    uvarint_size,
)

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
