"""Punctuation in the task set: the init hook, stream-time and wall-clock schedules, what they
write, and their end when a task stops running here. Real stores in ``tmp_path``; the
records go to the test driver's in-memory topics; the wall clock is injected."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from aiokafka import ConsumerRecord

from streamtasks.app import (
    Cancellable,
    HandlerResponse,
    ProcessingError,
    ProcessorContext,
    ProcessorSpec,
    PunctuationType,
    Record,
)
from streamtasks.app.handlers import ErrorContext, ErrorHandling
from streamtasks.app.stream_time import encode_stream_time
from streamtasks.app.tasks import TaskSet
from streamtasks.protocol.userdata import AssignmentInfo
from streamtasks.state import INT64, STRING, StateDirectory
from streamtasks.testing.topics import InMemoryProducer, InMemoryTopics
from tests.ids import task as t
from topology import TopicPartition, TopologyBuilder

APP = "pc"
CLICKS = "clicks"
CHANGELOG = "pc-counts-changelog"


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


class Counter:
    """Counts clicks per user; every 100 ms of stream time emits the totals and clears them;
    every second of wall-clock time emits a tick."""

    def __init__(self) -> None:
        self.inits: list[str] = []
        self.handles: dict[str, list[Cancellable]] = {}

    def init(self, ctx: ProcessorContext) -> None:
        self.inits.append(str(ctx.task_id))
        self.handles.setdefault(str(ctx.task_id), []).extend(
            [
                ctx.schedule(100, PunctuationType.STREAM_TIME, self.emit_totals),
                ctx.schedule(1_000, PunctuationType.WALL_CLOCK_TIME, self.tick),
            ]
        )

    def process(self, ctx: ProcessorContext, record: Record) -> None:
        counts = ctx.store("counts")
        user = (record.key or b"").decode()
        counts.put(user, (counts.get(user) or 0) + 1)

    async def emit_totals(self, ctx: ProcessorContext, timestamp: int) -> None:
        await asyncio.sleep(0)
        counts = ctx.store("counts")
        for user, n in sorted(counts.items()):
            ctx.send("totals", key=user.encode(), value=f"{n}@{ctx.stream_time}".encode())
            counts.delete(user)

    def tick(self, ctx: ProcessorContext, timestamp: int) -> None:
        ctx.send("ticks", key=str(ctx.task_id).encode(), value=str(timestamp).encode())


class Fixture:
    def __init__(
        self,
        tmp_path: Path,
        processor: Any,
        errors: ErrorHandling | None = None,
        *,
        exactly_once: bool = False,
    ) -> None:
        builder = TopologyBuilder(APP)
        builder.stream(CLICKS).store("counts")
        self.topology = builder.build()
        self.clock = Clock()
        self.tasks = TaskSet(
            self.topology,
            {0: processor},
            directory=StateDirectory(tmp_path, APP),
            store_serdes={"counts": (STRING, INT64)},
            emit=lambda _e: None,
            errors=errors,
            clock=self.clock,
            exactly_once=exactly_once,
        )
        self.tasks.set_partition_counts(self.topology.partition_counts({CLICKS: 2}))
        self.topics = InMemoryTopics({})
        self.producer: Any = InMemoryProducer(self.topics, self.clock)
        self.offsets = {0: 0, 1: 0}

    def assign(self, partitions: Iterable[int]) -> None:
        async def no_changelog(tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
            return {tp: 0 for tp in tps}

        owned = [TopicPartition(CLICKS, p) for p in partitions]
        asyncio.run(self.tasks.reconcile(owned, AssignmentInfo(), no_changelog))
        for task in self.tasks.restoring():
            task.restore.finish(now_ms=0)

    def pipe(self, partition: int, user: str, timestamp: int) -> None:
        offset = self.offsets[partition]
        self.offsets[partition] += 1
        record = ConsumerRecord(
            topic=CLICKS,
            partition=partition,
            offset=offset,
            timestamp=timestamp,
            timestamp_type=0,
            key=user.encode(),
            value=b"click",
            checksum=None,
            serialized_key_size=len(user),
            serialized_value_size=5,
            headers=(("trace", b"t1"),),
        )

        async def go() -> None:
            await self.tasks.process({TopicPartition(CLICKS, partition): [record]})
            await self.tasks.send_pending(self.producer)

        asyncio.run(go())

    def punctuate(self) -> int:
        async def go() -> int:
            fired = await self.tasks.punctuate()
            self.tasks.flush_caches()
            await self.tasks.send_pending(self.producer)
            return fired

        return asyncio.run(go())

    def out(self, topic: str) -> list[tuple[str, str, int, tuple[tuple[str, bytes], ...]]]:
        return [
            ((r.key or b"").decode(), (r.value or b"").decode(), r.timestamp, r.headers)
            for r in self.topics.records(topic)
        ]

    def close(self) -> None:
        asyncio.run(self.tasks.close_all(clean=False))


@pytest.fixture
def counter() -> Counter:
    return Counter()


@pytest.fixture
def fx(tmp_path: Path, counter: Counter) -> Iterable[Fixture]:
    fixture = Fixture(tmp_path, counter)
    yield fixture
    fixture.close()


def test_init_runs_once_per_task_when_it_starts_running_not_while_restoring(
    fx: Fixture, counter: Counter
) -> None:
    async def no_changelog(tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: 0 for tp in tps}

    asyncio.run(fx.tasks.reconcile([TopicPartition(CLICKS, 0)], AssignmentInfo(), no_changelog))
    assert fx.tasks.next_wall_clock_ms() is None  # restoring: not started
    assert fx.punctuate() == 0
    assert counter.inits == []
    fx.tasks.tasks[t("0_0")].restore.finish(now_ms=0)
    assert fx.tasks.next_wall_clock_ms() == 0  # to start now
    fx.punctuate()
    fx.punctuate()
    assert counter.inits == ["0_0"]
    assert fx.tasks.next_wall_clock_ms() == fx.clock.now + 1_000


def test_stream_time_punctuation_writes_with_the_stream_time_and_no_headers(fx: Fixture) -> None:
    fx.assign([0, 1])
    fx.pipe(0, "ann", 1_000)  # first record: due at 0, fires (after processing it)
    fx.pipe(0, "bob", 1_050)
    fx.pipe(0, "ann", 1_090)
    assert fx.out("totals") == [("ann", "1@1000", 1_000, ())]
    fx.pipe(0, "bob", 1_130)  # past 1100: fires once, at the stream time
    fx.pipe(1, "cat", 1_500)  # another task: its own stream time
    assert fx.out("totals")[1:] == [
        ("ann", "1@1130", 1_130, ()),
        ("bob", "2@1130", 1_130, ()),
        ("cat", "1@1500", 1_500, ()),
    ]
    # the store's deletes went to the changelog stamped with the punctuation time
    changelog = [(r.key, r.value, r.timestamp) for r in fx.topics.records(CHANGELOG)]
    assert (b"ann", None, 1_130) in changelog
    assert (b"bob", None, 1_130) in changelog


def test_wall_clock_punctuation_fires_from_punctuate_on_the_injected_clock(fx: Fixture) -> None:
    fx.assign([0, 1])
    start = fx.clock.now
    assert fx.punctuate() == 0  # starts both tasks
    fx.clock.now += 999
    assert fx.punctuate() == 0
    fx.clock.now += 1
    assert fx.punctuate() == 2
    fx.clock.now += 5_500  # a stall: one call each, not five
    assert fx.punctuate() == 2
    assert fx.out("ticks") == [
        ("0_0", str(start + 1_000), start + 1_000, ()),
        ("0_1", str(start + 1_000), start + 1_000, ()),
        ("0_0", str(start + 6_500), start + 6_500, ()),
        ("0_1", str(start + 6_500), start + 6_500, ()),
    ]
    assert fx.tasks.next_wall_clock_ms() == start + 7_000


def test_revoking_or_recycling_a_task_cancels_its_schedules_and_the_next_start_schedules_again(
    fx: Fixture, counter: Counter
) -> None:
    fx.assign([0, 1])
    fx.punctuate()
    first = counter.handles["0_1"]
    fx.assign([0])  # 0_1 revoked
    assert all(h.cancelled for h in first)
    assert not any(h.cancelled for h in counter.handles["0_0"])
    fx.clock.now += 1_000
    assert fx.punctuate() == 1  # 0_0 only
    fx.assign([0, 1])  # back: init runs again, with new schedules
    fx.punctuate()
    assert counter.inits == ["0_0", "0_1", "0_1"]
    assert len(counter.handles["0_1"]) == 4
    assert not any(h.cancelled for h in counter.handles["0_1"][2:])

    async def no_changelog(tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: 0 for tp in tps}

    # recycled to standby (KIP-429): the stores stay open, the schedules end
    info = AssignmentInfo(standby_tasks=frozenset({t("0_0")}))
    asyncio.run(fx.tasks.reconcile([TopicPartition(CLICKS, 1)], info, no_changelog))
    assert fx.tasks.roles()[t("0_0")] == "standby"
    assert all(h.cancelled for h in counter.handles["0_0"])


def test_a_failing_punctuation_goes_to_the_processing_handler(tmp_path: Path) -> None:
    seen: list[ErrorContext] = []

    def skip(context: ErrorContext, exc: BaseException) -> HandlerResponse:
        seen.append(context)
        return HandlerResponse.CONTINUE

    def boom(ctx: ProcessorContext, ts: int) -> None:
        raise RuntimeError(f"boom at {ts}")

    def init(ctx: ProcessorContext) -> None:
        ctx.schedule(10, PunctuationType.STREAM_TIME, boom)

    spec = ProcessorSpec(process=lambda ctx, rec: None, init=init)
    fx = Fixture(tmp_path / "continue", spec, ErrorHandling(processing=skip))
    try:
        fx.assign([0])
        fx.pipe(0, "ann", 5)
        fx.pipe(0, "ann", 25)
        assert [(c.topic, c.partition, c.offset, c.timestamp, c.task) for c in seen] == [
            ("", -1, -1, 5, t("0_0")),
            ("", -1, -1, 25, t("0_0")),
        ]
        assert fx.tasks.records_dropped == 2
    finally:
        fx.close()
    fails = Fixture(tmp_path / "fail", spec)  # the default handler: FAIL
    try:
        fails.assign([0])
        with pytest.raises(ProcessingError, match="stream_time punctuation of task 0_0 failed at 5"):
            fails.pipe(0, "ann", 5)
    finally:
        fails.close()


def test_a_failing_init_is_a_processing_error(tmp_path: Path) -> None:
    def init(ctx: ProcessorContext) -> None:
        raise RuntimeError("no")

    fx = Fixture(tmp_path, ProcessorSpec(process=lambda ctx, rec: None, init=init))
    try:
        fx.assign([0])
        with pytest.raises(ProcessingError, match="init hook of task 0_0 failed"):
            fx.punctuate()
    finally:
        fx.close()


def test_stream_time_is_committed_with_the_offsets_and_a_new_owner_starts_from_it(tmp_path: Path) -> None:
    old = Fixture(tmp_path / "a", Counter())
    new = Fixture(tmp_path / "b", Counter())
    try:
        old.assign([0, 1])
        old.pipe(0, "ann", 1_000)
        old.pipe(0, "bob", 1_130)
        p0, p1 = TopicPartition(CLICKS, 0), TopicPartition(CLICKS, 1)
        offsets = old.tasks.committable([p0, p1])
        metadata = old.tasks.running.commit_metadata(offsets)
        assert offsets == {p0: 2}
        assert metadata == {p0: encode_stream_time(1_130)}
        assert old.tasks.running.commit_metadata([p1]) == {}  # task 0_1 saw no record
        # the hand-over: the new owner's consumer read the committed offsets' metadata
        new.tasks.running.carried = {**metadata, p1: "another client's"}
        new.offsets[0] = 2
        new.assign([0, 1])
        new.pipe(0, "cat", 1_010)  # late: the punctuation fires at the carried stream time
        new.pipe(1, "dan", 1_020)  # unreadable metadata: starts from its first record
        assert new.out("totals") == [("cat", "1@1130", 1_130, ()), ("dan", "1@1020", 1_020, ())]
        assert new.tasks.stream_time(t("0_0")) == 1_130
    finally:
        old.close()
        new.close()


def test_exactly_once_an_aborted_transactions_punctuation_outputs_are_emitted_again(tmp_path: Path) -> None:
    """Exactly-once: what a punctuation wrote in a transaction that aborts is written again when
    the revived task processes the same records, at the same stream times: its schedules and
    stream time go back to the last commit (the offsets and their metadata) with the task."""
    fx = Fixture(tmp_path, Counter(), exactly_once=True)
    committed = InMemoryTopics({})
    carried: dict[TopicPartition, str] = {}  # the consumer's committed metadata, read in place
    fx.tasks.running.carried = carried
    p0 = TopicPartition(CLICKS, 0)

    def commit() -> None:  # the transaction commits: its records and the offsets' metadata
        for r in fx.topics.records("totals"):
            committed.append(TopicPartition("totals", r.partition), r.key, r.value, r.timestamp, r.headers)
        carried.update(fx.tasks.running.commit_metadata(fx.tasks.committable([p0])))
        fx.topics = InMemoryTopics({})
        fx.producer = InMemoryProducer(fx.topics, fx.clock)

    try:
        fx.assign([0])
        fx.pipe(0, "ann", 1_000)  # the first record: fires at 1,000
        commit()
        fx.pipe(0, "bob", 1_130)  # fires at 1,130
        fx.pipe(0, "cat", 1_250)  # fires at 1,250
        assert [r.value for r in fx.topics.records("totals")] == [b"1@1130", b"1@1250"]
        # the transaction aborts: its records are gone, the tasks close dirty and come back,
        # and the consumer hands the records out again from the committed offset (1)
        fx.topics = InMemoryTopics({})
        fx.producer = InMemoryProducer(fx.topics, fx.clock)
        fx.tasks.close_actives_dirty()
        fx.assign([0])
        assert fx.tasks.stream_time(t("0_0")) == -1  # not running until its next record
        fx.offsets[0] = 1
        fx.pipe(0, "bob", 1_130)
        fx.pipe(0, "cat", 1_250)
        commit()
        got = [((r.key or b"").decode(), r.timestamp) for r in committed.records("totals")]
        assert got == [("ann", 1_000), ("bob", 1_130), ("cat", 1_250)]
        assert carried == {p0: encode_stream_time(1_250)}
    finally:
        fx.close()


def test_a_task_started_before_its_committed_offsets_were_read_takes_their_stream_time(
    fx: Fixture,
) -> None:
    """A wall-clock pass starts a task before its committed offsets are readable (a pending
    transaction holds them): the stream time they carry applies at its first record."""
    carried: dict[TopicPartition, str] = {}
    fx.tasks.running.carried = carried
    fx.assign([0])
    fx.punctuate()  # starts 0_0 with no committed metadata read yet
    assert fx.tasks.stream_time(t("0_0")) == -1
    carried[TopicPartition(CLICKS, 0)] = encode_stream_time(1_130)  # read once stable
    fx.pipe(0, "cat", 1_010)  # late: fires at the carried stream time
    assert fx.out("totals") == [("cat", "1@1130", 1_130, ())]
