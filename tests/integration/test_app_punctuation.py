"""Punctuation on a real broker, at least once and exactly once (the records read back
read_committed): what the schedules write is read back from the topics, and a task's schedules
end on the process that loses it and start on the one that gains it.

One App instance (``a``) owns both tasks of a 2-partition input. Each task counts records per
key; its STREAM_TIME schedule (every 1 s of record time) sends the counts to ``out`` with the
stream time as timestamp and clears them; its WALL_CLOCK_TIME schedule (every 200 ms) sends a
tick naming the instance to ``ticks``. Then ``b`` joins: one task moves to it. The moved task's
schedules on ``a`` are cancelled (its init handles say so) and no tick of it from ``a`` is
written after the hand-over, while ``b`` ticks it.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import TopicPartition as AioTP

from streamtasks.app import App, Cancellable, ProcessorContext, PunctuationType, Record
from streamtasks.embedded import EmbeddedBroker, ExternalCluster
from streamtasks.errors import CommitFailedError
from streamtasks.runtime.admin import TopicSpec, create_topics_async
from streamtasks.state import INT64, STRING
from topology import TopologyBuilder

pytestmark = [pytest.mark.integration]

BASE_TS = 1_700_000_000_000


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
        # commits on revocation, when the test asks and on stop: an exactly-once interval commit
        # racing the rebalance is fenced (ILLEGAL_GENERATION) and stops the app (docs/app.md,
        # "Limits"), which is not what this test is about
        commit_interval_ms=600_000,
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


async def scenario(bootstrap: str, tmp: str, guarantee: str) -> dict[str, Any]:
    run = uuid.uuid4().hex[:8]
    app_id = topic = f"punct-{run}"
    out, ticks = f"{topic}-out", f"{topic}-ticks"
    await create_topics_async(
        bootstrap,
        [
            TopicSpec(name=topic, partitions=2),
            TopicSpec(name=out, partitions=1),
            TopicSpec(name=ticks, partitions=1),
        ],
    )
    counts = Counts(out, ticks)
    a = make_app("a", app_id, topic, bootstrap, tmp, counts=counts, guarantee=guarantee)
    b = make_app("b", app_id, topic, bootstrap, tmp, counts=counts, guarantee=guarantee)
    result: dict[str, Any] = {"counts": counts}
    await a.start()
    runners = [asyncio.create_task(a.run())]
    try:
        await wait_for(lambda: actives(a) == {"0_0", "0_1"} and not a.tasks.restoring(), 60)
        # partition 0: stream time 0.0 s, 0.5 s, 1.2 s (fires: 1 s passed), 3.7 s (fires once)
        # partition 1: 0.1 s (fires: the first record), 0.9 s
        await produce(
            bootstrap,
            topic,
            [
                (0, "k", BASE_TS),
                (0, "k", BASE_TS + 500),
                (0, "j", BASE_TS + 1_200),
                (0, "k", BASE_TS + 3_700),
                (1, "m", BASE_TS + 100),
                (1, "m", BASE_TS + 900),
            ],
        )
        await wait_for(lambda: a.tasks.records_processed >= 6, 30)
        await asyncio.sleep(1.0)  # a few wall-clock ticks
        await b.start()
        runners.append(asyncio.create_task(b.run()))
        await wait_for(lambda: len(actives(a)) == 1 and len(actives(b)) == 1 and not b.tasks.restoring(), 90)
        result["moved"] = moved = actives(b).pop()
        result["kept"] = actives(a).pop()
        handed_over_ms = int(time.time() * 1000)
        await wait_for(lambda: ("b", moved) in counts.handles, 30)
        await asyncio.sleep(1.5)  # ticks after the hand-over
        for app in (a, b):
            with contextlib.suppress(CommitFailedError):  # exactly-once while rebalancing: stop commits
                await app.commit()
        result["handed_over_ms"] = handed_over_ms
    finally:
        for app in (b, a):
            await app.stop()
        for runner in runners:
            await runner
    result["out"] = await read_committed(bootstrap, out)
    result["ticks"] = await read_committed(bootstrap, ticks)
    return result


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once_v2"])
def test_punctuation_writes_reach_the_topics_and_end_with_a_revoked_task(
    kafka: EmbeddedBroker | ExternalCluster, tmp_path: Any, guarantee: str
) -> None:
    got = asyncio.run(scenario(kafka.bootstrap_servers, str(tmp_path), guarantee))
    # stream-time punctuations: the counts since the last one, stamped with the stream time
    emitted = sorted((r.timestamp - BASE_TS, r.key, r.value) for r in got["out"])
    assert emitted == [
        (0, b"k", b"0_0:1"),
        (100, b"m", b"0_1:1"),
        (1_200, b"j", b"0_0:1"),
        (1_200, b"k", b"0_0:1"),
        (3_700, b"k", b"0_0:1"),
    ]
    # partition 1's second record (0.9 s) is in the store, emitted by no punctuation yet
    ticks = [(r.key.decode(), r.value.decode(), r.timestamp) for r in got["ticks"]]
    moved, kept, handed_over = got["moved"], got["kept"], got["handed_over_ms"]
    counts: Counts = got["counts"]
    # on ``a`` the moved task's schedules were cancelled when it was revoked
    assert all(h.cancelled for h in counts.handles[("a", moved)])
    assert ("b", kept) not in counts.handles
    # every instance ticked its tasks; after the hand-over only ``b`` ticks the moved task
    assert {(task, name) for task, name, _ in ticks} >= {(moved, "a"), (kept, "a"), (moved, "b")}
    late_from_a = [ts for task, name, ts in ticks if task == moved and name == "a" and ts > handed_over]
    assert late_from_a == []
    assert any(task == moved and name == "b" and ts > handed_over for task, name, ts in ticks)
