"""The changelog reader applies a fetched batch only if the reader was not moved meanwhile.

The reader's fetch runs outside the app lock; :meth:`ChangelogReader.track` (under the lock)
may point it at other tasks in between. A batch fetched before that move can start above where
a newly tracked task stands (one rebuilt from offset 0), and applying it would leave a gap in
that task's state. The aiokafka consumer below is a scripted stand-in; the tasks are minimal
stand-ins with the two members the reader uses.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiokafka import ConsumerRecord
from aiokafka.structs import TopicPartition as Atp

from streamtasks.app.changelog import ChangelogReader
from topology import TopicPartition

CL = TopicPartition("app-counts-changelog", 0)


class _Task:
    def __init__(self, offset: int) -> None:
        self.changelog_partitions = (CL,)
        self.changelog_offsets = {CL: offset}
        self.closed = False
        self.applied: list[int] = []

    def apply_changelog(self, tp: TopicPartition, records: list[Any], next_offset: int) -> int:
        self.applied.extend(int(k) for k, _ in records)
        self.changelog_offsets[tp] = next_offset
        return len(records)


class _Consumer:
    def __init__(self, answers: list[list[int]]) -> None:
        self.answers = answers
        self.seeks: list[int] = []

    def assign(self, tps: list[Atp]) -> None:
        pass

    def seek(self, tp: Atp, offset: int) -> None:
        self.seeks.append(offset)

    async def getmany(self, timeout_ms: int, max_records: int) -> dict[Atp, list[Any]]:
        offsets = self.answers.pop(0)
        atp = Atp(CL.topic, CL.partition)
        return {atp: [_record(o) for o in offsets]}


def _record(offset: int) -> ConsumerRecord[bytes, bytes]:
    return ConsumerRecord(
        topic=CL.topic, partition=CL.partition, offset=offset, timestamp=0, timestamp_type=0,
        key=str(offset).encode(), value=b"v", checksum=None, serialized_key_size=0,
        serialized_value_size=0, headers=(),
    )  # fmt: skip


def _reader(consumer: _Consumer) -> ChangelogReader:
    reader = ChangelogReader("127.0.0.1:1", client_id="t")
    reader._consumer_obj = consumer
    return reader


def test_a_batch_fetched_before_the_reader_moved_is_not_applied() -> None:
    consumer = _Consumer([[100, 101, 102], [0, 1, 2]])
    reader = _reader(consumer)
    old = _Task(100)
    reader.track([old])  # type: ignore[list-item]
    batch = asyncio.run(reader.fetch())
    rebuilt = _Task(0)  # the task was closed dirty and comes back without its checkpoint
    reader.track([rebuilt])  # type: ignore[list-item]
    assert reader.apply(batch) == 0
    assert rebuilt.changelog_offsets == {CL: 0}
    assert reader.apply(asyncio.run(reader.fetch())) == 3
    assert rebuilt.applied == [0, 1, 2]
    assert consumer.seeks == [100, 0]


def test_a_batch_is_applied_when_nothing_moved() -> None:
    reader = _reader(_Consumer([[5, 6]]))
    task = _Task(5)
    reader.track([task])  # type: ignore[list-item]
    reader.track([task])  # type: ignore[list-item]  # the same tasks again: no move
    assert reader.apply(asyncio.run(reader.fetch())) == 2
    assert task.changelog_offsets == {CL: 7}
