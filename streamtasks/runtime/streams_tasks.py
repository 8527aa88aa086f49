"""Where streamtasks' task ids and a streams group's meet (the one place they are mapped).

A streams group names a task by (subtopology id string, partition); streamtasks by
:class:`~topology.ids.TaskId` (subtopology number, partition). The App declares its
subtopology ``n`` as the string ``str(n)``, as Kafka Streams numbers its subtopologies, so the
mapping is the decimal form both ways. A task's partitions are those of its subtopology's source
and repartition source topics, at the task's partition, as the declared heartbeat topology
names them; what the broker assigns reaches the consumer as that partition set, with the
standby and warm-up tasks in an :class:`~streamtasks.protocol.userdata.AssignmentInfo`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from streamtasks.errors import LocalProtocolError
from streamtasks.membership.streams import Task
from streamtasks.protocol.streams_group import TaskOffset, Topology
from streamtasks.protocol.userdata import AssignmentInfo, encode_assignment_info
from topology.ids import TaskId, TopicPartition

__all__ = ["TaskPartitions", "assignment_user_data", "kafka_task", "task_id", "task_offsets"]


def task_id(task: Task) -> TaskId:
    """streamtasks' id of a streams-group task (LocalProtocolError for a subtopology id that is
    not a decimal number: not one of the App's)."""
    subtopology, partition = task
    if not subtopology.isdigit():
        raise LocalProtocolError(f"subtopology id {subtopology!r} is not one of streamtasks' (a number)")
    return TaskId(int(subtopology), partition)


def kafka_task(tid: TaskId) -> Task:
    """The streams group's name of a streamtasks task."""
    return (str(tid.subtopology), tid.partition)


class TaskPartitions:
    """The input partitions of each task of a declared heartbeat topology."""

    def __init__(self, topology: Topology) -> None:
        self._topics: dict[str, tuple[str, ...]] = {
            s.subtopology_id: (*s.source_topics, *(t.name for t in s.repartition_source_topics))
            for s in topology.subtopologies
        }

    def of(self, tasks: Iterable[Task]) -> tuple[TopicPartition, ...]:
        """The partitions ``tasks`` read, sorted (a task of an undeclared subtopology: error)."""
        out: set[TopicPartition] = set()
        for subtopology, partition in tasks:
            topics = self._topics.get(subtopology)
            if topics is None:
                raise LocalProtocolError(f"the broker assigned a task of unknown subtopology {subtopology!r}")
            out.update(TopicPartition(t, partition) for t in topics)
        return tuple(sorted(out))


def assignment_user_data(active: Iterable[Task], standby: Iterable[Task], warmup: Iterable[Task]) -> bytes:
    """The tasks the broker gave, as the App's assignment user data (what its streams assignor
    reads for the standbys and warm-ups; the partitions stay the source of truth for actives)."""
    return encode_assignment_info(
        AssignmentInfo(
            active_tasks=frozenset(map(task_id, active)),
            standby_tasks=frozenset(map(task_id, standby)),
            warmup_tasks=frozenset(map(task_id, warmup)),
        )
    )


def task_offsets(sums: Mapping[TaskId, int]) -> tuple[TaskOffset, ...]:
    """Per-task offset sums as the heartbeat's ``TaskOffsets`` (sorted; negative sums, such as
    the running-active marker of the classic subscription, are left out)."""
    return tuple(
        TaskOffset(subtopology_id=s, partition=p, offset=off)
        for (s, p), off in sorted((kafka_task(t), off) for t, off in sums.items())
        if off >= 0
    )
