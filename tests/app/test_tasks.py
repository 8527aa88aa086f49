"""TaskSet on a real state directory: reconciling assignments, offset sums, processing.

The changelog end offsets come from a plain async function (an input of the layer under test);
stores are real rocksdict databases in ``tmp_path``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest
from aiokafka import ConsumerRecord
from aiokafka.structs import RecordMetadata
from aiokafka.structs import TopicPartition as AioTopicPartition

from streamtasks.app import (
    AppEvent,
    ProcessingError,
    ProcessingStarted,
    ProcessorContext,
    Record,
    TaskClosed,
    TaskCreated,
    TaskRecycled,
    UnknownStoreError,
)
from streamtasks.app.tasks import Processor, TaskSet
from streamtasks.protocol.userdata import RUNNING_OFFSET_SUM, AssignmentInfo
from streamtasks.state import INT64, STRING, StateDirectory
from tests.ids import task as t
from topology import TopicPartition, Topology, TopologyBuilder

APP = "wc"
TEXT = "text"
WORDS = "wc-words-repartition"
CHANGELOG = "wc-counts-changelog"

EndOffsets = Callable[[Iterable[TopicPartition]], Awaitable[Mapping[TopicPartition, int]]]


def wordcount() -> Topology:
    builder = TopologyBuilder(APP)
    builder.stream(TEXT).repartition("words").store("counts")
    return builder.build()


def cl(p: int) -> TopicPartition:
    return TopicPartition(CHANGELOG, p)


def text(p: int) -> TopicPartition:
    return TopicPartition(TEXT, p)


def words(p: int) -> TopicPartition:
    return TopicPartition(WORDS, p)


def split(ctx: ProcessorContext, record: Record) -> None:
    for word in (record.value or b"").split():
        ctx.forward("words", key=word, value=b"1")


async def count(ctx: ProcessorContext, record: Record) -> None:
    await asyncio.sleep(0)
    counts = ctx.store("counts")
    key = (record.key or b"").decode()
    counts.put(key, (counts.get(key) or 0) + 1)


def ends_of(ends: Mapping[TopicPartition, int], calls: list[tuple[TopicPartition, ...]]) -> EndOffsets:
    async def end_offsets(partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        wanted = tuple(sorted(set(partitions)))
        calls.append(wanted)
        return {tp: ends.get(tp, 0) for tp in wanted}

    return end_offsets


class Fixture:
    def __init__(self, tmp_path: Path, processors: Mapping[int, Processor] | None = None) -> None:
        self.topology = wordcount()
        self.directory = StateDirectory(tmp_path, APP)
        self.events: list[AppEvent] = []
        self.tasks = TaskSet(
            self.topology,
            processors if processors is not None else {0: split, 1: count},
            directory=self.directory,
            store_serdes={"counts": (STRING, INT64)},
            emit=self.events.append,
        )
        self.tasks.set_partition_counts(self.topology.partition_counts({TEXT: 4}))
        self.ends: dict[TopicPartition, int] = {}
        self.calls: list[tuple[TopicPartition, ...]] = []

    def reconcile(
        self,
        owned: Iterable[TopicPartition],
        *,
        standby: Iterable[str] = (),
        warmup: Iterable[str] = (),
        lost: Iterable[TopicPartition] = (),
        active: Iterable[str] = (),
    ) -> list[AppEvent]:
        before = len(self.events)
        info = AssignmentInfo(  # active tasks run from the owned partitions; ``active``: info's list
            active_tasks=frozenset(map(t, active)),
            standby_tasks=frozenset(map(t, standby)),
            warmup_tasks=frozenset(map(t, warmup)),
        )
        asyncio.run(self.tasks.reconcile(owned, info, ends_of(self.ends, self.calls), lost=lost))
        return self.events[before:]

    def close(self) -> None:
        asyncio.run(self.tasks.close_all(clean=False))


@pytest.fixture
def fx(tmp_path: Path) -> Iterable[Fixture]:
    fixture = Fixture(tmp_path)
    yield fixture
    fixture.close()


def created(events: list[AppEvent]) -> dict[str, str]:
    return {str(e.task): e.role for e in events if isinstance(e, TaskCreated)}


def consumer_record(
    tp: TopicPartition,
    offset: int,
    key: bytes | None,
    value: bytes | None,
    headers: Iterable[tuple[str, bytes]] = (),
) -> ConsumerRecord[Any, Any]:
    return ConsumerRecord(
        topic=tp.topic,
        partition=tp.partition,
        offset=offset,
        timestamp=1_000 + offset,
        timestamp_type=0,
        key=key,
        value=value,
        checksum=None,
        serialized_key_size=-1 if key is None else len(key),
        serialized_value_size=-1 if value is None else len(value),
        headers=tuple(headers),
    )


# -- reconciling ------------------------------------------------------------------------------------


def test_first_assignment_creates_restoring_actives_standbys_and_warmups(fx: Fixture) -> None:
    fx.ends = {cl(0): 5, cl(1): 7, cl(2): 0}
    events = fx.reconcile([text(0), text(1), words(0)], standby=["1_1"], warmup=["1_2"])
    assert fx.tasks.roles() == {
        t("0_0"): "active",
        t("0_1"): "active",
        t("1_0"): "active",
        t("1_1"): "standby",
        t("1_2"): "warmup",
    }
    assert created(events) == {
        "0_0": "active",
        "0_1": "active",
        "1_0": "active",
        "1_1": "standby",
        "1_2": "warmup",
    }
    assert all(isinstance(e, TaskCreated) and e.offset_sum == 0 for e in events)
    assert fx.calls == [(cl(0), cl(1), cl(2))]  # one listing, changelogs of stateful tasks only
    # every new active starts restoring; a stateless one has nothing to read and is done at once
    # (the app's finish_restores() resumes it right after reconcile)
    targets = {str(x.id): (x.restore_target, x.restore_done()) for x in fx.tasks.restoring()}
    assert targets == {"0_0": ({}, True), "0_1": ({}, True), "1_0": ({cl(0): 5}, False)}
    assert fx.tasks.paused_partitions() == {text(0), text(1), words(0)}
    assert [x.id for x in fx.tasks.changelog_readers()] == [t("1_0"), t("1_1"), t("1_2")]
    assert [x.id for x in fx.tasks.standbys()] == [t("1_1"), t("1_2")]
    assert fx.tasks.metrics()["active-tasks"] == 3.0
    assert fx.tasks.metrics()["restoring-tasks"] == 3.0


def test_second_assignment_recycles_in_place_closes_dropped_and_keeps_the_rest(fx: Fixture) -> None:
    fx.ends = {cl(0): 0, cl(1): 3, cl(2): 0}
    fx.reconcile([text(0), text(1), words(0)], standby=["1_1"], warmup=["1_2"])
    was = dict(fx.tasks.tasks)
    stores = {tid: task.stores.get("counts") for tid, task in was.items()}
    was[t("1_0")].restore.finish(now_ms=0)  # restored: it runs
    was[t("1_1")].apply_changelog(cl(1), [(b"kafka", (2).to_bytes(8, "big"))], 3)

    fx.ends = {cl(0): 0, cl(1): 3, cl(2): 0}
    events = fx.reconcile([text(0), words(1)], standby=["1_0"], warmup=["1_2"])

    assert fx.tasks.roles() == {
        t("0_0"): "active",
        t("1_0"): "standby",
        t("1_1"): "active",
        t("1_2"): "warmup",
    }
    for tid in (t("0_0"), t("1_0"), t("1_1"), t("1_2")):
        assert fx.tasks.tasks[tid] is was[tid]  # never rebuilt
        assert fx.tasks.tasks[tid].stores.get("counts") is stores[tid]
        assert not fx.tasks.tasks[tid].closed
    assert not any(s.closed for tid, s in stores.items() if s is not None and tid != t("0_1"))
    assert was[t("0_1")].closed
    recycled = {(str(e.task), e.from_role, e.to_role) for e in events if isinstance(e, TaskRecycled)}
    assert recycled == {("1_0", "active", "standby"), ("1_1", "standby", "active")}
    closed = [(str(e.task), e.role, e.clean) for e in events if isinstance(e, TaskClosed)]
    assert closed == [("0_1", "active", True)]
    assert created(events) == {}  # 0_0 and 1_2 are untouched
    assert len(events) == 3
    # the recycled active restores from where the standby was; its state is there
    one = fx.tasks.tasks[t("1_1")]
    assert one.restoring
    assert one.restore_target == {cl(1): 3}
    assert one.restore_done()
    assert one.typed["counts"].get("kafka") == 2
    assert fx.calls[-1] == (cl(1),)  # only the task that needs a restore target
    # the former active checkpointed on the way and no longer logs its writes
    assert fx.directory.read_checkpoint(t("1_0")) == {cl(0): 0}
    fx.tasks.tasks[t("1_0")].stores["counts"].put(b"x", b"y")
    assert fx.tasks.tasks[t("1_0")].pending == []


def test_a_warmup_recycled_to_active_stops_being_a_warmup(fx: Fixture) -> None:
    fx.reconcile([text(0)], warmup=["1_2"])
    events = fx.reconcile([text(0), words(2)])
    assert fx.tasks.roles() == {t("0_0"): "active", t("1_2"): "active"}
    assert [(e.from_role, e.to_role) for e in events if isinstance(e, TaskRecycled)] == [("warmup", "active")]
    assert not fx.tasks.tasks[t("1_2")].warmup


def test_a_warmup_named_active_before_its_partitions_arrive_is_kept_then_recycled(fx: Fixture) -> None:
    """KIP-848: the target names the task active here while its partitions are pending their
    release by the old owner; the warm-up is kept (as a standby) and recycled when they come."""
    fx.reconcile([text(0)], warmup=["1_2"])
    warm = fx.tasks.tasks[t("1_2")]
    events = fx.reconcile([text(0)], active=["0_0", "1_2"])
    assert not [e for e in events if isinstance(e, TaskClosed)]
    assert fx.tasks.roles() == {t("0_0"): "active", t("1_2"): "standby"}
    assert fx.tasks.tasks[t("1_2")] is warm
    events = fx.reconcile([text(0), words(2)], active=["0_0", "1_2"])
    assert [(str(e.task), e.from_role, e.to_role) for e in events if isinstance(e, TaskRecycled)] == [
        ("1_2", "standby", "active")
    ]
    assert fx.tasks.tasks[t("1_2")] is warm
    # a task named active here that this member does not hold at all is not created early
    events = fx.reconcile([text(0), words(2)], active=["0_0", "1_2", "1_3"])
    assert t("1_3") not in fx.tasks.roles()


def test_a_kept_standby_follows_the_warmup_flag(fx: Fixture) -> None:
    fx.reconcile([], standby=["1_3"])
    events = fx.reconcile([], warmup=["1_3"])
    assert events == []
    assert fx.tasks.roles() == {t("1_3"): "warmup"}
    fx.reconcile([], standby=["1_3"])
    assert fx.tasks.roles() == {t("1_3"): "standby"}


def test_an_unchanged_assignment_changes_nothing(fx: Fixture) -> None:
    fx.reconcile([text(0), words(0)], standby=["1_1"])
    calls = len(fx.calls)
    was = dict(fx.tasks.tasks)
    assert fx.reconcile([text(0), words(0)], standby=["1_1"]) == []
    assert fx.tasks.tasks == was
    assert len(fx.calls) == calls  # nothing to list


def test_unknown_tasks_are_ignored_with_an_error(fx: Fixture, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR, logger="streamtasks.app.tasks"):
        fx.reconcile(
            [text(0), text(9), TopicPartition("elsewhere", 0)], standby=["7_0", "1_1"], warmup=["1_8"]
        )
    assert fx.tasks.roles() == {t("0_0"): "active", t("1_1"): "standby"}
    messages = " ".join(r.getMessage() for r in caplog.records)
    assert "'elsewhere'" in messages
    for name in ("0_9", "7_0", "1_8"):
        assert name in messages


def test_an_active_task_named_as_standby_too_runs_active(fx: Fixture) -> None:
    fx.reconcile([words(0)], standby=["1_0"])
    assert fx.tasks.roles() == {t("1_0"): "active"}


def test_tasks_of_lost_partitions_close_dirty(fx: Fixture) -> None:
    fx.reconcile([text(0), words(0), words(1)])
    for task in fx.tasks.tasks.values():
        task.restore.finish(now_ms=0)
    fx.tasks.checkpoint_all()
    asyncio.run(fx.tasks.process({words(0): [consumer_record(words(0), 0, b"a", b"1")]}))  # unsent
    events = fx.reconcile([text(0)], lost=[words(0)])
    closed = {str(e.task): e.clean for e in events if isinstance(e, TaskClosed)}
    assert closed == {"1_0": False, "1_1": True}
    assert fx.directory.read_checkpoint(t("1_0")) is None
    assert fx.directory.read_checkpoint(t("1_1")) == {cl(1): 0}
    assert not hasattr(fx.tasks, "lost")  # lost partitions come with each reconcile; none linger
    assert t("1_0") not in fx.tasks.offset_sums()  # no checkpoint: no usable state to report


def test_a_lost_task_whose_writes_were_all_acknowledged_keeps_its_state(fx: Fixture) -> None:
    """Every store write reached the changelog (sent, acknowledged): the stores match the
    changelog up to the acknowledged offsets, so they are kept with that checkpoint and a task
    that comes back restores only what it missed; the cached entry not written out is dropped
    (never in the store, never sent)."""
    running(fx, [words(0)])
    producer = _Producer()

    async def go() -> None:
        await fx.tasks.process({words(0): [consumer_record(words(0), 0, b"a", b"1")]})
        fx.tasks.flush_caches()
        await fx.tasks.send_pending(producer)
        await producer.flush()  # acknowledged at changelog offset 100

    asyncio.run(go())
    task = fx.tasks.tasks[t("1_0")]
    assert task.settled()
    events = fx.reconcile([], lost=[words(0)])
    assert [(str(e.task), e.clean) for e in events if isinstance(e, TaskClosed)] == [("1_0", False)]
    assert fx.directory.read_checkpoint(t("1_0")) == {cl(0): 101}
    fx.ends = {cl(0): 105}  # the next owner wrote 4 more
    fx.reconcile([words(0)])
    back = fx.tasks.tasks[t("1_0")]
    assert back.typed["counts"].get("a") == 1  # kept, not wiped
    assert back.changelog_offsets == {cl(0): 101}  # restores 101..105 only


def test_a_lost_task_with_a_write_not_acknowledged_drops_its_state(fx: Fixture) -> None:
    running(fx, [words(0)])
    producer = _Producer()

    async def go() -> None:
        await fx.tasks.process({words(0): [consumer_record(words(0), 0, b"a", b"1")]})
        fx.tasks.flush_caches()
        await fx.tasks.send_pending(producer)  # in flight: no answer before the loss

    asyncio.run(go())
    task = fx.tasks.tasks[t("1_0")]
    assert not task.pending
    assert not task.settled()
    fx.tasks.checkpoint_all()  # the last commit's checkpoint: the store is ahead of it now
    fx.reconcile([], lost=[words(0)])
    assert fx.directory.read_checkpoint(t("1_0")) is None


def test_a_lost_task_that_comes_back_is_rebuilt_from_its_changelog(
    fx: Fixture, caplog: pytest.LogCaptureFixture
) -> None:
    running(fx, [words(0)])
    asyncio.run(fx.tasks.process({words(0): [consumer_record(words(0), 0, b"a", b"1")]}))
    fx.tasks.tasks[t("1_0")].acknowledged(cl(0), 0)
    fx.tasks.checkpoint_all()  # {cl(0): 1}; the next write never reaches the changelog
    asyncio.run(fx.tasks.process({words(0): [consumer_record(words(0), 1, b"a", b"1")]}))
    fx.reconcile([], lost=[words(0)])
    fx.ends = {cl(0): 1}
    with caplog.at_level(logging.WARNING, logger="streamtasks.app.task"):
        events = fx.reconcile([words(0)])
    back = fx.tasks.tasks[t("1_0")]
    assert back.typed["counts"].get("a") is None  # the unsent count of 2 did not survive
    assert back.changelog_offsets == {cl(0): 0}
    assert back.restore_target == {cl(0): 1}
    assert [e.offset_sum for e in events if isinstance(e, TaskCreated)] == [0]
    assert any("without a checkpoint" in r.getMessage() for r in caplog.records)


# -- offset sums ------------------------------------------------------------------------------------


def test_offset_sums_running_restoring_standby_and_closed_tasks(fx: Fixture) -> None:
    fx.ends = {cl(0): 10, cl(1): 10, cl(2): 10, cl(3): 10}
    fx.reconcile([text(0), words(0), words(1), words(3)], standby=["1_2"])
    tasks = fx.tasks.tasks
    tasks[t("0_0")].restore.finish(now_ms=0)  # restored: running
    tasks[t("1_0")].restore.finish(now_ms=0)
    tasks[t("1_1")].apply_changelog(cl(1), [(b"a", b"\x00" * 8)], 4)  # still restoring, at 4
    tasks[t("1_2")].apply_changelog(cl(2), [(b"a", b"\x00" * 8)], 6)  # standby at 6
    tasks[t("1_3")].apply_changelog(cl(3), [(b"a", b"\x00" * 8)], 9)
    fx.directory.write_checkpoint(t("3_0"), {TopicPartition("wc-other-changelog", 0): 5})  # not ours
    assert fx.tasks.offset_sums() == {
        t("0_0"): RUNNING_OFFSET_SUM,  # stateless and running
        t("1_0"): RUNNING_OFFSET_SUM,
        t("1_1"): 4,
        t("1_2"): 6,
        t("1_3"): 9,
    }
    fx.reconcile([text(0), words(0), words(1)], standby=["1_2"])  # 1_3 closes, checkpointed at 9
    sums = fx.tasks.offset_sums()
    assert sums[t("1_3")] == 9
    assert t("3_0") not in sums
    events = fx.reconcile([text(0), words(0), words(1)], standby=["1_2", "1_3"])  # 1_3 comes back
    assert [(str(e.task), e.role, e.offset_sum) for e in events if isinstance(e, TaskCreated)] == [
        ("1_3", "standby", 9)
    ]
    assert fx.tasks.tasks[t("1_3")].changelog_offsets == {cl(3): 9}
    assert fx.tasks.tasks[t("1_3")].stores["counts"].get(b"a") == b"\x00" * 8


def test_offset_sums_report_state_left_by_an_earlier_run(tmp_path: Path) -> None:
    earlier = Fixture(tmp_path)
    earlier.reconcile([], standby=["1_1"])
    earlier.tasks.tasks[t("1_1")].apply_changelog(cl(1), [], 12)
    asyncio.run(earlier.tasks.close_all(clean=True))
    later = Fixture(tmp_path)
    assert later.tasks.offset_sums() == {t("1_1"): 12}


# -- processing -------------------------------------------------------------------------------------


def running(fx: Fixture, owned: list[TopicPartition]) -> None:
    fx.reconcile(owned)
    for task in fx.tasks.tasks.values():
        task.restore.finish(now_ms=0)  # restored (what the changelog loop does when done)


def test_process_runs_sync_and_async_processors(fx: Fixture) -> None:
    running(fx, [text(0), words(1)])
    batch = {
        text(0): [consumer_record(text(0), 7, None, b"a b a")],
        words(1): [consumer_record(words(1), 3, b"a", b"1"), consumer_record(words(1), 4, b"a", b"1")],
    }
    assert asyncio.run(fx.tasks.process(batch)) == 3
    counts = fx.tasks.tasks[t("1_1")].typed["counts"]
    assert counts.get("a") == 2
    assert fx.tasks.tasks[t("1_1")].take_pending() == [
        (cl(1), b"a", (1).to_bytes(8, "big"), 1_003),  # each write: its input record's timestamp
        (cl(1), b"a", (2).to_bytes(8, "big"), 1_004),
    ]
    assert fx.tasks.committable([text(0), words(1)]) == {text(0): 8, words(1): 5}
    assert fx.tasks.records_processed == 3


def test_processing_started_names_where_each_partition_began_once_per_activation(fx: Fixture) -> None:
    running(fx, [words(0), words(1)])

    def started() -> list[tuple[str, str, int, int]]:
        return [
            (str(e.task), e.topic, e.partition, e.offset)
            for e in fx.events
            if isinstance(e, ProcessingStarted)
        ]

    asyncio.run(fx.tasks.process({words(0): [consumer_record(words(0), 40, b"a", b"1")]}))
    asyncio.run(fx.tasks.process({words(0): [consumer_record(words(0), 41, b"a", b"1")]}))
    asyncio.run(fx.tasks.process({words(1): [consumer_record(words(1), 7, b"b", b"1")]}))
    assert started() == [("1_0", words(0).topic, 0, 40), ("1_1", words(1).topic, 1, 7)]
    fx.reconcile([words(1)])  # words-0's task goes away and comes back: a new start
    running(fx, [words(0), words(1)])
    asyncio.run(fx.tasks.process({words(0): [consumer_record(words(0), 35, b"a", b"1")]}))
    asyncio.run(fx.tasks.process({words(1): [consumer_record(words(1), 8, b"b", b"1")]}))
    assert started()[2:] == [("1_0", words(0).topic, 0, 35)]


def test_committable_only_lists_processed_offsets_of_owned_partitions(fx: Fixture) -> None:
    running(fx, [text(0), text(1)])
    asyncio.run(
        fx.tasks.process(
            {
                text(0): [consumer_record(text(0), 1, None, b"x")],
                text(1): [consumer_record(text(1), 5, None, b"y")],
                text(2): [consumer_record(text(2), 9, None, b"z")],  # not ours: skipped
            }
        )
    )
    assert fx.tasks.committable([text(1), text(2), text(3)]) == {text(1): 6}
    assert fx.tasks.committable([]) == {}


def test_records_of_a_restoring_task_are_not_processed(fx: Fixture) -> None:
    fx.ends = {cl(0): 4}
    fx.reconcile([words(0)])
    assert fx.tasks.tasks[t("1_0")].restoring
    n = asyncio.run(fx.tasks.process({words(0): [consumer_record(words(0), 0, b"a", b"1")]}))
    assert n == 0
    assert fx.tasks.committable([words(0)]) == {}
    assert fx.tasks.tasks[t("1_0")].pending == []


def test_a_failing_processor_names_the_task_and_the_offset(tmp_path: Path) -> None:
    def boom(ctx: ProcessorContext, record: Record) -> None:
        if record.offset == 11:
            raise ValueError("bad record")

    fx = Fixture(tmp_path, {0: boom, 1: count})
    try:
        running(fx, [text(2)])
        batch = {text(2): [consumer_record(text(2), o, None, b"w") for o in (10, 11, 12)]}
        with pytest.raises(ProcessingError) as failure:
            asyncio.run(fx.tasks.process(batch))
        assert "0_2" in str(failure.value)
        assert "text-2@11" in str(failure.value)
        assert isinstance(failure.value.__cause__, ValueError)
        assert fx.tasks.committable([text(2)]) == {text(2): 11}  # up to the failing record only
    finally:
        fx.close()


def test_forward_to_an_undeclared_repartition_topic_is_an_error(tmp_path: Path) -> None:
    async def forwards(ctx: ProcessorContext, record: Record) -> None:
        ctx.forward("words", key=b"k", value=b"v")  # subtopology 1 writes no repartition topic

    fx = Fixture(tmp_path, {0: split, 1: forwards})
    try:
        running(fx, [words(0)])
        with pytest.raises(ProcessingError) as failure:
            asyncio.run(fx.tasks.process({words(0): [consumer_record(words(0), 0, b"k", b"v")]}))
        assert isinstance(failure.value.__cause__, UnknownStoreError)
        assert "'words'" in str(failure.value.__cause__)
    finally:
        fx.close()


def test_a_store_the_subtopology_does_not_declare_is_an_error(tmp_path: Path) -> None:
    seen: list[BaseException] = []

    def looks(ctx: ProcessorContext, record: Record) -> None:
        with pytest.raises(UnknownStoreError, match="'counts'") as info:
            ctx.store("counts")  # subtopology 0 has no store
        seen.append(info.value)
        with pytest.raises(UnknownStoreError, match="'nope'"):
            ctx.forward("nope", key=None, value=None)
        ctx.forward("words", key=b"k", value=b"v")

    fx = Fixture(tmp_path, {0: looks, 1: count})
    try:
        running(fx, [text(0)])
        assert asyncio.run(fx.tasks.process({text(0): [consumer_record(text(0), 0, None, b"x")]})) == 1
        assert len(seen) == 1
    finally:
        fx.close()


# -- sending ---------------------------------------------------------------------------------------


class _Batch:
    """Stands in for aiokafka's BatchBuilder."""

    def __init__(self) -> None:
        self.rows: list[tuple[bytes | None, bytes | None]] = []
        self.stamps: list[tuple[int | None, tuple[tuple[str, bytes], ...]]] = []

    def append(
        self, *, timestamp: int | None, key: bytes | None, value: bytes | None, headers: Any = ()
    ) -> object:
        self.rows.append((key, value))
        self.stamps.append((timestamp, tuple(headers)))
        return object()

    def close(self) -> None:
        pass


class _Producer:
    """Stands in for the Kafka producer (the layer below): numbers records per partition."""

    def __init__(self, fail_topic: str | None = None, refuse_after: int | None = None) -> None:
        self.sent: list[tuple[str, int | None, bytes | None, bytes | None]] = []
        self._refuse_after = refuse_after
        self.futures: list[tuple[asyncio.Future[RecordMetadata], RecordMetadata | BaseException]] = []
        self._next: dict[tuple[str, int], int] = {}
        self._fail_topic = fail_topic

    def create_batch(self) -> _Batch:
        return _Batch()

    async def partitions_for(self, topic: str) -> set[int]:
        return {0}

    async def send_batch(
        self, batch: _Batch, topic: str, *, partition: int
    ) -> asyncio.Future[RecordMetadata]:
        """One future per batch, resolved (on flush) with the batch's first offset."""
        if self._refuse_after is not None and len(self.sent) + len(batch.rows) > self._refuse_after:
            raise RuntimeError("send refused (buffer full / metadata timeout)")
        self.sent += [(topic, partition, key, value) for key, value in batch.rows]
        p = partition
        offset = self._next.get((topic, p), 100)
        self._next[(topic, p)] = offset + len(batch.rows)
        future: asyncio.Future[RecordMetadata] = asyncio.get_running_loop().create_future()
        outcome: RecordMetadata | BaseException
        if topic == self._fail_topic:
            outcome = RuntimeError("broker said no")
        else:
            outcome = RecordMetadata(topic, p, AioTopicPartition(topic, p), offset, 0, 0, None)
        self.futures.append((future, outcome))
        return future

    async def flush(self) -> None:
        for future, outcome in self.futures:
            if isinstance(outcome, BaseException):
                future.set_exception(outcome)
            else:
                future.set_result(outcome)
        self.futures = []
        await asyncio.sleep(0)  # let the done callbacks run


def test_send_pending_sends_changelog_and_output_records_and_acks_move_offsets(fx: Fixture) -> None:
    running(fx, [text(0), words(1)])
    producer = _Producer()

    async def go() -> None:
        await fx.tasks.process(
            {
                text(0): [consumer_record(text(0), 0, None, b"x y")],
                words(1): [consumer_record(words(1), 0, b"q", b"1")],
            }
        )
        await fx.tasks.send_pending(producer)
        await producer.flush()

    asyncio.run(go())
    assert sorted(producer.sent, key=repr) == sorted(
        [
            (CHANGELOG, 1, b"q", (1).to_bytes(8, "big")),
            (WORDS, 0, b"x", b"1"),  # keyed outputs: partitioned as the producer would
            (WORDS, 0, b"y", b"1"),
        ],
        key=repr,
    )
    fx.tasks.raise_send_failures()  # nothing failed
    assert fx.tasks.tasks[t("1_1")].changelog_offsets == {cl(1): 101}
    fx.tasks.checkpoint_all()
    assert fx.directory.read_checkpoint(t("1_1")) == {cl(1): 101}


def test_outputs_of_every_batch_are_sent_not_only_the_first(fx: Fixture) -> None:
    """Each task's processor context is kept across batches; what it writes after the first
    ``send_pending`` must still reach the producer (a context once held on to the first
    outbox list, and every later output of the task was silently dropped)."""
    running(fx, [text(0)])
    producer = _Producer()

    async def go() -> None:
        for offset, line in enumerate((b"a", b"b c", b"d")):
            await fx.tasks.process({text(0): [consumer_record(text(0), offset, None, line)]})
            await fx.tasks.send_pending(producer)
            await producer.flush()

    asyncio.run(go())
    assert [key for topic, _, key, _ in producer.sent if topic == WORDS] == [b"a", b"b", b"c", b"d"]


def test_a_failed_send_is_raised_as_a_processing_error_by_every_later_flush(fx: Fixture) -> None:
    """The failure is sticky: a second flush (another commit racing the first, or App.stop's
    commit after the loop's commit raised) must raise too, or it would commit past the record
    that was not delivered (a crash-audit loss on Tansu)."""
    running(fx, [words(1)])
    producer = _Producer(fail_topic=CHANGELOG)

    async def go() -> None:
        await fx.tasks.process({words(1): [consumer_record(words(1), 0, b"q", b"1")]})
        await fx.tasks.send_pending(producer)
        await producer.flush()

    asyncio.run(go())
    for _ in range(2):
        with pytest.raises(ProcessingError, match="broker said no"):
            fx.tasks.raise_send_failures()
    assert fx.tasks.tasks[t("1_1")].changelog_offsets == {cl(1): 0}


def test_close_all_closes_every_task_and_reports_it(fx: Fixture) -> None:
    fx.reconcile([text(0), words(0)], standby=["1_1"])
    stores = [s for task in fx.tasks.tasks.values() for s in task.stores.values()]
    before = len(fx.events)
    asyncio.run(fx.tasks.close_all(clean=True))
    closed = [(str(e.task), e.role, e.clean) for e in fx.events[before:] if isinstance(e, TaskClosed)]
    assert closed == [("0_0", "active", True), ("1_0", "active", True), ("1_1", "standby", True)]
    assert fx.tasks.tasks == {}
    assert all(s.closed for s in stores)
    assert fx.directory.read_checkpoint(t("1_1")) == {cl(1): 0}


def test_a_send_that_raises_keeps_the_next_commit_from_happening(fx: Fixture) -> None:
    """A record ``producer.send`` refused is gone from the task's queue: what the app's flush
    (send_pending, producer flush, raise_send_failures) does next must fail, or the batch's
    input offsets would be committed without its changelog record."""
    running(fx, [words(1)])
    refusing = _Producer(refuse_after=1)

    async def go() -> None:
        await fx.tasks.process({words(1): [consumer_record(words(1), 0, b"a", b"1")]})
        await fx.tasks.process({words(1): [consumer_record(words(1), 1, b"b", b"1")]})
        with pytest.raises(RuntimeError, match="refused"):
            await fx.tasks.send_pending(refusing)
        healthy = _Producer()
        await fx.tasks.send_pending(healthy)
        await healthy.flush()
        await refusing.flush()
        assert healthy.sent == []  # the refused record is not sent again

    asyncio.run(go())
    with pytest.raises(ProcessingError, match="refused"):
        fx.tasks.raise_send_failures()


def test_a_fenced_task_stops_at_once_and_the_reconcile_closes_it(fx: Fixture) -> None:
    """Lost partitions fence their tasks without the app lock (a send to a hung broker may
    hold it): no record of theirs is processed, no changelog record sent; TaskClosed
    (dirty) goes out now, and the reconcile that follows closes the stores
    (dropped: a write never sent) without a second TaskClosed."""
    running(fx, [words(0), words(1)])
    producer = _Producer()
    asyncio.run(fx.tasks.process({words(0): [consumer_record(words(0), 0, b"a", b"1")]}))
    fx.tasks.flush_caches()
    before = len(fx.events)
    assert fx.tasks.fence([words(0)]) == [t("1_0")]
    assert [(str(e.task), e.clean) for e in fx.events[before:] if isinstance(e, TaskClosed)] == [
        ("1_0", False)
    ]
    assert fx.tasks.fence([words(0)]) == []  # once

    async def go() -> int:
        done = await fx.tasks.process(
            {
                words(0): [consumer_record(words(0), 1, b"a", b"1")],
                words(1): [consumer_record(words(1), 0, b"b", b"1")],
            }
        )
        fx.tasks.flush_caches()
        await fx.tasks.send_pending(producer)
        await producer.flush()
        return done

    assert asyncio.run(go()) == 1  # only words-1's record
    assert [(topic, p) for topic, p, *_ in producer.sent] == [(CHANGELOG, 1)]
    events = fx.reconcile([words(1)], lost=[words(0)])
    assert not [e for e in events if isinstance(e, TaskClosed)]  # already reported
    assert t("1_0") not in fx.tasks.tasks
    assert fx.directory.read_checkpoint(t("1_0")) is None  # an unsent write: state dropped


def test_a_fenced_task_closed_on_stop_is_reported_once(fx: Fixture) -> None:
    running(fx, [words(0), words(1)])
    fx.tasks.checkpoint_all()
    fx.tasks.fence([words(0)])
    before = len(fx.events)
    asyncio.run(fx.tasks.close_all(clean=True))
    closed = [(str(e.task), e.clean) for e in fx.events[before:] if isinstance(e, TaskClosed)]
    assert closed == [("1_1", True)]
    assert fx.directory.read_checkpoint(t("1_0")) is None  # fenced: never checkpointed clean
    assert fx.directory.read_checkpoint(t("1_1")) == {cl(1): 0}
