"""The topology's tasks at the group's partition counts, with the lookups the leader uses
(internal to :class:`~streamtasks.streams.assignor.StreamsPartitionAssignor`).

Building them is linear in the tasks (100,000 tasks: about a second), and the counts only change
when a topic grows, so the leader keeps the table of the last counts it saw
(:class:`LastTaskTable`). Everything in a table is immutable or treated as such.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from assignors.types import TaskSpec
from topology.ids import TaskId, TopicPartition
from topology.model import TaskInfo, Topology

__all__ = ["LastTaskTable", "TaskTable"]


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskTable:
    """Every task at some source partition counts (``Topology.tasks``), by id and by partition."""

    tasks: tuple[TaskInfo, ...]
    by_id: Mapping[TaskId, TaskInfo]
    #: The task reading each source partition.
    partition_task: Mapping[TopicPartition, TaskId]
    #: The task assignor's view of each task, in task order.
    specs: tuple[TaskSpec, ...]

    @classmethod
    def of(cls, topology: Topology, sources: Mapping[str, int]) -> TaskTable:
        """Raises :class:`~streamtasks.errors.TopologyError` as ``Topology.tasks`` does."""
        tasks = topology.tasks(sources)
        return cls(
            tasks=tasks,
            by_id={t.id: t for t in tasks},
            partition_task={tp: t.id for t in tasks for tp in t.source_partitions},
            specs=tuple(TaskSpec.of_task(t) for t in tasks),
        )


class LastTaskTable:
    """The table of the last source partition counts asked for (one topology's)."""

    def __init__(self, topology: Topology) -> None:
        self._topology = topology
        self._last: tuple[tuple[tuple[str, int], ...], TaskTable] | None = None

    def get(self, sources: Mapping[str, int]) -> TaskTable:
        key = tuple(sorted(sources.items()))
        if self._last is None or self._last[0] != key:
            self._last = (key, TaskTable.of(self._topology, sources))
        return self._last[1]
