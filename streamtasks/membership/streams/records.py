"""A streams member's tasks: active, standby and warm-up, as sets of (subtopology id,
partition), and their wire form (``TaskIds`` lists grouped by subtopology, sorted)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from streamtasks.protocol.streams_group import TaskIds

__all__ = ["NO_TASKS", "Task", "Tasks", "task_ids", "tasks_of"]

#: One task: (subtopology id, partition).
Task = tuple[str, int]


def tasks_of(items: Iterable[TaskIds] | None) -> frozenset[Task]:
    return frozenset((t.subtopology_id, p) for t in items or () for p in t.partitions)


def task_ids(tasks: Iterable[Task]) -> tuple[TaskIds, ...]:
    """The wire form: one ``TaskIds`` per subtopology, subtopologies and partitions sorted."""
    grouped: dict[str, list[int]] = {}
    for subtopology, partition in sorted(tasks):
        grouped.setdefault(subtopology, []).append(partition)
    return tuple(TaskIds(subtopology_id=s, partitions=tuple(ps)) for s, ps in grouped.items())


@dataclass(frozen=True, slots=True, kw_only=True)
class Tasks:
    """A member's tasks of each kind (a target the broker gave, or what it owns)."""

    active: frozenset[Task] = frozenset()
    standby: frozenset[Task] = frozenset()
    warmup: frozenset[Task] = frozenset()

    @classmethod
    def of(
        cls,
        active: Iterable[TaskIds] | None,
        standby: Iterable[TaskIds] | None,
        warmup: Iterable[TaskIds] | None,
    ) -> Tasks:
        return cls(active=tasks_of(active), standby=tasks_of(standby), warmup=tasks_of(warmup))

    @property
    def empty(self) -> bool:
        return not (self.active or self.standby or self.warmup)


NO_TASKS = Tasks()
