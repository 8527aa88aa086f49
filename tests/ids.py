"""Ids for tests, in one place (as Kafka's ``AssignmentTestUtils``): topic partitions, task ids
and process ids from short specs.

``tp("foo", 2)`` and ``tp("foo-2")`` are the same partition; ``task(0, 1)`` and ``task("0_1")``
the same task; ``pid(n)`` is a process id that sorts by ``n``.
"""

from __future__ import annotations

import uuid

from topology.ids import TaskId, TopicPartition

__all__ = ["pid", "task", "tasks", "tp", "tps"]


def tp(topic: str, partition: int | None = None) -> TopicPartition:
    """``tp("foo", 2)``, or ``tp("foo-2")`` (topic, dash, partition)."""
    if partition is None:
        topic, _, number = topic.rpartition("-")
        partition = int(number)
    return TopicPartition(topic, partition)


def tps(*specs: str) -> frozenset[TopicPartition]:
    """``tps("foo-0", "foo-2")``: the set of those partitions."""
    return frozenset(tp(s) for s in specs)


def task(subtopology: int | str, partition: int | None = None) -> TaskId:
    """``task(0, 1)``, or ``task("0_1")`` (Kafka's text form)."""
    if isinstance(subtopology, str):
        return TaskId.parse(subtopology)
    assert partition is not None, "task(subtopology, partition)"
    return TaskId(subtopology, partition)


def tasks(*texts: str) -> tuple[TaskId, ...]:
    """``tasks("0_1", "0_0")``: those tasks, sorted."""
    return tuple(sorted(task(t) for t in texts))


def pid(n: int) -> uuid.UUID:
    """A process id that sorts by ``n`` (``UUID(int=n)``)."""
    return uuid.UUID(int=n)
