"""Compact encodings of task collections, shared by the streamtasks userdata versions.

Tasks are grouped by subtopology. Subtopology ids and partitions are sorted and written as
gaps: the first value as is, every next one as ``value - previous - 1`` (so consecutive
partitions cost one byte each). Every number is an unsigned LEB128 varint. The decoders accept
only this canonical form (no empty groups, strictly increasing ids), so ``encode(decode(b)) == b``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from streamtasks.protocol._buf import INT32_MAX, INT64_MAX, Reader, Writer
from topology.ids import TaskId

__all__ = [
    "OFFSET_SUM_BIAS",
    "read_client_tags",
    "read_host_tasks",
    "read_offset_sums",
    "read_task_set",
    "write_client_tags",
    "write_host_tasks",
    "write_offset_sums",
    "write_task_set",
]

#: Offset sums are written as ``sum + OFFSET_SUM_BIAS`` so the sentinels -2 (running) and -3
#: (unknown) stay unsigned.
OFFSET_SUM_BIAS = 3


def _grouped(tasks: Iterable[TaskId]) -> list[tuple[int, list[TaskId]]]:
    groups: list[tuple[int, list[TaskId]]] = []
    for t in sorted(tasks, key=lambda t: (t.subtopology, t.partition)):
        if not groups or groups[-1][0] != t.subtopology:
            groups.append((t.subtopology, []))
        groups[-1][1].append(t)
    return groups


def _write_groups(
    w: Writer, tasks: Iterable[TaskId], field: str, payload: Callable[[TaskId], None] | None = None
) -> None:
    """The writer's half of :func:`_read_groups`; ``payload`` writes per-task data after each id."""
    groups = _grouped(tasks)
    w.uvarint(len(groups), field)
    prev_s = -1
    for s, members in groups:
        w.uvarint(s - prev_s - 1, field)
        prev_s = s
        w.uvarint(len(members), field)
        prev_p = -1
        for t in members:
            w.uvarint(t.partition - prev_p - 1, field)
            prev_p = t.partition
            if payload is not None:
                payload(t)


def write_task_set(w: Writer, tasks: Iterable[TaskId], field: str) -> None:
    _write_groups(w, tasks, field)


def _read_groups(r: Reader, field: str, min_task_size: int) -> Iterable[tuple[int, int]]:
    """Yield (subtopology, partition) pairs; the caller reads per-task payloads in between."""
    groups = r.count(field, 2 + min_task_size)
    s = -1
    for _ in range(groups):
        s += r.uvarint(field, INT32_MAX) + 1
        if s > INT32_MAX:
            raise r.fail(f"{field}: subtopology id {s} does not fit in an int32")
        n = r.count(field, min_task_size)
        if n == 0:
            raise r.fail(f"{field}: empty group for subtopology {s}")
        p = -1
        for _ in range(n):
            p += r.uvarint(field, INT32_MAX) + 1
            if p > INT32_MAX:
                raise r.fail(f"{field}: partition {p} does not fit in an int32")
            yield s, p


def read_task_set(r: Reader, field: str) -> frozenset[TaskId]:
    return frozenset(TaskId(s, p) for s, p in _read_groups(r, field, 1))


def write_offset_sums(w: Writer, sums: Mapping[TaskId, int], field: str) -> None:
    _write_groups(w, sums, field, lambda t: w.uvarint(sums[t] + OFFSET_SUM_BIAS, field))


def read_offset_sums(r: Reader, field: str) -> dict[TaskId, int]:
    out: dict[TaskId, int] = {}
    for s, p in _read_groups(r, field, 2):
        value = r.uvarint(field, INT64_MAX + OFFSET_SUM_BIAS) - OFFSET_SUM_BIAS
        if value == -1:
            raise r.fail(f"{field}: offset sum -1 of task {s}_{p} is not a valid value or sentinel")
        out[TaskId(s, p)] = value
    return out


def write_host_tasks(w: Writer, by_host: Mapping[str, frozenset[TaskId]], field: str) -> None:
    w.uvarint(len(by_host), field)
    for host in sorted(by_host):
        w.vstring(host, field)
        write_task_set(w, by_host[host], field)


def read_host_tasks(r: Reader, field: str) -> dict[str, frozenset[TaskId]]:
    out: dict[str, frozenset[TaskId]] = {}
    previous: str | None = None
    for _ in range(r.count(field, 2)):
        host = r.vstring(field)
        if previous is not None and host <= previous:
            raise r.fail(f"{field}: hosts are not strictly increasing ({previous!r}, {host!r})")
        previous = host
        out[host] = read_task_set(r, field)
    return out


def write_client_tags(w: Writer, tags: Mapping[str, str], field: str) -> None:
    w.uvarint(len(tags), field)
    for key in sorted(tags):
        w.vstring(key, field)
        w.vstring(tags[key], field)


def read_client_tags(r: Reader, field: str) -> dict[str, str]:
    out: dict[str, str] = {}
    previous: str | None = None
    for _ in range(r.count(field, 2)):
        key = r.vstring(field)
        if previous is not None and key <= previous:
            raise r.fail(f"{field}: keys are not strictly increasing ({previous!r}, {key!r})")
        previous = key
        out[key] = r.vstring(field)
    return out
