"""The stateful runtime of issue 6, measured on a real broker, in one table.

    .venv/bin/python benchmarks/state.py [--records 100000] [--keys 20000] [--partitions 6]
        [--repeat 1] [--rows 1,2,3,4,5,6,7] [--quix-python PATH] [--bootstrap-servers HOST:PORT]

Uses ``--bootstrap-servers``, else ``$STREAMTASKS_BOOTSTRAP``, else the embedded broker
``$STREAMTASKS_BROKER`` picks (Apache Kafka where Java and Maven are installed, else Tansu).
Each step prints a progress line on stderr; the table goes to stdout. The app is the drills'
count + latest-value app (:mod:`streamtasks.drills.stateful_app`): two changelogged stores, so
two changelog writes per input record. Rows:

1. store writes/s: (a) ``KeyValueStore.put`` alone (rocksdict, no changelog); (b) the same puts
   on the ``counts`` stores of a :class:`~streamtasks.app.tasks.TaskSet`'s active tasks, whose
   changelog records go through ``TaskSet.send_pending`` to an aiokafka producer (``acks=all``,
   ``linger_ms=5``, as the App's) every 500 puts, timed until the producer's final flush;
   (c) the App end to end over ``--records`` pre-produced records, from the first record
   processed to the last (``app.tasks.records_processed`` polled every 5 ms; the group join
   before and the final commit after are not in the rate; the commit is shown apart).
2. restore records/s: the App of (c) stops, its state directory is wiped, and a fresh App on the
   same application id restores every task: the records its ``RestoreCompleted`` events report,
   over the span from the first restore's start to the last restore's end.
3. crash → processing again: two ``stateful_worker`` processes (``--standbys 1``, then
   ``--standbys 0``) process ``--records`` records; one gets SIGKILL; the time from the kill
   until every task it ran has a ``RestoreCompleted`` on the survivor (and until each was
   active there), and the changelog records those restores read next to the records in those
   tasks' changelogs (counted by reading them). Failure detection (the worker's session
   timeout, shown) is part of those times; nothing is subtracted.
4. warm-up caught up → active: then a fresh worker joins; per task, from its first
   ``RebalanceTriggered(trigger="caught_up")`` for the task to the task's
   ``RestoreCompleted`` there (processing), its ``TaskRecycled(to_role="active")`` there, and
   the old owner giving the task up ("—": before the trigger). Kafka Streams waits
   ``probing.rebalance.interval.ms`` (600 s by default) for this; the goal is one heartbeat
   interval plus one rebalance (0.5 s + about 3 s on the embedded broker, docs/testing.md).

5. streamtasks and its peers (:mod:`_peers`): the App cached and uncached, faust-streaming, and
   quixstreams when ``--quix-python`` names a Python with it (its own virtualenv:
   ``python3 -m venv /tmp/quixenv && /tmp/quixenv/bin/pip install 'quixstreams==3.28.*'``), on
   the same workload (count + latest, no audit topic) and broker, in ``--repeat`` interleaved
   rounds; records/s, changelog records written, and the streamtasks rows' ratios to each peer.
7. exactly-once (:mod:`_peers`, not in the default ``--rows``): the App at-least-once and
   ``exactly_once_v2``, and quixstreams at-least-once and ``processing_guarantee="exactly-once"``
   (with ``--quix-python``), cached / by-time commits every 5 s on both sides, in interleaved
   rounds; the ratios of the streamtasks rows to each quixstreams row, and each framework's
   exactly-once rate over its at-least-once rate.

6. memory: RSS growth of a process that writes 1,000,000 keys into one store and reads them back
   (:mod:`_memory`), without the cache, with the default 10 MiB, and with a cache holding them all.

Wall-clock figures from a shared machine are noisy: the load average at start and end is
printed. Nothing asserts on a time. The workers run with the repository root as working
directory (``python -m`` puts it first on ``sys.path``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _paths import project_imports  # benchmarks/assignors.py would shadow the package

with project_imports():
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.structs import TopicPartition as AioTP

    from streamtasks.app import App, AppEvent, RestoreCompleted
    from streamtasks.app.tasks import TaskSet
    from streamtasks.drills.offset_audit import AuditTopicReader, OffsetAudit, OffsetAuditReport
    from streamtasks.drills.stateful_app import count_and_latest, keyed_topology, make_app, record_for
    from streamtasks.drills.stateful_demo import WorkerProcess as _Worker
    from streamtasks.embedded import (
        Cluster,
        EmbeddedBroker,
        ExternalCluster,
        KafkaBroker,
        cluster_from_env,
        kafka_version,
    )
    from streamtasks.protocol.userdata import AssignmentInfo
    from streamtasks.runtime.admin import TopicSpec, create_topics_async
    from streamtasks.state import KeyValueStore, StateDirectory
    from topology.ids import TopicPartition
    from topology.names import changelog_topic

from _peers import PeerResults, Workload, peer_round, peer_rows
from _table import format_table

ROOT = Path(__file__).resolve().parent.parent
SESSION_MS, HEARTBEAT_MS, WORKER_COMMIT_MS, RECOVERY_LAG = 6000, 500, 500, 100  # stateful_worker's
PROBING_S = 600.0  # Kafka Streams' probing.rebalance.interval.ms default
REBALANCE_S = 3.0  # one rebalance on the embedded broker (docs/testing.md)
STORES = ("counts", "latest")
Event = dict[str, Any]
Row = tuple[str, str, str, str]


def step(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


def spread(values: Sequence[float], fmt: str) -> str:
    """The median, with the range when there is more than one value."""
    if not values:
        return "n/a"
    med = fmt.format(statistics.median(values))
    return med if len(values) == 1 else f"{med} (range {fmt.format(min(values))}–{fmt.format(max(values))})"


def secs_list(values: Sequence[float | None]) -> str:
    return ", ".join("—" if v is None else f"{v:.1f}" for v in values) or "none"


def rows_of(label: str, what: str, result: str, *details: str) -> list[Row]:
    """One table row, its further details on continuation rows."""
    return [(label, what, result, details[0])] + [("", "", "", d) for d in details[1:]]


async def wait_for(cond: Callable[[], bool], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.1)
    return True


async def produce(bootstrap: str, topic: str, records: int, keys: int, audit: OffsetAudit) -> None:
    """Produce the input; ``audit`` records each record's acknowledged (partition, offset)."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=20, max_batch_size=256 * 1024)
    await producer.start()
    try:
        for i in range(records):
            key, value = record_for(i, keys)
            await audit.send(producer, topic, key=key, value=value)
        await producer.flush()
    finally:
        await producer.stop()


# -- 1. store writes, the App end to end; 2. restore -------------------------------------------


def raw_puts(root: Path, pairs: Sequence[tuple[bytes, bytes]]) -> float:
    with KeyValueStore(root / f"raw-{uuid.uuid4().hex[:6]}", name="bench") as store:
        start = time.perf_counter()
        for key, value in pairs:
            store.put(key, value)
        return len(pairs) / (time.perf_counter() - start)


async def changelogged_puts(
    bootstrap: str, root: Path, pairs: Sequence[tuple[bytes, bytes]], partitions: int
) -> float:
    app_id = f"bench-state-cl-{uuid.uuid4().hex[:6]}"
    topic = f"{app_id}-input"
    topology = keyed_topology(app_id, topic)
    compact = {"cleanup.policy": "compact"}
    specs = [
        TopicSpec(name=changelog_topic(app_id, s), partitions=partitions, configs=compact) for s in STORES
    ]
    await create_topics_async(bootstrap, [TopicSpec(name=topic, partitions=partitions), *specs])

    async def zero_ends(tps: Any) -> dict[TopicPartition, int]:
        return {tp: 0 for tp in tps}

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    await producer.start()
    with StateDirectory(root, app_id) as directory:
        tasks = TaskSet(
            topology, {0: count_and_latest}, directory=directory, store_serdes={}, emit=lambda e: None
        )
        tasks.set_partition_counts(topology.partition_counts({topic: partitions}))
        owned = [TopicPartition(topic, p) for p in range(partitions)]
        await tasks.reconcile(owned, AssignmentInfo(), zero_ends)
        stores = [t.stores["counts"] for _, t in sorted(tasks.tasks.items())]
        try:
            start = time.perf_counter()
            for i, (key, value) in enumerate(pairs):
                stores[zlib.crc32(key) % partitions].put(key, value)
                if i % 500 == 499:
                    await tasks.send_pending(producer)
            await tasks.send_pending(producer)
            await producer.flush()
            elapsed = time.perf_counter() - start
            tasks.raise_send_failures()
        finally:
            await tasks.close_all(clean=True)
            await producer.stop()
    return len(pairs) / elapsed


async def run_until(app: App, cond: Callable[[], bool], what: str, timeout_s: float = 180) -> None:
    """Run ``app`` until ``cond()``, polled every 5 ms."""
    done = asyncio.Event()
    runner = asyncio.get_running_loop().create_task(app.run(until=done.is_set))
    deadline = time.monotonic() + timeout_s
    try:
        while not cond():
            if runner.done():
                await runner
                raise RuntimeError(f"the app stopped before {what}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"no {what} after {timeout_s:.0f}s")
            await asyncio.sleep(0.005)
    finally:
        done.set()
        await runner


async def audited_topics(bootstrap: str, topic: str, partitions: int) -> tuple[OffsetAudit, AuditTopicReader]:
    """Create ``topic`` and its audit topic; start reading the audit topic back."""
    audit = OffsetAudit()
    await create_topics_async(bootstrap, {topic: partitions, f"{topic}-audit": 1})
    reader = AuditTopicReader(bootstrap, f"{topic}-audit", audit)
    await reader.start()
    return audit, reader


async def audit_result(
    audit: OffsetAudit, reader: AuditTopicReader, problems: list[str]
) -> OffsetAuditReport:
    """Wait until every acknowledged input offset was processed (or 60 s); a loss is a problem."""
    await reader.wait_complete(60)
    await reader.stop()
    report = audit.report()
    if report.lost:
        problems.append(f"per-offset audit: {report.line()}")
    return report


async def app_and_restore(
    bootstrap: str, root: Path, records: int, keys: int, partitions: int, *, problems: list[str]
) -> tuple[float, float, float, int]:
    """(1c) records/s and the final commit's seconds; (2) restore records/s and records restored."""
    app_id = f"bench-state-app-{uuid.uuid4().hex[:6]}"
    topic = f"{app_id}-input"
    audit, reader = await audited_topics(bootstrap, topic, partitions)
    step(f"  producing {records:,} input records over {keys:,} keys ...")
    await produce(bootstrap, topic, records, keys, audit)
    settings = {
        "bootstrap_servers": bootstrap,
        "state_dir": str(root),
        "session_timeout_ms": SESSION_MS,
        "heartbeat_interval_ms": HEARTBEAT_MS,
        "rebalance_timeout_ms": 15_000,
    }
    app = make_app(app_id, topic, settings, audit_topic=f"{topic}-audit")
    marks: list[tuple[int, float]] = []

    def processed_all() -> bool:
        n = app.tasks.records_processed
        if n and (not marks or n >= records):
            marks.append((n, time.perf_counter()))
        return n >= records

    step("  the App joins and processes them ...")
    async with app:
        await run_until(app, processed_all, "records processed")
        commit_start = time.perf_counter()
        await app.commit()
        commit_s = time.perf_counter() - commit_start
    step(f"  per-offset audit: {(await audit_result(audit, reader, problems)).line()}")
    (n0, t0), (_, t1) = marks[0], marks[-1]
    rate = (records - n0) / (t1 - t0) if t1 > t0 else float("nan")
    shutil.rmtree(root / app_id)
    step("  state wiped; a fresh App restores every task ...")
    events: list[AppEvent] = []
    fresh = make_app(app_id, topic, settings, on_event=events.append)

    def restores() -> list[RestoreCompleted]:
        return [e for e in events if isinstance(e, RestoreCompleted)]

    async with fresh:
        await run_until(fresh, lambda: len({e.task for e in restores()}) >= partitions, "restores")
    done = restores()
    total = sum(e.records for e in done)
    span_ms = max(e.at_ms for e in done) - min(e.at_ms - e.duration_ms for e in done)
    shutil.rmtree(root / app_id, ignore_errors=True)
    return rate, commit_s, total * 1000 / span_ms if span_ms > 0 else float("nan"), total


# -- 3. crash, 4. a fresh worker takes over warm-ups -------------------------------------------


@dataclass(slots=True, kw_only=True)
class CrashRun:
    standbys: int
    recovery_s: float | None = None
    active_s: float | None = None
    restored: int = 0
    in_changelogs: int = 0
    victim_tasks: int = 0
    triggers: int = 0
    #: Per task moved to the fresh worker, seconds from its caught_up trigger to: processing
    #: there, active there, given up by the old owner (None: not seen, or before the trigger).
    handoffs: list[tuple[float | None, float | None, float | None]] = field(default_factory=list)
    offsets: OffsetAuditReport | None = None
    problems: list[str] = field(default_factory=list)


def events(lines: list[Event], worker: str | None, since_ms: int, *names: str) -> list[Event]:
    return [
        e
        for e in lines
        if e.get("kind") == "event"
        and (worker is None or e["worker"] == worker)
        and (not names or e["event"] in names)
        and e["at_ms"] >= since_ms
    ]


def first_ms(evs: list[Event], task: str, ok: Callable[[Event], bool]) -> int | None:
    return min((e["at_ms"] for e in evs if e["task"] == task and ok(e)), default=None)


def became_active(e: Event) -> bool:
    return e.get("to_role") == "active" or (e["event"] == "TaskCreated" and e["role"] == "active")


def gave_up(e: Event) -> bool:
    return e.get("from_role") == "active" or (e["event"] == "TaskClosed" and e["role"] == "active")


def after(end_ms: int | None, start_ms: int) -> float | None:
    return None if end_ms is None else (end_ms - start_ms) / 1000


async def changelog_records(bootstrap: str, app_id: str, tasks: Sequence[str]) -> int:
    """Records in the changelogs of ``tasks``, read to the high watermark (the embedded broker's
    ListOffsets answer can be short by a batch, docs/testing.md)."""
    parts = [AioTP(changelog_topic(app_id, s), int(t.split("_")[1])) for t in tasks for s in STORES]
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
    await consumer.start()
    try:
        consumer.assign(parts)
        for p in parts:
            consumer.seek(p, 0)
        count, deadline = 0, time.monotonic() + 60
        while time.monotonic() < deadline:
            batch = await consumer.getmany(timeout_ms=500)
            count += sum(len(v) for v in batch.values())
            positions = [await consumer.position(p) for p in parts]
            marks = [consumer.highwater(p) for p in parts]
            if not batch and all(m is None or pos >= m for pos, m in zip(positions, marks, strict=True)):
                break
        return count
    finally:
        await consumer.stop()


def live_roles(w: _Worker) -> list[str]:
    return list(w.tasks.values()) if w.proc is not None and w.proc.returncode is None else []


async def crash_run(bootstrap: str, standbys: int, records: int, keys: int, partitions: int) -> CrashRun:
    """Rows 3 and 4 for one ``--standbys`` setting (see the module docstring)."""
    out, lines = CrashRun(standbys=standbys), list[Event]()
    app_id = f"bench-state-crash-{uuid.uuid4().hex[:6]}"
    audit, reader = await audited_topics(bootstrap, app_id, partitions)
    with tempfile.TemporaryDirectory(prefix="streamtasks-bench-state-") as state_root:
        argv = (
            f"--bootstrap-servers {bootstrap} --app-id {app_id} --topic {app_id} --standbys {standbys} "
            f"--audit-topic {app_id}-audit"
        )
        w1, w2, w3 = (
            _Worker(name, [*argv.split(), "--state-dir", os.path.join(state_root, name)], lines.append)
            for name in ("w1", "w2", "w3")
        )
        try:
            await crash(
                out, bootstrap, app_id, (w1, w2), lines,
                audit=audit, records=records, keys=keys, partitions=partitions,
            )  # fmt: skip
            await scale_out(out, w3, lines, partitions)
            out.offsets = await audit_result(audit, reader, out.problems)
            step(f"  per-offset audit: {out.offsets.line()}")
        finally:
            for w in (w1, w2, w3):
                await w.stop()
            await reader.stop()
    return out


async def crash(
    out: CrashRun, bootstrap: str, app_id: str, workers: tuple[_Worker, _Worker], lines: list[Event], *,
    audit: OffsetAudit, records: int, keys: int, partitions: int,
) -> None:  # fmt: skip
    w1, w2 = workers
    half, tag = partitions // 2, f"  --standbys {out.standbys}:"

    def settled() -> bool:
        roles = [live_roles(w1), live_roles(w2)]
        return (
            sorted(r.count("active") for r in roles) == [half, partitions - half]
            and not any("warmup" in r for r in roles)
            and sum(r.count("standby") for r in roles) >= partitions * out.standbys
        )

    step(f"{tag} starting w1, w2 ...")
    await w1.start()
    await w2.start()
    if not await wait_for(settled, 90):
        out.problems.append("w1/w2 did not settle before the records were produced")
    step(f"{tag} producing {records:,} records over {keys:,} keys; w1, w2 process them ...")
    await produce(bootstrap, app_id, records, keys, audit)
    if not await wait_for(lambda: w1.processed + w2.processed >= records, 180):
        out.problems.append("not every record was processed before the crash")
    await asyncio.sleep(2.0)  # commits (every 500 ms) and standbys catch up
    victim = sorted(t for t, r in w1.tasks.items() if r == "active")
    out.victim_tasks = len(victim)
    step(f"{tag} kill -9 w1 (active for {', '.join(victim)}) ...")
    kill_ms = wall_ms()
    await w1.kill()

    def restored() -> list[Event]:
        return [e for e in events(lines, "w2", kill_ms, "RestoreCompleted") if e["task"] in victim]

    if await wait_for(lambda: {e["task"] for e in restored()} == set(victim), 120):
        out.recovery_s = after(max(e["at_ms"] for e in restored()), kill_ms)
        out.restored = sum(e["records"] for e in restored())
        active = [first_ms(events(lines, "w2", kill_ms), t, became_active) for t in victim]
        out.active_s = None if None in active else after(max(a or 0 for a in active), kill_ms)
    else:
        out.problems.append("the killed worker's tasks did not all restore on w2 within 120 s")
    out.in_changelogs = await changelog_records(bootstrap, app_id, victim)


async def scale_out(out: CrashRun, w3: _Worker, lines: list[Event], partitions: int) -> None:
    step(f"  --standbys {out.standbys}: a fresh worker w3 joins ...")
    join_ms = wall_ms()
    await w3.start()

    def took_over() -> bool:
        return len({e["task"] for e in events(lines, "w3", join_ms, "RestoreCompleted")}) >= partitions // 2

    if not await wait_for(took_over, 150):
        out.problems.append(f"w3 did not take over {partitions // 2} active tasks within 150 s")
    triggers = [e for e in events(lines, "w3", join_ms, "RebalanceTriggered") if e["trigger"] == "caught_up"]
    out.triggers = len(triggers)
    first: dict[str, int] = {}
    for e in triggers:
        first.setdefault(e["task"], e["at_ms"])
    for task, at in sorted(first.items()):
        mine, theirs = events(lines, "w3", at), [e for e in events(lines, None, at) if e["worker"] != "w3"]
        out.handoffs.append(
            (
                after(first_ms(mine, task, lambda e: e["event"] == "RestoreCompleted"), at),
                after(first_ms(mine, task, became_active), at),
                after(first_ms(theirs, task, gave_up), at),
            )
        )


def crash_rows(runs: Sequence[CrashRun]) -> list[Row]:
    rows: list[Row] = []
    for label, sb in (("3a", 1), ("3b", 0)):
        mine = [r for r in runs if r.standbys == sb]
        if mine:
            rows += rows_of(
                label,
                f"crash → processing again, --standbys {sb}",
                f"{spread([r.recovery_s for r in mine if r.recovery_s is not None], '{:.1f}')} s",
                f"kill → active on the survivor: {secs_list([r.active_s for r in mine])} s; "
                f"session timeout {SESSION_MS} ms",
                "restored "
                + "; ".join(f"{r.restored:,} of {r.in_changelogs:,}" for r in mine)
                + f" records in the changelogs of the killed worker's {mine[0].victim_tasks} tasks",
            )
    goal = HEARTBEAT_MS / 1000 + REBALANCE_S
    for label, sb in (("4a", 1), ("4b", 0)):
        mine = [r for r in runs if r.standbys == sb]
        hands = [h for r in mine for h in r.handoffs]
        if not mine:
            continue
        proc = [h[0] for h in hands if h[0] is not None]
        met = sum(1 for v in proc if v <= goal)
        med = statistics.median(proc) if proc else None
        verdict = "met" if proc and met == len(proc) else "NOT met"
        rows += rows_of(
            label,
            f"caught_up → processing on a fresh worker (--standbys {sb} run)",
            f"{spread(proc, '{:.1f}')} s",
            f"{len(hands)} tasks, {sum(r.triggers for r in mine)} caught_up triggers; to RestoreCompleted "
            f"{secs_list([h[0] for h in hands])} s",
            f"to TaskRecycled(active) {secs_list([h[1] for h in hands])} s; old owner gave it up "
            f"{secs_list([h[2] for h in hands])} s",
            "n/a"
            if med is None
            else f"median / 600 s (probing.rebalance.interval.ms) = {med / PROBING_S:.4f}, "
            f"{PROBING_S / med:.0f}× sooner; heartbeat {HEARTBEAT_MS} ms",
            f"goal ≤ {goal:.1f} s (heartbeat + one ~{REBALANCE_S:.0f} s rebalance): {verdict} "
            f"({met} of {len(proc)} handoffs within it)",
        )
    return rows


# -- main --------------------------------------------------------------------------------------


async def measure(args: argparse.Namespace, bootstrap: str, root: Path) -> tuple[list[Row], list[str]]:
    n, r, wanted = args.records, args.repeat, {s.strip() for s in args.rows.split(",")}
    rows: list[Row] = []
    problems: list[str] = []
    if "1" in wanted:
        pairs = [record_for(i, args.keys) for i in range(n)]
        raw, logged = [], []
        for i in range(r):
            step(f"1a/1b: {n:,} puts, raw then with changelog (run {i + 1}/{r}) ...")
            raw.append(raw_puts(root, pairs))
            logged.append(await changelogged_puts(bootstrap, root, pairs, args.partitions))
        rows += rows_of(
            "1a", "store writes/s, KeyValueStore.put", spread(raw, "{:,.0f}"), "rocksdict, no changelog"
        )
        rows += rows_of(
            "1b",
            "store writes/s, put + changelog",
            spread(logged, "{:,.0f}"),
            f"TaskSet stores of {args.partitions} tasks, send_pending every 500 puts, until flushed",
        )
    if wanted & {"1", "2"}:
        results = []
        for i in range(r):
            step(f"1c/2: the App's throughput, then a restore (run {i + 1}/{r}) ...")
            result = await app_and_restore(bootstrap, root, n, args.keys, args.partitions, problems=problems)
            results.append(result)
        rate, commit, restore, restored = (list(col) for col in zip(*results, strict=True))
        rows += rows_of(
            "1c",
            "App records/s, count + latest",
            spread(rate, "{:,.0f}"),
            f"first → last record processed; 2 store writes + 1 audit record per record, record cache "
            f"at its default (changelog: each key's last value per commit); final commit "
            f"{spread(commit, '{:.2f}')} s",
        )
        rows += rows_of(
            "2",
            "restore records/s, fresh App",
            spread(restore, "{:,.0f}"),
            f"restored {', '.join(f'{int(t):,}' for t in restored)} changelog records ({args.partitions} "
            f"tasks x 2 stores; cached: each key's last value per commit, not all {2 * n:,} updates)",
        )
    if wanted & {"3", "4"}:
        runs = []
        for i in range(r):
            for sb in (1, 0):
                step(f"3/4: two workers, --standbys {sb} (run {i + 1}/{r}) ...")
                runs.append(await crash_run(bootstrap, sb, n, args.keys, args.partitions))
        rows += crash_rows(runs)
        problems += [f"--standbys {c.standbys}: {p}" for c in runs for p in c.problems]
    work = Workload(
        bootstrap=bootstrap, root=root, records=n, keys=args.keys, partitions=args.partitions,
        produce=produce, run_until=run_until,
    )  # fmt: skip
    if "5" in wanted:
        peers = PeerResults()
        for i in range(r):
            step(f"5: streamtasks and its peers, round {i + 1}/{r} ...")
            await peer_round(peers, work, quix_python=args.quix_python, step=step)
        rows += peer_rows(peers, spread)
    if "6" in wanted:
        rows += memory_rows(root)
    if "7" in wanted:
        eos = PeerResults()
        for i in range(r):
            step(f"7: exactly-once against at-least-once and quixstreams, round {i + 1}/{r} ...")
            await peer_round(eos, work, quix_python=args.quix_python, step=step, exactly_once=True)
        rows += peer_rows(eos, spread, label="7") + eos_cost_rows(eos)
    return rows, problems


def eos_cost_rows(results: PeerResults) -> list[Row]:
    """Row 7's last line: what exactly-once costs against at-least-once, per framework."""
    med = {name: statistics.median(rates) for name, rates in results.rates.items()}
    costs = [
        f"{who}: {med[f'{who}, exactly-once'] / med[f'{who}, at-least-once']:.2f}x"
        for who in ("streamtasks App", "quixstreams")
        if med.get(f"{who}, at-least-once") and f"{who}, exactly-once" in med
    ]
    return rows_of("7", "exactly-once / at-least-once records/s", ", ".join(costs) or "—", "")


def memory_rows(root: Path, keys: int = 1_000_000) -> list[Row]:
    """Row 6: RSS per million keys in a store, each setting in a fresh process."""
    rows: list[Row] = []
    for label, budget in (("no cache", 0), ("cache 10 MiB", 10 << 20), ("cache holding all", 1 << 30)):
        step(f"6: RSS of {keys:,} keys in a store, {label} ...")
        where = root / f"memory-{budget}"
        argv = [sys.executable, "-P", str(ROOT / "benchmarks" / "_memory.py"), "--keys", str(keys)]
        argv += ["--cache-bytes", str(budget), "--dir", str(where)]
        out = subprocess.run(
            argv, check=True, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}
        )
        got = json.loads(out.stdout.strip().splitlines()[-1])
        shutil.rmtree(where, ignore_errors=True)
        grown = (got["after"] - got["before"]) / 1e6 * 1_000_000 / keys
        rows += rows_of(
            "6", f"RSS per 1M keys, {label}", f"{grown:,.0f} MB",
            f"{got['entries']:,} entries cached, {got['cache_bytes'] / 1e6:,.1f} MB counted by the budget",
        )  # fmt: skip
    return rows


async def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=100_000, help="input records (and store puts) per run")
    parser.add_argument("--keys", type=int, default=20_000, help="distinct keys")
    parser.add_argument("--partitions", type=int, default=6, help="input partitions (= tasks)")
    parser.add_argument("--repeat", type=int, default=1, help="runs of every measurement (median shown)")
    parser.add_argument(
        "--rows", default="1,2,3,4,5,6", help="rows to measure (1c and 2 run together, so do 3 and 4)"
    )
    parser.add_argument("--quix-python", help="row 5: a Python with quixstreams 3.28 installed")
    parser.add_argument("--bootstrap-servers", help="a cluster (default: $STREAMTASKS_BOOTSTRAP or embedded)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    os.chdir(ROOT)
    load_start = os.getloadavg()[0]
    cluster: Cluster = (
        ExternalCluster(args.bootstrap_servers) if args.bootstrap_servers else cluster_from_env()
    )
    broker = (
        "embedded Tansu"
        if isinstance(cluster, EmbeddedBroker)
        else f"embedded Apache Kafka {kafka_version()}"
        if isinstance(cluster, KafkaBroker)
        else "external"
    )
    step(f"broker: {broker} at {cluster.bootstrap_servers}")
    try:
        with tempfile.TemporaryDirectory(prefix="streamtasks-bench-state-") as tmp:
            rows, problems = await measure(args, cluster.bootstrap_servers, Path(tmp))
    finally:
        cluster.stop()
    print(
        f"benchmarks/state.py --records {args.records} --keys {args.keys} --partitions {args.partitions} "
        f"--repeat {args.repeat} --rows {args.rows}: {broker} broker, {os.cpu_count()} CPUs, load average "
        f"{load_start:.2f} at start, {os.getloadavg()[0]:.2f} at end (a shared machine: figures are noisy)"
    )
    print(
        f"workers (rows 3, 4): session.timeout.ms {SESSION_MS}, heartbeat.interval.ms {HEARTBEAT_MS}, "
        f"commit.interval.ms {WORKER_COMMIT_MS}, acceptable.recovery.lag {RECOVERY_LAG}; App (1c, 2): "
        f"commit.interval.ms 5000; rates are medians over --repeat runs"
    )
    print(format_table(("#", "measurement", "result", "details"), rows))
    for p in problems:
        print(f"problem: {p}")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
