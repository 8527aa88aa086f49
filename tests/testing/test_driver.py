"""The test driver: records piped through a topology's processors, repartitioned by key to the
downstream task, stores read across tasks, punctuation on stream time and on the driver's wall
clock, and the exception handlers as in the App. No broker anywhere."""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Iterable

import pytest

from streamtasks.app import (
    ErrorContext,
    HandlerResponse,
    ProcessingError,
    ProcessorContext,
    ProcessorSpec,
    PunctuationType,
    Record,
)
from streamtasks.app.handlers import DLQ_OFFSET, DLQ_TOPIC
from streamtasks.errors import ConfigError
from streamtasks.state.serdes import BYTES, INT64, STRING
from streamtasks.testing import DriverError, TopologyTestDriver
from tests.ids import task as t
from topology import TopologyBuilder
from topology.model import Topology

TEXT = "the quick brown fox jumps over the lazy dog the end"


def wordcount() -> Topology:
    builder = TopologyBuilder("wc")
    builder.stream("lines").repartition("words").store("counts")
    return builder.build()


def split(ctx: ProcessorContext, record: Record) -> None:
    for word in (record.value or "").split():
        ctx.forward("words", key=word.encode(), value=b"1")


async def count(ctx: ProcessorContext, record: Record) -> None:
    await asyncio.sleep(0)  # a bare yield: fine without an event loop
    counts = ctx.store("counts")
    word = (record.key or b"").decode()
    total = (counts.get(word) or 0) + 1
    counts.put(word, total)
    ctx.send("counted", key=record.key, value=str(total).encode())


@pytest.fixture
def driver() -> Iterable[TopologyTestDriver]:
    with TopologyTestDriver(
        wordcount(),
        {0: split, 1: count},
        stores={"counts": (STRING, INT64)},
        source_serdes={"lines": (BYTES, STRING)},
        partitions={"lines": 3},
    ) as d:
        yield d


def test_words_are_repartitioned_by_key_and_counted_by_the_task_of_their_partition(
    driver: TopologyTestDriver,
) -> None:
    lines = driver.input_topic("lines", BYTES, STRING)
    out = driver.output_topic("counted", STRING, STRING)
    lines.pipe(None, TEXT, timestamp=5_000, headers=[("trace", b"abc")])
    records = out.read_records()
    # a key's records keep their order (records of different partitions need not: the task set
    # sends a batch per partition, as the App does)
    by_word: dict[str, list[str]] = collections.defaultdict(list)
    for r in records:
        by_word[r.key].append(r.value)
    assert by_word == {
        w: [str(i + 1) for i in range(n)] for w, n in collections.Counter(TEXT.split()).items()
    }
    # outputs carry the input's timestamp and headers (through the repartition topic)
    assert {(r.timestamp, r.headers) for r in records} == {(5_000, (("trace", b"abc"),))}
    assert out.is_empty()
    counts = driver.store("counts")
    expected = collections.Counter(TEXT.split())
    assert counts.to_dict() == dict(expected)
    assert counts["the"] == 3
    assert "cat" not in counts
    assert len(counts) == len(expected)
    # each word lives in the task of its partition of the repartition topic
    words = driver.topics.records("wc-words-repartition")
    for w in words:
        assert counts.task_of((w.key or b"").decode()) == t(f"1_{w.partition}")
    assert len({w.partition for w in words}) > 1  # three partitions, really used
    assert sum(len(v) for v in counts.by_task().values()) == len(expected)


def test_changelog_records_are_written_on_commit_with_the_cache_merging_updates() -> None:
    with TopologyTestDriver(
        wordcount(),
        {0: split, 1: count},
        stores={"counts": (STRING, INT64)},
        source_serdes={"lines": (BYTES, STRING)},
        config={"statestore.cache.max.bytes": 1 << 20},
    ) as driver:
        driver.input_topic("lines", BYTES, STRING).pipe(None, "a a a b", timestamp=7)
        changelog = [
            (r.key, int.from_bytes(r.value or b"", "big"))
            for r in driver.topics.records("wc-counts-changelog")
        ]
    assert sorted(changelog) == [(b"a", 3), (b"b", 1)]  # one record per key: the cache merged them


def test_the_record_timestamp_defaults_to_the_wall_clock() -> None:
    with TopologyTestDriver(
        wordcount(),
        {0: split, 1: count},
        stores={"counts": (STRING, INT64)},
        source_serdes={"lines": (BYTES, STRING)},
        wall_clock_ms=42,
    ) as driver:
        driver.input_topic("lines", BYTES, STRING).pipe(None, "x")
        assert [r.timestamp for r in driver.output_topic("counted", STRING, STRING).read_records()] == [42]
        assert driver.stream_time("wc-words-repartition") == 42


class Sessions:
    """Per user, clicks since the last emit; every 10 s of stream time emits and clears them;
    every minute of wall-clock time emits a heartbeat per task."""

    def init(self, ctx: ProcessorContext) -> None:
        ctx.schedule(10_000, PunctuationType.STREAM_TIME, self.emit)
        ctx.schedule(60_000, PunctuationType.WALL_CLOCK_TIME, self.heartbeat)

    def process(self, ctx: ProcessorContext, record: Record) -> None:
        clicks = ctx.store("clicks")
        clicks.put(record.key, (clicks.get(record.key) or 0) + 1)

    def emit(self, ctx: ProcessorContext, timestamp: int) -> None:
        clicks = ctx.store("clicks")
        for user, n in list(clicks.items()):
            ctx.send("sessions", key=user.encode(), value=str(n).encode())
            clicks.delete(user)

    def heartbeat(self, ctx: ProcessorContext, timestamp: int) -> None:
        ctx.send("heartbeats", key=str(ctx.task_id).encode(), value=None)


def sessions_driver(**kwargs: object) -> TopologyTestDriver:
    builder = TopologyBuilder("sess")
    builder.stream("clicks").store("clicks")
    return TopologyTestDriver(
        builder.build(),
        {0: Sessions()},
        stores={"clicks": (STRING, INT64)},
        source_serdes={"clicks": (STRING, BYTES)},
        partitions={"clicks": 2},
        **kwargs,  # type: ignore[arg-type]
    )


def test_stream_time_punctuation_follows_the_piped_timestamps() -> None:
    with sessions_driver() as driver:
        clicks = driver.input_topic("clicks", STRING, BYTES)
        sessions = driver.output_topic("sessions", STRING, STRING)
        clicks.pipe("ann", b"", timestamp=0, partition=0)  # stream time 0: due at once (nothing yet)
        assert sessions.read_records()[0].value == "1"
        clicks.pipe("ann", b"", timestamp=3_000, partition=0)
        clicks.pipe("ann", b"", timestamp=9_999, partition=0)
        assert sessions.is_empty()
        clicks.pipe("bob", b"", timestamp=9_000, partition=1)  # task 0_1: its own stream time
        assert [(r.key, r.value, r.timestamp) for r in sessions.read_records()] == [("bob", "1", 9_000)]
        clicks.pipe("ann", b"", timestamp=25_000, partition=0)  # past 10 s and 20 s: fires once
        assert [(r.key, r.value, r.timestamp) for r in sessions.read_records()] == [("ann", "3", 25_000)]
        assert driver.stream_time("clicks", 0) == 25_000
        assert driver.stream_time("clicks", 1) == 9_000


def test_advance_wall_clock_fires_wall_clock_punctuations_without_sleeping() -> None:
    with sessions_driver(wall_clock_ms=1_000) as driver:
        beats = driver.output_topic("heartbeats", STRING, BYTES)
        assert driver.advance_wall_clock(59_999) == 0
        assert beats.is_empty()
        assert driver.advance_wall_clock(1) == 2  # both tasks
        assert [(r.key, r.timestamp) for r in beats.read_records()] == [("0_0", 61_000), ("0_1", 61_000)]
        assert driver.advance_wall_clock(600_000) == 2  # a long gap: once each
        assert beats.queue_size() == 2
        with pytest.raises(DriverError, match="forward"):
            driver.advance_wall_clock(-1)


def test_a_poison_record_is_skipped_and_dead_lettered_with_log_and_continue() -> None:
    def picky(ctx: ProcessorContext, record: Record) -> None:
        if record.value == "poison":
            raise ValueError("cannot split poison")
        split(ctx, record)

    with TopologyTestDriver(
        wordcount(),
        {0: picky, 1: count},
        stores={"counts": (STRING, INT64)},
        source_serdes={"lines": (BYTES, STRING)},
        config={
            "processing.exception.handler": "log_and_continue",
            "errors.dead.letter.queue.topic.name": "dlq",
        },
    ) as driver:
        lines = driver.input_topic("lines", BYTES, STRING)
        lines.pipe(b"k", "a")
        lines.pipe(b"k", "poison")
        lines.pipe(b"k", "a")
        assert driver.store("counts")["a"] == 2
        (dead,) = driver.output_topic("dlq", BYTES, STRING).read_records()
        headers = dict(dead.headers)
        assert dead.value == "poison"
        assert headers[DLQ_TOPIC] == b"lines"
        assert headers[DLQ_OFFSET] == b"1"
        assert driver.tasks.records_dropped == 1


def test_log_and_fail_raises_from_pipe_and_a_callable_handler_decides() -> None:
    def boom(ctx: ProcessorContext, record: Record) -> None:
        raise ValueError("nope")

    with (
        TopologyTestDriver(wordcount(), {0: boom, 1: count}) as driver,
        pytest.raises(ProcessingError, match="nope"),
    ):
        driver.input_topic("lines", BYTES, BYTES).pipe(None, b"x")
    seen: list[ErrorContext] = []

    def keep_going(context: ErrorContext, exc: BaseException) -> HandlerResponse:
        seen.append(context)
        return HandlerResponse.CONTINUE

    with TopologyTestDriver(wordcount(), {0: boom, 1: count}, processing_exception_handler=keep_going) as d:
        d.input_topic("lines", BYTES, BYTES).pipe(b"k", b"x", timestamp=9)
        assert [(c.topic, c.offset, c.timestamp, c.key) for c in seen] == [("lines", 0, 9, b"k")]


def test_a_bad_source_record_goes_to_the_deserialization_handler() -> None:
    with TopologyTestDriver(
        wordcount(),
        {0: split, 1: count},
        stores={"counts": (STRING, INT64)},
        source_serdes={"lines": (BYTES, STRING)},
        deserialization_exception_handler="log_and_continue",
    ) as driver:
        driver.pipe_raw("lines", None, b"\xff\xfe")  # not UTF-8
        driver.input_topic("lines", BYTES, STRING).pipe(None, "ok")
        assert driver.store("counts").to_dict() == {"ok": 1}


def test_misuse_is_a_clear_error() -> None:
    with pytest.raises(ConfigError, match="does not read"):
        TopologyTestDriver(wordcount(), {0: split, 1: count}, partitions={"nope": 2})
    with pytest.raises(ConfigError, match="application_id"):
        TopologyTestDriver(wordcount(), {0: split, 1: count}, application_id="other")
    driver = TopologyTestDriver(wordcount(), {0: split, 1: count})
    with pytest.raises(DriverError, match="not a source topic"):
        driver.input_topic("wc-words-repartition", BYTES, BYTES)
    with pytest.raises(DriverError, match="no task has a store 'nope'"):
        driver.store("nope")
    with pytest.raises(DriverError, match="no partition 5"):
        driver.pipe_raw("lines", None, b"x", partition=5)
    driver.close()
    with pytest.raises(DriverError, match="closed"):
        driver.input_topic("lines", BYTES, BYTES).pipe(None, b"x")


def test_a_processor_that_waits_for_io_is_told_the_driver_has_no_event_loop() -> None:
    async def waits(ctx: ProcessorContext, record: Record) -> None:
        await asyncio.get_running_loop().create_future()

    async def in_a_test_with_a_loop() -> None:
        with (
            TopologyTestDriver(wordcount(), {0: waits, 1: count}) as driver,
            pytest.raises(DriverError, match="no event loop"),
        ):
            driver.input_topic("lines", BYTES, BYTES).pipe(None, b"x")

    asyncio.run(in_a_test_with_a_loop())


def test_init_hooks_run_for_every_task_when_the_driver_starts() -> None:
    started: list[str] = []

    def init(ctx: ProcessorContext) -> None:
        started.append(str(ctx.task_id))

    spec = ProcessorSpec(process=count, init=init)
    with TopologyTestDriver(wordcount(), {0: split, 1: spec}, partitions={"lines": 2}):
        assert started == ["1_0", "1_1"]


def test_pipe_many_steps_timestamps_and_read_record_reads_one_at_a_time(driver: TopologyTestDriver) -> None:
    lines = driver.input_topic("lines", BYTES, STRING)
    lines.pipe_many([(None, "a"), (None, "b"), (None, "a")], timestamp=100, step_ms=10)
    out = driver.output_topic("counted", STRING, STRING)
    assert out.queue_size() == 3
    first = out.read_record()
    assert (first.key, first.value, first.timestamp) == ("a", "1", 100)
    assert sorted((r.key, r.value, r.timestamp) for r in out.read_records()) == [
        ("a", "2", 120),
        ("b", "1", 110),
    ]
    with pytest.raises(LookupError, match="no record left"):
        out.read_record()
    assert driver.stream_time("wc-words-repartition", driver.store("counts").task_of("a").partition) == 120  # type: ignore[union-attr]


def test_window_store_reads_windows_across_tasks_by_key_and_time_range() -> None:
    builder = TopologyBuilder("wc")
    builder.stream("clicks").window_store("per-second", size_ms=1_000, retention_ms=60_000)

    def count_per_second(ctx: ProcessorContext, record: Record) -> None:
        windows = ctx.window_store("per-second")
        start = record.timestamp - record.timestamp % 1_000
        windows.put(record.key, (windows.get(record.key, start) or 0) + 1, start)

    with TopologyTestDriver(
        builder.build(),
        {0: count_per_second},
        stores={"per-second": (STRING, INT64)},
        source_serdes={"clicks": (STRING, BYTES)},
        partitions={"clicks": 2},
    ) as driver:
        clicks = driver.input_topic("clicks", STRING, BYTES)
        for user, partition, at in [
            ("ann", 0, 1_100),
            ("ann", 0, 1_900),
            ("ann", 0, 3_000),
            ("bob", 1, 1_500),
        ]:
            clicks.pipe(user, b"", timestamp=at, partition=partition)
        view = driver.window_store("per-second")
        assert view.get("ann", 1_000) == 2
        assert view.get("ann", 2_000) is None
        assert view.fetch("ann", 0, 2_999) == [(1_000, 2)]
        assert view.fetch("ann", 0, 10_000) == [(1_000, 2), (3_000, 1)]
        assert view.fetch_all(1_000, 1_000) == [("ann", 1_000, 2), ("bob", 1_000, 1)]
        assert view.task_of("bob", 1_000) == t("0_1")
        assert view.by_task() == {
            t("0_0"): [("ann", 1_000, 2), ("ann", 3_000, 1)],
            t("0_1"): [("bob", 1_000, 1)],
        }
        assert len(view) == 3
        with pytest.raises(DriverError, match="no task has a window store 'nope'"):
            driver.window_store("nope")
