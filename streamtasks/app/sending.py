"""Handing records to the producer one batch per partition instead of one send per record.

``AIOKafkaProducer.send`` costs a coroutine, a future, a metadata wait and a partitioner call
per record; a run of records for one partition goes out through ``create_batch`` /
``send_batch`` instead: one future per batch of up to ``max_batch_size`` bytes. Records of one
partition keep their order (aiokafka queues a partition's batches in submission order), so a
key's records keep theirs. Records without a partition are partitioned as the producer's
default partitioner does (murmur2 of the key), so a key lands where ``send`` would put it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaTimeoutError
from aiokafka.partitioner import DefaultPartitioner

from streamtasks.app.handlers import Headers
from streamtasks.app.transactions import is_fenced
from streamtasks.errors import ProcessingError, TaskCorruptedError, TaskMigratedError
from topology.ids import TopicPartition

__all__ = [
    "BatchDone",
    "Keyed",
    "Row",
    "by_partition",
    "is_retriable",
    "partition_for",
    "partitions_of",
    "send_failure",
    "send_rows",
]

#: One record to send: (key, value, timestamp in ms or None for the producer's clock, headers).
Row = tuple[bytes | None, bytes | None, int | None, Headers]
#: Called when a batch is done: (index in ``rows`` of the batch's first record, records in the
#: batch, its future).
BatchDone = Callable[[int, int, Any], None]
#: A record for a partition: (partition, key, value, timestamp, headers).
Keyed = tuple[TopicPartition, bytes | None, bytes | None, int | None, Headers]

_partitioner = DefaultPartitioner()
#: Handed for a record without headers (aiokafka only reads it).
_NO_HEADERS: list[tuple[str, bytes]] = []


def by_partition(records: Iterable[Keyed]) -> dict[TopicPartition, list[Row]]:
    """Group records per partition, each group in the order given."""
    out: dict[TopicPartition, list[Row]] = {}
    for tp, key, value, timestamp, headers in records:
        rows = out.get(tp)
        if rows is None:
            rows = out[tp] = []
        rows.append((key, value, timestamp, headers))
    return out


async def partitions_of(producer: AIOKafkaProducer, topic: str) -> list[int]:
    """The partitions of ``topic`` the producer knows (metadata fetched if it has none yet)."""
    return sorted(await producer.partitions_for(topic))


def partition_for(key: bytes | None, partitions: list[int]) -> int:
    """The partition the producer's default partitioner gives ``key`` among ``partitions``."""
    return int(_partitioner(key, partitions, partitions))


async def send_rows(
    producer: AIOKafkaProducer, tp: TopicPartition, rows: Sequence[Row], done: BatchDone
) -> None:
    """Hand ``rows`` for ``tp`` to the producer in as few batches as they fit in; ``done`` is
    attached to each batch's future (its result's ``offset`` is the batch's first offset)."""
    batch = producer.create_batch()
    first = count = 0
    for i, (key, value, timestamp, row_headers) in enumerate(rows):
        headers = list(row_headers) if row_headers else _NO_HEADERS  # aiokafka's C builder: a list
        if batch.append(timestamp=timestamp, key=key, value=value, headers=headers) is None:
            await _submit(producer, batch, tp, first=first, count=count, done=done)
            batch, first, count = producer.create_batch(), i, 0
            if batch.append(timestamp=timestamp, key=key, value=value, headers=headers) is None:
                raise ProcessingError(f"a record for {tp} does not fit in an empty batch")
        count += 1
    if count:
        await _submit(producer, batch, tp, first=first, count=count, done=done)


async def _submit(
    producer: AIOKafkaProducer, batch: Any, tp: TopicPartition, *, first: int, count: int, done: BatchDone
) -> None:
    batch.close()
    future = await producer.send_batch(batch, tp.topic, partition=tp.partition)
    future.add_done_callback(lambda f: done(first, count, f))


def is_retriable(exc: BaseException) -> bool:
    """A send failure Kafka Streams does not hand to the production handler: the producer's
    retries ran out for a retriable reason (a leader moving, NOT_ENOUGH_REPLICAS, a request
    timing out: aiokafka's ``KafkaTimeoutError`` for a batch that expired, which is Kafka's
    retriable ``TimeoutException``), or this process was fenced."""
    return bool(getattr(exc, "retriable", False)) or isinstance(exc, KafkaTimeoutError) or is_fenced(exc)


def send_failure(errors: Sequence[BaseException]) -> ProcessingError:
    """What records not delivered for ``errors`` amount to: :class:`ProcessingError` (fatal) if
    any failed for a reason that is not retriable, else :class:`TaskMigratedError` if this process
    was fenced, else :class:`TaskCorruptedError` (the tasks are revived in place)."""
    fatal = [e for e in errors if not is_retriable(e)]
    first = (fatal or list(errors))[0]
    what = f"a changelog or output record was not delivered: {first!r}"
    if fatal:
        return ProcessingError(what)
    if any(is_fenced(e) for e in errors):
        return TaskMigratedError(what)
    return TaskCorruptedError(what)
