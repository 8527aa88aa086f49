"""The punctuation app of the live punctuation tests (``test_app_punctuation``,
``test_app_stream_time``) and what they share: two instances of one app counting per key, with a
STREAM_TIME schedule emitting the counts and a WALL_CLOCK_TIME one writing ticks, each test on
its own topics."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import TopicPartition as AioTP

from streamtasks.app import App, Cancellable, ProcessorContext, PunctuationType, Record
from streamtasks.runtime.admin import TopicSpec, create_topics_async
from streamtasks.state import INT64, STRING
from topology import TopologyBuilder

__all__ = [
    "BASE_TS",
    "Counts",
    "actives",
    "make_app",
    "produce",
    "read_committed",
    "two_instances",
    "wait_for",
]

#: The input's first timestamp: a whole 1,000,000 ms at most ~17 min before now. Not a fixed
#: date: the broker's time retention (7 days by default, its first check 30 s after it starts)
#: deletes segments whose records are all older, the active one included, so records stamped
#: in 2023 vanished mid-test (the out topic's log start offset moved to 2: the stream-time emits
#: at 0 s and 0.1 s gone from the read_committed output, taken for an exactly-once loss).
BASE_TS = time.time_ns() // 1_000_000 // 1_000_000 * 1_000_000


class Counts:
    """The processor (one object for every task of every instance of one test)."""

    def __init__(self, out: str, ticks: str) -> None:
        self.out, self.ticks = out, ticks
        #: (instance, task) -> the handles its init made, each time it ran.
        self.handles: dict[tuple[str, str], list[Cancellable]] = {}

    def for_instance(self, name: str) -> Any:
        counts = self

        class Bound:
            def init(self, ctx: ProcessorContext) -> None:
                key = (name, str(ctx.task_id))
                counts.handles.setdefault(key, []).extend(
                    [
                        ctx.schedule(1_000, PunctuationType.STREAM_TIME, counts.emit),
                        ctx.schedule(200, PunctuationType.WALL_CLOCK_TIME, self.tick),
                    ]
                )

            def process(self, ctx: ProcessorContext, record: Record) -> None:
                store = ctx.store("counts")
                store.put(record.key, (store.get(record.key) or 0) + 1)

            def tick(self, ctx: ProcessorContext, timestamp: int) -> None:
                ctx.send(counts.ticks, key=str(ctx.task_id).encode(), value=name.encode())

        return Bound()

    def emit(self, ctx: ProcessorContext, timestamp: int) -> None:
        store = ctx.store("counts")
        for key, n in list(store.items()):
            ctx.send(self.out, key=key.encode(), value=f"{ctx.task_id}:{n}".encode())
            store.delete(key)


def make_app(
    name: str, app_id: str, topic: str, bootstrap: str, tmp: str, *, counts: Counts, guarantee: str
) -> App:
    builder = TopologyBuilder(app_id)
    builder.stream(topic).store("counts")
    return App(
        builder.build(),
        {0: counts.for_instance(name)},
        application_id=app_id,
        bootstrap_servers=bootstrap,
        state_dir=f"{tmp}/{name}",
        client_id=name,
        session_timeout_ms=6_000,
        heartbeat_interval_ms=500,
        commit_interval_ms=300,
        stores={"counts": (STRING, INT64)},
        source_serdes={topic: (STRING, STRING)},
        processing_guarantee=guarantee,
    )


async def produce(bootstrap: str, topic: str, records: list[tuple[int, str, int]]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        for partition, key, ts in records:
            await producer.send_and_wait(
                topic, key=key.encode(), value=b"x", partition=partition, timestamp_ms=ts
            )
    finally:
        await producer.stop()


async def read_committed(bootstrap: str, topic: str) -> list[Any]:
    """Every committed record of ``topic``'s partition 0 (aborted transactions' are not)."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, auto_offset_reset="earliest", isolation_level="read_committed"
    )
    await consumer.start()
    try:
        tp = AioTP(topic, 0)
        consumer.assign([tp])
        end = (await consumer.end_offsets([tp]))[tp]
        out: list[Any] = []
        deadline = time.monotonic() + 30
        while await consumer.position(tp) < end and time.monotonic() < deadline:
            out += (await consumer.getmany(tp, timeout_ms=200)).get(tp, [])
        return out
    finally:
        await consumer.stop()


async def wait_for(check: Any, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s")
        await asyncio.sleep(0.1)


def actives(app: App) -> set[str]:
    return {str(t) for t, role in app.tasks.roles().items() if role == "active"}


async def two_instances(prefix: str, bootstrap: str, tmp: str, guarantee: str) -> tuple[Counts, App, App]:
    """A fresh input topic ``<prefix>-<run>`` (2 partitions, also the application id) with its
    ``-out`` and ``-ticks`` topics (1 partition each), and the instances ``a`` and ``b`` of the
    app on it (not started), sharing one :class:`Counts`."""
    app_id = topic = f"{prefix}-{uuid.uuid4().hex[:8]}"
    counts = Counts(f"{topic}-out", f"{topic}-ticks")
    await create_topics_async(
        bootstrap,
        [
            TopicSpec(name=topic, partitions=2),
            TopicSpec(name=counts.out, partitions=1),
            TopicSpec(name=counts.ticks, partitions=1),
        ],
    )
    a = make_app("a", app_id, topic, bootstrap, tmp, counts=counts, guarantee=guarantee)
    b = make_app("b", app_id, topic, bootstrap, tmp, counts=counts, guarantee=guarantee)
    return counts, a, b
