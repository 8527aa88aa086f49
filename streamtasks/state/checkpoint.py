"""Checkpoint files: the changelog offsets a task's stores on disk are known to be complete up to.

The format is Kafka's offset checkpoint text format, version 0, so a state directory written
by streamtasks reads like one written by Kafka Streams::

    0                       <- format version
    2                       <- number of entries
    app-counts-changelog 3 1042
    app-totals-changelog 3 77

One entry per line, ``<topic> <partition> <offset>`` separated by single spaces, entries sorted
by (topic, partition), every line ending in ``\\n``. The reader is strict: a wrong version, a
count that does not match the entries, a non-integer or out-of-range number, a negative
partition, a duplicate partition or anything after the last entry is a :class:`CheckpointError`
naming the file and the line. A negative offset reads as "no offset" and is left out, as in
Kafka Streams: quietly for Kafka Streams' "unknown" sentinel ``-4``, with a logged warning for
any other. The writer accepts only offsets ``>= 0``. The writer never leaves a half-written file behind: it
writes a temporary file next to the target, fsyncs it, renames it over the target and fsyncs
the directory.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from pathlib import Path

from streamtasks.errors import CheckpointError
from streamtasks.state._files import atomic_write
from topology.ids import TopicPartition

__all__ = ["CHECKPOINT_VERSION", "read_checkpoint", "write_checkpoint"]

CHECKPOINT_VERSION = 0
"""The only checkpoint format version there is."""

_INT32_MAX = 2**31 - 1
_INT64_MAX = 2**63 - 1
_INTEGER = re.compile(r"-?[0-9]+")
_OFFSET_UNKNOWN = -4  # Kafka Streams writes this for a changelog whose offset it does not know

_log = logging.getLogger(__name__)


def read_checkpoint(path: Path) -> dict[TopicPartition, int] | None:
    """The offsets in the checkpoint file at ``path``; ``None`` if there is no such file.

    Raises :class:`CheckpointError` for malformed content; other ``OSError``\\ s (a directory
    in the way, no permission) propagate.
    """
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        why = f"not UTF-8 text ({exc.reason} at byte {exc.start})"
        raise CheckpointError(f"checkpoint {path}: {why}") from None
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()  # the newline ending the last line

    def fail(lineno: int, why: str) -> CheckpointError:
        return CheckpointError(f"checkpoint {path}, line {lineno}: {why}")

    def line(lineno: int, what: str) -> str:
        if lineno > len(lines):
            raise fail(lineno, f"file ends where {what} was expected")
        return lines[lineno - 1].removesuffix("\r")

    def integer(lineno: int, text: str, what: str, maximum: int) -> int:
        if _INTEGER.fullmatch(text) is None:
            raise fail(lineno, f"{what} is not an integer: {text!r}")
        value = int(text)
        if not -maximum - 1 <= value <= maximum:
            raise fail(lineno, f"{what} {value} is out of range")
        return value

    version = integer(1, line(1, "the version"), "version", _INT32_MAX)
    if version != CHECKPOINT_VERSION:
        raise fail(1, f"unsupported version {version} (only {CHECKPOINT_VERSION} is known)")
    count = integer(2, line(2, "the entry count"), "entry count", _INT32_MAX)
    if count < 0:
        raise fail(2, f"negative entry count {count}")
    offsets: dict[TopicPartition, int] = {}
    for lineno in range(3, count + 3):
        entry = line(lineno, f"entry {lineno - 2} of {count}")
        parts = entry.split()
        if len(parts) != 3:
            raise fail(lineno, f"expected '<topic> <partition> <offset>', got {entry!r}")
        topic, partition_text, offset_text = parts
        partition = integer(lineno, partition_text, "partition", _INT32_MAX)
        if partition < 0:
            raise fail(lineno, f"negative partition {partition}")
        offset = integer(lineno, offset_text, "offset", _INT64_MAX)
        tp = TopicPartition(topic, partition)
        if tp in offsets:
            raise fail(lineno, f"duplicate entry for {tp}")
        if offset == _OFFSET_UNKNOWN:
            continue
        if offset < 0:
            _log.warning("checkpoint %s, line %d: skipped negative offset %d of %s", path, lineno, offset, tp)
            continue
        offsets[tp] = offset
    if len(lines) > count + 2:
        raise fail(count + 3, f"unexpected content after the {count} entries: {lines[count + 2]!r}")
    return offsets


def _format(path: Path, offsets: Mapping[TopicPartition, int]) -> bytes:
    def fail(why: str) -> CheckpointError:
        return CheckpointError(f"cannot write checkpoint {path}: {why}")

    entries = []
    for tp in sorted(offsets):
        offset = offsets[tp]
        topic = tp.topic
        if not topic or any(c.isspace() for c in topic):
            raise fail(f"topic {topic!r} is empty or contains whitespace")
        if not 0 <= tp.partition <= _INT32_MAX:
            raise fail(f"partition {tp.partition} of {topic!r} is out of range")
        if not 0 <= offset <= _INT64_MAX:
            raise fail(f"offset {offset} of {tp} is out of range")
        entries.append(f"{topic} {tp.partition} {offset}\n")
    text = f"{CHECKPOINT_VERSION}\n{len(entries)}\n" + "".join(entries)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise fail(f"a topic is not encodable as UTF-8 ({exc.reason})") from None


def write_checkpoint(path: Path, offsets: Mapping[TopicPartition, int]) -> None:
    """Atomically replace the checkpoint at ``path`` with ``offsets`` (sorted; may be empty).

    The directory must exist. Offsets must be ``>= 0`` and topics non-empty without whitespace,
    else :class:`CheckpointError` (nothing is written). A failure while writing leaves the old
    file, if any, untouched and removes the temporary file.
    """
    atomic_write(path, _format(path, offsets))
