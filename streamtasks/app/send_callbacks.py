"""What happens when a batch the tasks handed to the producer is done, and how queued outputs
are grouped into batches (:meth:`streamtasks.app.tasks.TaskSet.send_pending`).

A changelog batch's acknowledgement moves its task's changelog offset; any failure of one is
kept for :meth:`~streamtasks.app.tasks.TaskSet.raise_send_failures` (no handler may skip a
store's write). An output batch's failure goes record by record to the production handler,
unless it is retriable (Kafka Streams' rule: the tasks are revived instead).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeAlias

from aiokafka import AIOKafkaProducer, ConsumerRecord

from streamtasks.app.context import Output
from streamtasks.app.poison import PoisonRecords
from streamtasks.app.sending import BatchDone, Row, is_retriable, partition_for, partitions_of
from streamtasks.app.task import StreamTask
from streamtasks.errors import ProcessingError
from topology.ids import TaskId, TopicPartition

__all__ = ["Origin", "changelog_done", "group_outputs", "output_done"]

#: The input record being processed when an output was written (None: outside processing).
Origin: TypeAlias = ConsumerRecord[Any, Any] | None


def _failure(future: Any) -> BaseException | None:
    if future.cancelled():
        return ProcessingError("a record send was cancelled")
    exc: BaseException | None = future.exception()
    return exc


def changelog_done(task: StreamTask, tp: TopicPartition, errors: list[BaseException]) -> BatchDone:
    """A changelog batch's callback: its acknowledgement moves the task's changelog offset;
    its failure revives the tasks when retriable, and is fatal otherwise."""

    def done(first: int, count: int, future: Any) -> None:
        exc = _failure(future)
        if exc is not None:
            errors.append(exc)
        else:
            task.acknowledged(tp, future.result().offset + count - 1, count)

    return done


def output_done(
    tp: TopicPartition,
    origins: list[Origin],
    errors: list[BaseException],
    poison: PoisonRecords,
    task_of: Callable[[Origin], TaskId | None],
) -> BatchDone:
    """An output batch's callback: each record of a failed batch goes to the production
    handler (a dead-letter record, or one written outside processing, fails the app); a
    retriable failure does not: it revives the tasks."""

    def done(first: int, count: int, future: Any) -> None:
        exc = _failure(future)
        if exc is None:
            return
        if future.cancelled() or is_retriable(exc):
            errors.append(exc)
            return
        for origin in origins[first : first + count]:
            if poison.output_refused(task_of(origin), origin, tp.topic, exc):
                errors.append(exc)

    return done


async def group_outputs(
    producer: AIOKafkaProducer, outbox: Iterable[tuple[Output, Origin]]
) -> dict[TopicPartition, tuple[list[Row], list[Origin]]]:
    """Per partition, the rows to send and, at the same index, the input each was written for
    (an output without a timestamp or headers takes its input's; the partition of one without a
    partition is the default partitioner's, the topic's metadata looked up once)."""
    groups: dict[TopicPartition, tuple[list[Row], list[Origin]]] = {}
    parts: dict[str, list[int]] = {}
    for out, origin in outbox:
        part = out.partition
        if part is None:
            known = parts.get(out.topic)
            if known is None:
                known = parts[out.topic] = await partitions_of(producer, out.topic)
            part = partition_for(out.key, known)
        tp = TopicPartition(out.topic, part)
        timestamp = out.timestamp if out.timestamp is not None or origin is None else origin.timestamp
        headers = out.headers if out.headers is not None or origin is None else tuple(origin.headers)
        group = groups.get(tp)
        if group is None:
            group = groups[tp] = ([], [])
        group[0].append((out.key, out.value, timestamp, headers or ()))
        group[1].append(origin)
    return groups
