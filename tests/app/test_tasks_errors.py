"""TaskSet with timestamps, headers and the exception handlers: what goes out, what is
skipped, what is dead-lettered, and which input offsets become committable."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest
from aiokafka import ConsumerRecord

from streamtasks.app import ProcessingError, ProcessorContext, Record
from streamtasks.app.handlers import (
    ErrorContext,
    ErrorHandling,
    HandlerResponse,
    HandlerResult,
    log_and_continue,
)
from streamtasks.app.tasks import Processor, TaskSet
from streamtasks.state import INT64, STRING, StateDirectory
from tests.app.test_tasks import (
    CHANGELOG,
    TEXT,
    WORDS,
    Fixture,
    _Producer,
    consumer_record,
    running,
    text,
    words,
)
from tests.ids import task as t
from topology import TopicPartition

DLQ = "dead-letters"
OUT = "out"


def record(
    tp: TopicPartition, offset: int, value: bytes | None, headers: Iterable[tuple[str, bytes]] = ()
) -> ConsumerRecord[Any, Any]:
    """A record keyed ``k<offset>``, timestamped ``1000 + offset``."""
    return consumer_record(tp, offset, b"k%d" % offset, value, headers)


class ErrorsFixture(Fixture):
    def __init__(
        self,
        tmp_path: Path,
        processors: Mapping[int, Processor],
        errors: ErrorHandling,
        source_serdes: Mapping[str, Any] | None = None,
        cache_max_bytes: int = 0,
    ) -> None:
        super().__init__(tmp_path, processors)
        self.tasks = TaskSet(
            self.topology,
            processors,
            directory=StateDirectory(tmp_path, "wc"),
            store_serdes={"counts": (STRING, INT64)},
            emit=self.events.append,
            errors=errors,
            source_serdes=source_serdes,
            cache_max_bytes=cache_max_bytes,
        )
        self.tasks.set_partition_counts(self.topology.partition_counts({TEXT: 4}))


class StampingProducer(_Producer):
    """Also keeps each record's timestamp and headers, as the batch got them."""

    def __init__(self, fail_topic: str | None = None) -> None:
        super().__init__(fail_topic=fail_topic)
        self.stamped: list[tuple[str, bytes | None, int | None, tuple[tuple[str, bytes], ...]]] = []

    async def send_batch(self, batch: Any, topic: str, *, partition: int) -> Any:
        for (key, _), (ts, headers) in zip(batch.rows, batch.stamps, strict=True):
            self.stamped.append((topic, key, ts, headers))
        return await super().send_batch(batch, topic, partition=partition)


Batch = Mapping[TopicPartition, list[ConsumerRecord[Any, Any]]]


def run(fx: Fixture, batch: Batch, producer: _Producer) -> None:
    async def go() -> None:
        try:
            await fx.tasks.process(batch)
        finally:
            await fx.tasks.send_pending(producer)
            await producer.flush()
            if fx.tasks.has_unsent():  # what App.flush does: dead letters of refused outputs
                await fx.tasks.send_pending(producer)
                await producer.flush()

    asyncio.run(go())


# -- timestamps and headers ---------------------------------------------------------------------


def test_outputs_carry_the_inputs_timestamp_and_headers_unless_set(tmp_path: Path) -> None:
    def emits(ctx: ProcessorContext, rec: Record) -> None:
        assert rec.headers == (("trace", b"t-%d" % rec.offset),)
        ctx.forward("words", key=b"inherit", value=b"1")
        ctx.send(OUT, key=b"own", value=b"2", timestamp=42, headers=(("mine", b"x"),))
        ctx.send(OUT, key=b"bare", value=b"3", headers=())

    fx = ErrorsFixture(tmp_path, {0: emits, 1: lambda ctx, rec: None}, ErrorHandling())
    try:
        running(fx, [text(0)])
        producer = StampingProducer()
        run(fx, {text(0): [record(text(0), 3, b"v", [("trace", b"t-3")])]}, producer)
        assert sorted(producer.stamped, key=repr) == sorted(
            [
                (WORDS, b"inherit", 1_003, (("trace", b"t-3"),)),
                (OUT, b"own", 42, (("mine", b"x"),)),
                (OUT, b"bare", 1_003, ()),
            ],
            key=repr,
        )
    finally:
        fx.close()


@pytest.mark.parametrize("cache", [0, 1 << 20])
def test_changelog_records_keep_the_timestamp_of_the_write(tmp_path: Path, cache: int) -> None:
    async def counts(ctx: ProcessorContext, rec: Record) -> None:
        store = ctx.store("counts")
        key = rec.key.decode()
        store.put(key, (store.get(key) or 0) + 1)

    processors: dict[int, Processor] = {0: lambda ctx, rec: None, 1: counts}
    fx = ErrorsFixture(tmp_path, processors, ErrorHandling(), cache_max_bytes=cache)
    try:
        running(fx, [words(1)])
        producer = StampingProducer()
        batch = {words(1): [record(words(1), o, b"1") for o in (1, 2, 3)]}
        asyncio.run(fx.tasks.process(batch))
        fx.tasks.flush_caches()  # the cache writes each key's last value out on commit
        run(fx, {}, producer)
        got = [(key, ts) for topic, key, ts, _ in producer.stamped if topic == CHANGELOG]
        # through the cache, only each key's last write goes out, still with its own timestamp
        assert got == [(b"k1", 1_001), (b"k2", 1_002), (b"k3", 1_003)]
    finally:
        fx.close()


# -- the deserialization and processing handlers ----------------------------------------------


def test_an_unreadable_record_fails_by_default_with_nothing_committable_past_it(tmp_path: Path) -> None:
    seen: list[int] = []
    fx = ErrorsFixture(
        tmp_path,
        {0: lambda ctx, rec: seen.append(rec.offset), 1: lambda ctx, rec: None},
        ErrorHandling(),
        source_serdes={TEXT: (STRING, STRING)},
    )
    try:
        running(fx, [text(1)])
        batch = {text(1): [record(text(1), o, b"\xff" if o == 11 else b"ok") for o in (10, 11, 12)]}
        with pytest.raises(ProcessingError, match=r"source serde of task 0_1 failed on text-1@11"):
            asyncio.run(fx.tasks.process(batch))
        assert seen == [10]
        assert fx.tasks.committable([text(1)]) == {text(1): 11}
    finally:
        fx.close()


def test_continue_skips_poison_records_and_dead_letters_them_as_they_arrived(tmp_path: Path) -> None:
    seen: list[tuple[int, str]] = []

    def strict(ctx: ProcessorContext, rec: Record) -> None:
        if rec.value == "boom":
            raise ValueError("cannot handle boom")
        seen.append((rec.offset, rec.value))
        ctx.send(OUT, key=b"ok", value=rec.value.encode())

    errors = ErrorHandling(
        deserialization=log_and_continue, processing=log_and_continue, dead_letter_topic=DLQ
    )
    fx = ErrorsFixture(
        tmp_path, {0: strict, 1: lambda ctx, rec: None}, errors, source_serdes={TEXT: (STRING, STRING)}
    )
    try:
        running(fx, [text(2)])
        producer = StampingProducer()
        values = {20: b"a", 21: b"\xff\xfe", 22: b"boom", 23: b"d"}
        batch = {text(2): [record(text(2), o, v, [("trace", b"x")]) for o, v in values.items()]}
        run(fx, batch, producer)
        assert seen == [(20, "a"), (23, "d")]
        assert fx.tasks.committable([text(2)]) == {text(2): 24}  # skipped records count as handled
        assert fx.tasks.records_dropped == 2
        dead = [(key, value) for topic, _, key, value in producer.sent if topic == DLQ]
        assert dead == [(b"k21", b"\xff\xfe"), (b"k22", b"boom")]  # the bytes as they arrived
        stamps = [(ts, dict(h)) for topic, _, ts, h in producer.stamped if topic == DLQ]
        assert [ts for ts, _ in stamps] == [1_021, 1_022]
        first, second = (h for _, h in stamps)
        assert first["trace"] == b"x"
        assert first["__streams.errors.exception"] == b"streamtasks.errors.SerdeError"
        assert second["__streams.errors.exception"] == b"builtins.ValueError"
        assert second["__streams.errors.message"] == b"cannot handle boom"
        assert (second["__streams.errors.topic"], second["__streams.errors.partition"]) == (b"text", b"2")
        assert second["__streams.errors.offset"] == b"22"
    finally:
        fx.close()


def test_fail_with_a_dead_letter_topic_writes_the_record_then_raises(tmp_path: Path) -> None:
    def boom(ctx: ProcessorContext, rec: Record) -> None:
        raise KeyError("missing")

    fx = ErrorsFixture(tmp_path, {0: boom, 1: lambda ctx, rec: None}, ErrorHandling(dead_letter_topic=DLQ))
    try:
        running(fx, [text(0)])
        producer = _Producer()
        with pytest.raises(ProcessingError, match=r"processor of task 0_0 failed on text-0@4"):
            run(fx, {text(0): [record(text(0), 4, b"v"), record(text(0), 5, b"v")]}, producer)
        assert [(topic, key) for topic, _, key, _ in producer.sent] == [(DLQ, b"k4")]
        assert fx.tasks.committable([text(0)]) == {}
    finally:
        fx.close()


def test_a_callable_handler_decides_per_record(tmp_path: Path) -> None:
    asked: list[tuple[str, int, str]] = []

    def picky(ctx: ErrorContext, exc: BaseException) -> HandlerResult:
        asked.append((ctx.stage, ctx.offset, type(exc).__name__))
        if isinstance(exc, ValueError):
            return HandlerResult(response=HandlerResponse.CONTINUE, dead_letter=False)
        return HandlerResult(response=HandlerResponse.FAIL)

    def proc(ctx: ProcessorContext, rec: Record) -> None:
        raise (ValueError if rec.offset == 1 else TypeError)("no")

    fx = ErrorsFixture(tmp_path, {0: proc, 1: lambda ctx, rec: None}, ErrorHandling(processing=picky))
    try:
        running(fx, [text(3)])
        with pytest.raises(ProcessingError):
            asyncio.run(fx.tasks.process({text(3): [record(text(3), o, b"v") for o in (1, 2)]}))
        assert asked == [("processing", 1, "ValueError"), ("processing", 2, "TypeError")]
        assert fx.tasks.committable([text(3)]) == {text(3): 2}
    finally:
        fx.close()


# -- the production handler --------------------------------------------------------------------


@pytest.mark.parametrize("answer", ["continue", "fail"])
def test_a_refused_output_goes_to_the_production_handler(tmp_path: Path, answer: str) -> None:
    def to_out(ctx: ProcessorContext, rec: Record) -> None:
        ctx.send(OUT, key=rec.key, value=rec.value)

    handler = log_and_continue if answer == "continue" else ErrorHandling().production
    errors = ErrorHandling(production=handler, dead_letter_topic=DLQ)
    fx = ErrorsFixture(tmp_path, {0: to_out, 1: lambda ctx, rec: None}, errors)
    try:
        running(fx, [text(0)])
        producer = StampingProducer(fail_topic=OUT)
        run(fx, {text(0): [record(text(0), 7, b"big", [("trace", b"y")])]}, producer)
        dead = [(topic, key, ts, dict(h)) for topic, key, ts, h in producer.stamped if topic == DLQ]
        assert len(dead) == 1  # the built-in handlers dead-letter on CONTINUE and on FAIL
        _, key, ts, headers = dead[0]
        assert (key, ts, headers["trace"]) == (b"k7", 1_007, b"y")  # the input record, as it arrived
        assert headers["__streams.errors.offset"] == b"7"
        assert headers["__streams.errors.message"] == b"broker said no"
        assert fx.tasks.committable([text(0)]) == {text(0): 8}
        if answer == "continue":
            fx.tasks.raise_send_failures()  # nothing to raise: the record was dropped
            assert fx.tasks.records_dropped == 1
        else:
            with pytest.raises(ProcessingError, match="broker said no"):
                fx.tasks.raise_send_failures()  # App.flush raises before committing
    finally:
        fx.close()


def test_a_refused_dead_letter_record_is_fatal(tmp_path: Path) -> None:
    def boom(ctx: ProcessorContext, rec: Record) -> None:
        raise ValueError("x")

    errors = ErrorHandling(processing=log_and_continue, production=log_and_continue, dead_letter_topic=DLQ)
    fx = ErrorsFixture(tmp_path, {0: boom, 1: lambda ctx, rec: None}, errors)
    try:
        running(fx, [text(0)])
        run(fx, {text(0): [record(text(0), 0, b"v")]}, _Producer(fail_topic=DLQ))
        with pytest.raises(ProcessingError, match="broker said no"):
            fx.tasks.raise_send_failures()
        assert t("0_0") in fx.tasks.tasks
    finally:
        fx.close()
