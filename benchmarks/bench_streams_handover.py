"""How long a moved task does not process when a second member joins a streams group whose
stores hold 1,000,000 keys: streamtasks coordinator's warm-up hand-over against Apache Kafka
4.4's own streams group (which moves the task cold: the new owner restores it first).

    .venv/bin/python benchmarks/bench_streams_handover.py [--keys 1000000] [--partitions 4]
        [--rate 200] [--only coordinator|kafka]

Per run, against the embedded Apache Kafka 4.4.0: the stateful drill app
(``streamtasks.drills.stateful_app``: stores ``counts`` and ``latest``, changelogged, the
per-offset audit on) with ``group_protocol="streams"``; its two changelogs are filled first
with ``--keys`` keys each (written straight to the changelog topics, spread by key as the
input is), so worker ``a`` restores them all and then runs every task, processing ``--rate``
input records a second over the same keys. Then worker ``b`` (its own process and state
directory) joins. Until every task is active once and ``b`` runs half of them:

* (a) ``coordinator``: the workers bootstrap to ``streamtasks coordinator`` (assignor
  ``high_availability``, task offsets every second): ``b`` warms the tasks up while ``a`` still
  processes them, and takes them when its reported lag is within the acceptable recovery lag;
* (b) ``kafka``: the workers bootstrap to the broker (its ``sticky`` streams assignor): ``a``
  gives the tasks up and ``b`` restores them before processing.

Per moved task, the time it did not process: the longest gap between consecutive processing
times of its input records (the audit records' timestamps: the audit topic is created with
LogAppendTime, so each is when the broker appended it, just after the record was processed; a
sink's own timestamp would be the input record's) from ``b``'s start on, which spans the old
owner's last processed record to the new owner's first. Also: changelog records ``b`` restored
before processing a moved task (``RestoreCompleted``; under (a) the warm-up restored the rest
beforehand), and the time from ``b``'s start until it processed all of its tasks. Not part of
``make test``.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import itertools
import statistics
import struct
import sys
import tempfile
import time
from typing import Any

from _paths import project_imports
from _table import format_table

with project_imports():
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    from streamtasks.drills.stateful_demo import DrillRun
    from streamtasks.embedded import cluster_from_env
    from streamtasks.runtime.admin import TopicSpec, create_topics_async
    from tests.server.support import FAST, ServerProcess
    from topology.names import changelog_topic

#: The coordinator's streams settings: lags reported every second, no standbys (as Kafka's
#: default), a warm-up that is within 2,000 changelog records of the end is caught up.
COORDINATOR = (
    *FAST,
    "--streams-assignor",
    "high_availability",
    "--streams-task-offset-interval-ms",
    "1000",
    "--streams-acceptable-recovery-lag",
    "2000",
)


def note(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


async def fill_changelogs(bootstrap: str, app_id: str, keys: int) -> float:
    """Every key once in each store's changelog (``counts``: 1, ``latest``: the key's number)."""
    start = time.monotonic()
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=50, max_batch_size=1 << 20, acks=1)
    await producer.start()
    try:
        for store in ("counts", "latest"):
            topic = changelog_topic(app_id, store)
            pending: list[asyncio.Future[Any]] = []
            for k in range(keys):
                value = struct.pack(">q", 1 if store == "counts" else k)
                pending.append(await producer.send(topic, key=f"k{k}".encode(), value=value))
                if len(pending) >= 20_000:
                    await asyncio.gather(*pending)
                    pending.clear()
            await asyncio.gather(*pending)
    finally:
        await producer.stop()
    return time.monotonic() - start


async def read_audit(bootstrap: str, topic: str, until_ms: int) -> dict[int, list[int]]:
    """Per input partition, the processing times (ms) of its audit records."""
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=None,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    await consumer.start()
    times: dict[int, list[int]] = {}
    try:
        while True:
            batch = await consumer.getmany(timeout_ms=2_000, max_records=50_000)
            if not batch:
                break
            last = 0
            for records in batch.values():
                for r in records:
                    times.setdefault(int(r.key.decode()), []).append(r.timestamp)
                    last = max(last, r.timestamp)
            if last >= until_ms:
                break
    finally:
        await consumer.stop()
    return times


def _roles(run: DrillRun, name: str, role: str) -> set[str]:
    return {t for t, r in run.workers[name].tasks.items() if r == role}


async def scenario(kind: str, bootstrap: str, args: argparse.Namespace) -> list[str]:
    server = ServerProcess(bootstrap, extra=COORDINATOR).start() if kind == "coordinator" else None
    out = io.StringIO()
    run = DrillRun(
        bootstrap,
        out,
        args.partitions,
        args.keys,
        args.rate,
        group_bootstrap=server.address if server is not None else None,
        group_protocol="streams",
        name_prefix=f"ho-{kind}-",
    )
    run.worker_args = ["--standbys", "0"]  # the App sets no standby count on Kafka's group either
    stop = asyncio.Event()
    try:
        # The audit records carry the input record's timestamp (as a sink does); the broker's
        # append time is when each input record was processed (give or take the linger).
        topics = [
            TopicSpec(name=run.topic, partitions=args.partitions),
            TopicSpec(
                name=run.audit_topic, partitions=1, configs={"message.timestamp.type": "LogAppendTime"}
            ),
            *(
                TopicSpec(name=changelog_topic(run.app_id, s), partitions=args.partitions)
                for s in ("counts", "latest")
            ),
        ]
        await create_topics_async(bootstrap, topics)
        filled = await fill_changelogs(bootstrap, run.app_id, args.keys)
        note(f"{kind}: {args.keys:,} keys written to each of the two changelogs in {filled:.1f} s")
        with tempfile.TemporaryDirectory(prefix="bench-handover-") as state_root:
            a = run.worker("a", state_root)
            await a.start()
            producer = asyncio.get_running_loop().create_task(run.produce(stop))
            all_tasks = {f"0_{p}" for p in range(args.partitions)}

            def a_runs_all() -> bool:
                restored = {e["task"] for e in run.events("a", "RestoreCompleted")}
                return _roles(run, "a", "active") == all_tasks and restored >= all_tasks

            if not await run.wait_for("a restored and running every task", a_runs_all, 900):
                raise RuntimeError(out.getvalue())
            await asyncio.sleep(5)  # a processes steadily
            note(f"{kind}: a runs every task, restored {_restored(run, 'a'):,} records; b joins")
            b_start_ms = time.time_ns() // 1_000_000
            started = time.monotonic()
            b = run.worker("b", state_root)
            await b.start()
            half = args.partitions // 2

            def moved() -> bool:
                mine = _roles(run, "b", "active")
                running = {e["task"] for e in run.events("b", "RestoreCompleted")}
                return (
                    len(mine) >= half
                    and mine <= running
                    and _roles(run, "a", "active") | mine == all_tasks
                    and not (_roles(run, "b", "warmup") | _roles(run, "b", "standby"))
                )

            if not await run.wait_for("b runs half the tasks", moved, args.timeout_s):
                raise RuntimeError(
                    f"{out.getvalue()}a: {run.workers['a'].tasks}, b: {run.workers['b'].tasks}"
                )
            took = time.monotonic() - started
            moved_tasks = sorted(_roles(run, "b", "active"))
            await asyncio.sleep(5)  # b processes them for a while
            stop.set()
            await producer
            end_ms = time.time_ns() // 1_000_000
            await b.stop()
            await a.stop()
    finally:
        stop.set()
        if server is not None:
            server.stop()
    times = await read_audit(bootstrap, run.audit_topic, end_ms - 6_000)
    gaps = []
    for task in moved_tasks:
        ts = sorted(t for t in times.get(int(task.split("_")[1]), []) if t >= b_start_ms - 1_000)
        gaps.append(max((y - x for x, y in itertools.pairwise(ts)), default=0))
    restored = sum(e["records"] for e in run.events("b", "RestoreCompleted") if e.get("task") in moved_tasks)
    note(f"{kind}: moved {moved_tasks}, gaps {gaps} ms, b restored {restored:,} records, {took:.1f} s")
    label = (
        "streamtasks coordinator (warm-up hand-over)"
        if kind == "coordinator"
        else "Kafka 4.4 streams group (cold)"
    )
    return [
        label,
        str(len(moved_tasks)),
        f"{statistics.median(gaps):,.0f}",
        f"{max(gaps):,}",
        f"{restored:,}",
        f"{took:.1f}",
    ]


def _restored(run: DrillRun, name: str) -> int:
    return sum(e["records"] for e in run.events(name, "RestoreCompleted"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--rate", type=int, default=200, help="input records a second")
    parser.add_argument("--timeout-s", type=float, default=600.0, help="for b to run its tasks")
    parser.add_argument("--only", choices=("coordinator", "kafka"))
    args = parser.parse_args()
    cluster = cluster_from_env()
    rows = []
    try:
        for kind in ("coordinator", "kafka"):
            if args.only in (None, kind):
                rows.append(asyncio.run(scenario(kind, cluster.bootstrap_servers, args)))
    finally:
        cluster.stop()
    print(f"{args.keys:,} keys in each of two stores, {args.partitions} tasks, {args.rate} records/s")
    heads = [
        "group",
        "moved tasks",
        "p50 ms unprocessed",
        "max ms unprocessed",
        "b restored",
        "b all tasks s",
    ]
    print(format_table(heads, rows))


if __name__ == "__main__":
    main()
