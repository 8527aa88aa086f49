"""How ``streamtasks.Consumer`` hands out fetched records: paused partitions, gaps, rewinds.

Deterministic: the fetcher is a scripted stand-in with aiokafka's semantics (a position per
assigned partition that moves when records are returned, ``pause``/``resume``/``seek``), so the
races the live tests can only hit by chance (records of a partition paused while the fetch was
in flight, a fetcher that moved past records nobody handed out) are played exactly.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

import pytest
from aiokafka import ConsumerRecord
from aiokafka.structs import TopicPartition as Atp

from streamtasks.errors import StreamTasksError
from streamtasks.runtime.consumer import Consumer
from topology import TopicPartition

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


def record(tp: Atp, offset: int) -> ConsumerRecord[bytes, bytes]:
    return ConsumerRecord(
        topic=tp.topic,
        partition=tp.partition,
        offset=offset,
        timestamp=0,
        timestamp_type=0,
        key=None,
        value=f"{tp.partition}@{offset}".encode(),
        checksum=None,
        serialized_key_size=0,
        serialized_value_size=0,
        headers=(),
    )


class ScriptedFetcher:
    """aiokafka's consumer, reduced to what ``Consumer`` uses. ``logs`` holds the offsets each
    partition has (a compacted log has holes). ``getmany`` returns the next records from each
    assigned, unpaused partition and moves its position past them, unless a scripted answer is
    queued: that one is returned as it is (as an in-flight fetch started earlier would be) and
    the positions still move past it."""

    def __init__(self, logs: dict[Atp, list[int]]) -> None:
        self.logs = logs
        self.position: dict[Atp, int] = {}
        self.paused: set[Atp] = set()
        self.scripted: list[dict[Atp, list[int]]] = []
        self.seeks: list[tuple[Atp, int]] = []

    def assign(self, partitions: Iterable[Atp]) -> None:
        self.position = {tp: self.position.get(tp, 0) for tp in partitions}
        self.paused = set()

    def seek(self, tp: Atp, offset: int) -> None:
        self.seeks.append((tp, offset))
        self.position[tp] = offset

    def pause(self, *tps: Atp) -> None:
        self.paused.update(tps)

    def resume(self, *tps: Atp) -> None:
        self.paused.difference_update(tps)

    async def getmany(self, *partitions: Atp, timeout_ms: int = 0, max_records: int | None = None) -> Any:
        if self.scripted:
            answer = self.scripted.pop(0)
        else:
            answer = {
                tp: [o for o in self.logs.get(tp, []) if o >= pos][:3]
                for tp, pos in sorted(self.position.items())
                if tp not in self.paused
            }
        out = {}
        for tp, offsets in answer.items():
            if offsets:
                self.position[tp] = offsets[-1] + 1
                out[tp] = [record(tp, o) for o in offsets]
        return out


def consumer_owning(fetcher: ScriptedFetcher, positions: dict[TopicPartition, int]) -> Consumer:
    consumer = Consumer(["t"], bootstrap_servers="127.0.0.1:1", group_id="g")
    consumer._fetcher = fetcher  # type: ignore[assignment]
    consumer._owned = frozenset(positions)
    fetcher.assign(Atp(tp.topic, tp.partition) for tp in positions)
    for tp, offset in positions.items():
        fetcher.seek(Atp(tp.topic, tp.partition), offset)
        consumer._positions[tp] = offset
    consumer._refresh_fetchable()
    fetcher.seeks.clear()
    return consumer


async def drain(consumer: Consumer, rounds: int = 20) -> dict[TopicPartition, list[int]]:
    seen: dict[TopicPartition, list[int]] = {}
    for _ in range(rounds):
        for tp, records in (await consumer.getmany(timeout_ms=0)).items():
            seen.setdefault(tp, []).extend(r.offset for r in records)
    return seen


A0, A1 = Atp("t", 0), Atp("t", 1)


def test_pause_pauses_the_fetcher_and_resume_resumes_it() -> None:
    fetcher = ScriptedFetcher({A0: [0, 1], A1: [0, 1]})
    consumer = consumer_owning(fetcher, {T0: 0, T1: 0})
    consumer.pause([T1])
    assert fetcher.paused == {A1}
    seen = asyncio.run(drain(consumer))
    assert seen == {T0: [0, 1]}
    assert fetcher.position[A1] == 0  # nothing of the paused partition was consumed
    consumer.resume([T1])
    assert fetcher.paused == set()
    assert asyncio.run(drain(consumer)) == {T1: [0, 1]}


def test_records_of_a_partition_paused_during_the_fetch_are_fetched_again_after_resume() -> None:
    fetcher = ScriptedFetcher({A0: [0, 1, 2], A1: list(range(10))})
    consumer = consumer_owning(fetcher, {T0: 0, T1: 4})
    consumer.pause([T1])
    fetcher.scripted.append({A0: [0, 1, 2], A1: [4, 5, 6]})  # the fetch began before the pause
    batch = asyncio.run(consumer.getmany(timeout_ms=0))
    assert {tp: [r.offset for r in rs] for tp, rs in batch.items()} == {T0: [0, 1, 2]}
    assert fetcher.position[A1] == 4, "the fetcher went back to the last handed-out position"
    assert consumer.metrics()["fetch-rewinds-total"] == 1
    consumer.resume([T1])
    assert asyncio.run(drain(consumer)) == {T1: [4, 5, 6, 7, 8, 9]}


def test_a_batch_that_skips_records_is_refetched_from_the_expected_offset() -> None:
    fetcher = ScriptedFetcher({A0: list(range(10))})
    consumer = consumer_owning(fetcher, {T0: 3})
    fetcher.scripted.append({A0: [7, 8, 9]})  # a fetcher that moved past 3..6
    assert asyncio.run(consumer.getmany(timeout_ms=0)) == {}
    assert fetcher.seeks == [(A0, 3)]
    assert asyncio.run(drain(consumer)) == {T0: [3, 4, 5, 6, 7, 8, 9]}
    metrics = consumer.metrics()
    assert (metrics["fetch-gaps-detected-total"], metrics["fetch-gaps-recovered-total"]) == (1, 1)


def test_a_gap_the_log_really_has_is_handed_out_after_one_check() -> None:
    fetcher = ScriptedFetcher({A0: [0, 1, 5, 6, 9]})  # compacted: 2-4 and 7-8 are gone
    consumer = consumer_owning(fetcher, {T0: 2})
    assert asyncio.run(drain(consumer)) == {T0: [5, 6, 9]}
    assert fetcher.seeks == [(A0, 2)]  # one check, from where the gap began
    metrics = consumer.metrics()
    assert (metrics["fetch-gaps-detected-total"], metrics["fetch-gaps-confirmed-total"]) == (1, 1)
    assert consumer.positions()[T0] == 10


def test_records_of_a_revoked_partition_are_dropped_without_a_seek() -> None:
    fetcher = ScriptedFetcher({A0: [0], A1: [0, 1]})
    consumer = consumer_owning(fetcher, {T0: 0, T1: 0})
    consumer._owned = frozenset({T0})  # T1 was revoked while the fetch was in flight
    consumer._refresh_fetchable()
    fetcher.scripted.append({A1: [0, 1]})
    assert asyncio.run(consumer.getmany(timeout_ms=0)) == {}
    assert fetcher.seeks == []


def test_rewind_moves_back_only_owned_partitions_that_are_beyond_the_offset() -> None:
    fetcher = ScriptedFetcher({A0: list(range(10)), A1: list(range(10))})
    consumer = consumer_owning(fetcher, {T0: 0, T1: 0})
    asyncio.run(drain(consumer, rounds=2))  # hands out 0..5 of both
    consumer.rewind({T0: 2, T1: 8, TopicPartition("t", 7): 0})
    assert consumer.positions()[T0] == 2
    assert consumer.positions()[T1] == 6  # already below 8: untouched
    assert fetcher.seeks == [(A0, 2)]
    seen = asyncio.run(drain(consumer))
    assert seen[T0] == list(range(2, 10))
    assert seen[T1] == [6, 7, 8, 9]


def test_seek_needs_an_owned_partition_and_a_valid_offset() -> None:
    consumer = consumer_owning(ScriptedFetcher({}), {T0: 0})
    with pytest.raises(StreamTasksError, match="not assigned"):
        consumer.seek(T1, 0)
    with pytest.raises(StreamTasksError, match="negative"):
        consumer.seek(T0, -1)
