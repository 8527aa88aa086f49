"""The test driver's topics: partitioned in-memory logs, and the producer that writes them.

:class:`InMemoryProducer` is what :meth:`streamtasks.app.tasks.TaskSet.send_pending` needs of an
``AIOKafkaProducer`` (``create_batch``, ``send_batch``, ``partitions_for``, ``flush``) and
nothing more: a batch is appended at once, its callback runs at once, nothing ever suspends. A
record sent without a timestamp gets the driver's wall-clock time, as a producer's clock would
stamp it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from streamtasks.app.handlers import Headers
from topology.ids import TopicPartition

__all__ = ["InMemoryProducer", "InMemoryTopics", "StoredRecord"]


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredRecord:
    """One record of an in-memory topic partition; ``seq`` orders records across partitions."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int
    headers: Headers
    seq: int


class InMemoryTopics:
    """Topics by name; a topic first written or asked about is made with its count from
    ``partitions``, else ``default_partitions``."""

    def __init__(self, partitions: Mapping[str, int], *, default_partitions: int = 1) -> None:
        self._counts = dict(partitions)
        self._default = default_partitions
        self._logs: dict[TopicPartition, list[StoredRecord]] = {}
        self._by_topic: dict[str, list[StoredRecord]] = {}
        self._seq = 0

    def partition_count(self, topic: str) -> int:
        return self._counts.setdefault(topic, self._default)

    def append(
        self, tp: TopicPartition, key: bytes | None, value: bytes | None, timestamp: int, headers: Headers
    ) -> StoredRecord:
        log = self._logs.setdefault(tp, [])
        record = StoredRecord(
            topic=tp.topic,
            partition=tp.partition,
            offset=len(log),
            key=key,
            value=value,
            timestamp=timestamp,
            headers=headers,
            seq=self._seq,
        )
        self._seq += 1
        log.append(record)
        self._by_topic.setdefault(tp.topic, []).append(record)
        return record

    def records(self, topic: str) -> list[StoredRecord]:
        """Every record of ``topic``, in the order they were written."""
        return list(self._by_topic.get(topic, ()))

    def partition(self, tp: TopicPartition) -> list[StoredRecord]:
        return self._logs.get(tp, [])


class _Batch:
    __slots__ = ("rows",)

    def __init__(self) -> None:
        self.rows: list[tuple[bytes | None, bytes | None, int | None, Headers]] = []

    def append(
        self, *, timestamp: int | None, key: bytes | None, value: bytes | None, headers: Any
    ) -> object:
        self.rows.append((key, value, timestamp, tuple(headers)))
        return self

    def close(self) -> None:
        pass


@dataclass(frozen=True, slots=True)
class _Sent:
    """The result a batch's future gives: its first offset."""

    offset: int


class _Done:
    """A future that is done when made (the batch is stored)."""

    __slots__ = ("_result",)

    def __init__(self, result: _Sent) -> None:
        self._result = result

    def cancelled(self) -> bool:
        return False

    def exception(self) -> BaseException | None:
        return None

    def result(self) -> _Sent:
        return self._result

    def add_done_callback(self, fn: Callable[[_Done], object]) -> None:
        fn(self)


class InMemoryProducer:
    """Writes the task set's batches to ``topics`` (see the module docstring)."""

    def __init__(self, topics: InMemoryTopics, clock: Callable[[], int]) -> None:
        self.topics = topics
        self._clock = clock

    def create_batch(self) -> _Batch:
        return _Batch()

    async def partitions_for(self, topic: str) -> set[int]:
        return set(range(self.topics.partition_count(topic)))

    async def send_batch(self, batch: _Batch, topic: str, *, partition: int) -> _Done:
        tp = TopicPartition(topic, partition)
        first: StoredRecord | None = None
        for key, value, timestamp, headers in batch.rows:
            stamp = self._clock() if timestamp is None else timestamp
            stored = self.topics.append(tp, key, value, stamp, headers)
            first = first or stored
        return _Done(_Sent(0 if first is None else first.offset))

    async def flush(self) -> None:
        pass
