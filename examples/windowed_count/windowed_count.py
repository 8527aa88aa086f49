"""Clicks per user per minute: a tumbling-window count that emits each window once, when it closes.

    python examples/windowed_count/windowed_count.py                  # embedded broker
    python examples/windowed_count/windowed_count.py --broker tansu   # auto (default) | kafka | tansu
    python examples/windowed_count/windowed_count.py --bootstrap-servers host:9092

One subtopology reads ``user-clicks`` (key: the user, timestamp: when the click happened) and counts
each user's clicks per 1-minute window in the window store ``counts`` (changelogged to
``windowed-count-counts-changelog``, ``cleanup.policy=compact,delete``). A click whose window
closed already (its end plus the 10 s grace is at or below the task's stream time) is late and
dropped, as Kafka Streams' windowed aggregations drop it. A stream-time punctuation every
second of stream time emits every closed window's final count to ``clicks-per-minute`` (key:
the user; value: ``{"count", "window_end", "window_start"}`` as JSON) and deletes it from the
store, so each window is emitted once. The task's stream time survives its move to another
process (it is committed with the input offsets), so a late click arriving first there does not
reopen an emitted window.

The script produces clicks with event timestamps over six minutes (some out of order within
the grace, some too late), runs the app on half of them, stops it, and runs a second instance
on a fresh state directory for the rest: that one restores the open windows from the changelog.
It then checks every emitted count against the same rules computed in Python.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from streamtasks.app import App, ProcessorContext, ProcessorSpec, PunctuationType, Record, RestoreCompleted
from streamtasks.embedded import add_broker_arguments, run_on_broker
from streamtasks.runtime.admin import create_topics_async
from streamtasks.state import INT64, STRING, tumbling_window_start
from topology import TopologyBuilder
from topology.model import Topology

APPLICATION_ID = "windowed-count"
SOURCE = "user-clicks"
OUTPUT = "clicks-per-minute"
STORE = "counts"
WINDOW_MS = 60_000
GRACE_MS = 10_000
#: How often (in stream time) closed windows are looked for and emitted.
EMIT_EVERY_MS = 1_000
PARTITIONS = 2


def topology(application_id: str = APPLICATION_ID) -> Topology:
    builder = TopologyBuilder(application_id)
    # Kafka Streams' default retention of a windowed aggregation: window size + grace.
    stream = builder.stream(SOURCE)
    stream.window_store(STORE, size_ms=WINDOW_MS, retention_ms=WINDOW_MS + GRACE_MS)
    return builder.build()


def closed(window_start: int, stream_time: int) -> bool:
    """A window is closed once stream time reaches its end plus the grace period."""
    return window_start + WINDOW_MS + GRACE_MS <= stream_time


def stream_time(ctx: ProcessorContext, record: Record) -> int:
    """The task's stream time with ``record`` (``ctx.stream_time`` moves past it after
    processing; on the process a task moved to it starts where the old owner's ended)."""
    return max(ctx.stream_time, record.timestamp)


def count(ctx: ProcessorContext, record: Record) -> None:
    now = stream_time(ctx, record)
    if record.key is None:
        return  # a tick: it only moves stream time
    start = tumbling_window_start(record.timestamp, WINDOW_MS)
    if closed(start, now):
        return  # late: its window was emitted already
    counts = ctx.window_store(STORE)
    user = record.key.decode()
    counts.put(user, (counts.get(user, start) or 0) + 1, start)


def emit_closed_windows(ctx: ProcessorContext, stream_time: int) -> None:
    counts = ctx.window_store(STORE)
    done = list(counts.fetch_all(0, stream_time - WINDOW_MS - GRACE_MS))
    for user, start, n in done:
        value = {"count": n, "window_end": start + WINDOW_MS, "window_start": start}
        ctx.send(OUTPUT, key=user.encode(), value=json.dumps(value, sort_keys=True).encode())
        counts.put(user, None, start)


def init(ctx: ProcessorContext) -> None:
    ctx.schedule(EMIT_EVERY_MS, PunctuationType.STREAM_TIME, emit_closed_windows)


PROCESSORS = {0: ProcessorSpec(process=count, init=init)}


def make_app(bootstrap_servers: str, state_dir: str, name: str) -> App:
    return App(
        topology(),
        PROCESSORS,
        stores={STORE: (STRING, INT64)},
        application_id=APPLICATION_ID,
        bootstrap_servers=bootstrap_servers,
        state_dir=state_dir,
        client_id=name,
        session_timeout_ms=6_000,
        heartbeat_interval_ms=500,
        commit_interval_ms=500,
    )


# -- the input and what it must give ------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Click:
    partition: int
    user: str | None  # None: a tick that moves stream time
    timestamp: int


def clicks(base_ms: int, *, n: int = 600, users: int = 6, seed: int = 7) -> list[Click]:
    """``n`` clicks over six minutes from ``base_ms``: mostly in order, some out of order within
    the grace, some late by more; then one tick per partition ten minutes on, closing every window."""
    rng = random.Random(seed)
    out: list[Click] = []
    for i in range(n):
        now = base_ms + i * 360_000 // n
        jitter = rng.choice([0, 0, 0, -rng.randrange(1, 8_000), -rng.randrange(70_000, 120_000)])
        user = rng.randrange(users)
        out.append(
            Click(partition=user % PARTITIONS, user=f"user-{user}", timestamp=max(base_ms, now + jitter))
        )
    out += [Click(partition=p, user=None, timestamp=base_ms + 600_000) for p in range(PARTITIONS)]
    return out


def expected_counts(rows: Iterable[Click]) -> dict[tuple[str, int], int]:
    """The windows' final counts by the same rules, computed per partition in order."""
    stream_time: dict[int, int] = {}
    out: dict[tuple[str, int], int] = {}
    for c in rows:
        now = stream_time[c.partition] = max(stream_time.get(c.partition, -1), c.timestamp)
        start = tumbling_window_start(c.timestamp, WINDOW_MS)
        if c.user is not None and not closed(start, now):
            out[(c.user, start)] = out.get((c.user, start), 0) + 1
    return out


async def produce(bootstrap_servers: str, rows: Iterable[Click]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap_servers, acks="all")
    await producer.start()
    try:
        for c in rows:
            key = None if c.user is None else c.user.encode()
            await producer.send_and_wait(
                SOURCE, key=key, value=b"click", partition=c.partition, timestamp_ms=c.timestamp
            )
    finally:
        await producer.stop()


async def read_output(bootstrap_servers: str, want: int, timeout_s: float) -> list[tuple[str, int, int]]:
    """``(user, window_start, count)`` of every emitted window (waits for ``want`` of them)."""
    consumer = AIOKafkaConsumer(OUTPUT, bootstrap_servers=bootstrap_servers, auto_offset_reset="earliest")
    await consumer.start()
    out: list[tuple[str, int, int]] = []
    try:
        deadline = time.monotonic() + timeout_s
        while len(out) < want and time.monotonic() < deadline:
            for records in (await consumer.getmany(timeout_ms=500)).values():
                for r in records:
                    value = json.loads(r.value or b"{}")
                    out.append(((r.key or b"").decode(), value["window_start"], value["count"]))
        for records in (await consumer.getmany(timeout_ms=1_000)).values():  # anything more is a duplicate
            out += [
                ((r.key or b"").decode(), json.loads(r.value or b"{}")["window_start"], -1) for r in records
            ]
    finally:
        await consumer.stop()
    return out


async def run_until_processed(app: App, total: int, timeout_s: float) -> None:
    """Run ``app`` until it processed ``total`` records (or the timeout), then stop it."""
    await app.start()
    runner = asyncio.create_task(app.run(until=lambda: app.tasks.records_processed >= total))
    try:
        await asyncio.wait_for(asyncio.shield(runner), timeout_s)
    except TimeoutError:
        done = app.tasks.records_processed
        print(f"  {app.config.client_id}: processed {done} of {total} in {timeout_s:.0f} s")
    finally:
        await app.stop()
        if not runner.done():
            runner.cancel()
        await asyncio.gather(runner, return_exceptions=True)


async def main(bootstrap_servers: str, timeout_s: float = 90.0, base_ms: int | None = None) -> int:
    if base_ms is None:
        # Ten minutes ago, on a minute boundary. Not a fixed date: the windowed changelog is
        # deleted by record timestamp (retention.ms = retention + 1 day), and the broker would
        # drop the changelog records of clicks stamped years ago before the restore reads them.
        base_ms = int(time.time() * 1000) // WINDOW_MS * WINDOW_MS - 600_000
    rows = clicks(base_ms)
    expected = expected_counts(rows)
    late = sum(1 for c in rows if c.user is not None) - sum(expected.values())
    await create_topics_async(bootstrap_servers, {SOURCE: PARTITIONS, OUTPUT: PARTITIONS})
    half = len(rows) // 2
    restored: list[int] = []
    with tempfile.TemporaryDirectory() as state_root:
        await produce(bootstrap_servers, rows[:half])
        first = make_app(bootstrap_servers, f"{state_root}/a", "instance-a")
        await run_until_processed(first, half, timeout_s)
        print(f"instance-a processed {first.tasks.records_processed} clicks, stopped")
        await produce(bootstrap_servers, rows[half:])
        second = make_app(bootstrap_servers, f"{state_root}/b", "instance-b")  # empty state: restores
        await run_until_processed(second, len(rows) - half, timeout_s)
        restored = [e.records for e in second.events if isinstance(e, RestoreCompleted)]
        done = second.tasks.records_processed
        print(f"instance-b restored {sum(restored)} changelog records, processed {done}")
    emitted = await read_output(bootstrap_servers, len(expected), timeout_s=30.0)
    got: dict[tuple[str, int], int] = {}
    duplicates = 0
    for user, start, n in emitted:
        if (user, start) in got:
            duplicates += 1
        got[(user, start)] = n
    print(f"produced {len(rows)} records ({late} late clicks), {len(expected)} windows expected")
    for (user, start), n in sorted(got.items())[:6]:
        print(f"  {user}  [{start}, {start + WINDOW_MS})  {n:>3}")
    wrong = sorted(k for k in expected if got.get(k) != expected[k])
    extra = sorted(k for k in got if k not in expected)
    if wrong or extra or duplicates:
        print(f"FAILED: {len(wrong)} wrong, {len(extra)} unexpected, {duplicates} emitted twice")
        print(f"  e.g. {(wrong + extra)[:3]}: expected {[expected.get(k) for k in (wrong + extra)[:3]]}")
        return 1
    print(f"OK: all {len(expected)} windows emitted once with the right count")
    return 0


def cli() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_broker_arguments(parser)
    parser.add_argument("--timeout", type=float, default=90.0)
    args = parser.parse_args()
    return run_on_broker(args, lambda bootstrap_servers: main(bootstrap_servers, args.timeout))


if __name__ == "__main__":
    sys.exit(cli())
