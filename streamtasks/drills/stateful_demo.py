"""The demo's stateful phase: standbys after a crash, warm-ups for a new process.

Runs :mod:`streamtasks.drills.stateful_worker` processes (the per-key count + latest-value app
of :mod:`streamtasks.drills.stateful_app`, ``num_standby_replicas=1``) on a 6-partition topic
while a producer writes a steady stream, then:

1. **crash**: ``kill -9`` one worker mid-stream. Its active tasks are promoted on the worker
   holding their standbys; the report shows how many changelog records the promoted tasks had
   to restore, next to what a restore without a standby would read (their whole changelogs),
   and how long from the kill until every task processed again.
2. **scale out**: a fresh worker (empty state directory) joins. It gets warm-up replicas; each
   warm-up that catches up makes that worker request a rebalance at once (lag trigger), and the
   active task moves to it. The report shows the time from "caught up" to "active there".
3. **verify**: the producer stops, the workers drain and stop cleanly, and the changelogs are
   read back: every key's latest value must equal the last value produced for it (exact), and
   every count must be at least the number produced (the excess, at-least-once duplicates from
   the crash, is reported). Per input offset, too: every (partition, offset) the broker
   acknowledged to the producer must have been processed (:mod:`streamtasks.drills.offset_audit`),
   so a gap cannot hide behind duplicates of the same key.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import tempfile
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TextIO

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import ConsumerRecord

from streamtasks.app.events import wall_ms
from streamtasks.drills._proc import pump_json_lines, spawn_worker
from streamtasks.drills.dual_active import dual_active
from streamtasks.drills.offset_audit import AuditTopicReader, OffsetAudit, OffsetAuditReport
from streamtasks.drills.stateful_app import record_for
from streamtasks.drills.topic_read import end_offsets, read_topic
from streamtasks.runtime.admin import create_topics_async
from streamtasks.runtime.aio import to_aio
from streamtasks.runtime.aiokafka_security import start_aiokafka
from streamtasks.runtime.client_file import child_client_config
from streamtasks.runtime.security import ClientSettings
from topology.ids import TopicPartition
from topology.names import changelog_topic

__all__ = ["DrillRun", "StatefulReport", "WorkerProcess", "print_stateful_report", "run_stateful_phase"]


#: The workers' acceptable.recovery.lag: about 3 s of changelog writes per task at the demo's
#: rate, so a warm-up that keeps up counts as caught up even when the machine is busy.
ACCEPTABLE_RECOVERY_LAG = 1_000


@dataclass(slots=True, kw_only=True)
class StatefulReport:
    produced: int = 0
    crash_restored_records: int = 0
    crash_full_restore_records: int = 0
    crash_recovery_ms: int | None = None
    promoted_tasks: int = 0
    warmups: int = 0
    lag_triggers: int = 0
    handoff_ms: list[int] = field(default_factory=list)
    moved_to_new: int = 0
    kept_tasks: int = 0
    kept_task_restarts: int = 0
    #: Of the tasks moved to the fresh worker, how many the old owner closed or rebuilt (it
    #: stays their standby, so each should be recycled active -> standby).
    moved_tasks_rebuilt: int = 0
    latest_mismatches: int = 0
    missing_counts: int = 0
    duplicate_counts: int = 0
    keys: int = 0
    offsets: OffsetAuditReport | None = None
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return (
            not self.problems
            and self.latest_mismatches == 0
            and self.missing_counts == 0
            and self.offsets is not None
            and self.offsets.lost == 0
        )


class WorkerProcess:
    """One worker process and what it reported."""

    def __init__(self, name: str, argv: list[str], sink: Callable[[dict[str, Any]], None]) -> None:
        self.name, self.argv, self._sink = name, argv, sink
        self.proc: asyncio.subprocess.Process | None = None
        self.tasks: dict[str, str] = {}
        self.processed = 0
        self._reader: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self.proc = await spawn_worker(
            "streamtasks.drills.stateful_worker",
            [*self.argv, "--name", self.name],
            log_name=f"stateful-{self.name}",
            log_level="INFO",
        )
        self._reader = asyncio.get_running_loop().create_task(
            pump_json_lines(self.proc, "stateful-events.jsonl", self._apply)
        )

    def _apply(self, line: dict[str, Any]) -> None:
        if line.get("kind") == "progress":
            self.tasks, self.processed = line["tasks"], line["processed"]
        self._sink(line)

    async def kill(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self._sink({"worker": self.name, "kind": "killed", "at_ms": time.time_ns() // 1_000_000})
            self.proc.send_signal(signal.SIGKILL)
            await self.proc.wait()

    async def stop(self, timeout_s: float = 30.0) -> None:
        if self.proc is None or self.proc.returncode is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(self.proc.wait(), timeout_s)
        except TimeoutError:
            await self.kill()
        if self._reader is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader


class DrillRun:
    """One stateful drill's topic, worker processes, producer and what they reported."""

    def __init__(
        self,
        bootstrap: str | ClientSettings,
        out: TextIO,
        partitions: int,
        keys: int,
        rate: int,
        *,
        group_bootstrap: str | None = None,
        group_protocol: str = "classic",
        name_prefix: str = "",
    ) -> None:
        self.settings, self.out = ClientSettings.of(bootstrap), out
        #: What the app workers bootstrap to (a streamtasks coordinator under KIP-848) and
        #: their group protocol; the producer and the audits use the cluster itself.
        self.group_bootstrap = group_bootstrap or self.settings.bootstrap_servers
        self.group_protocol = group_protocol
        #: The workers' ``--client-config`` (the cluster's security, never in argv itself).
        self.client_args = child_client_config(self.settings) if group_bootstrap is None else []
        self.partitions, self.keys, self.rate = partitions, keys, rate
        run_id = uuid.uuid4().hex[:8]
        self.app_id = f"{name_prefix}stateful-demo-{run_id}"
        self.topic = f"{name_prefix}stateful-demo-{run_id}"
        self.audit_topic = f"{name_prefix}stateful-demo-{run_id}-audit"
        self.offsets = OffsetAudit()
        self.lines: list[dict[str, Any]] = []
        self.workers: dict[str, WorkerProcess] = {}
        self.seq = 0
        self.last_value: dict[str, int] = {}
        self.produced_per_key: dict[str, int] = {}
        self.started = time.monotonic()
        self.last_processed: tuple[int, float] | None = None
        #: More arguments for every worker started from now on (``--processing-guarantee ...``).
        self.worker_args: list[str] = []

    def say(self, text: str) -> None:
        self.out.write(f"[{time.monotonic() - self.started:6.1f}s] {text}\n")
        self.out.flush()

    def worker(self, name: str, state_root: str) -> WorkerProcess:
        argv = [
            "--bootstrap-servers", self.group_bootstrap, "--group-protocol", self.group_protocol,
            "--app-id", self.app_id, "--topic", self.topic,
            "--state-dir", os.path.join(state_root, name), "--standbys", "1",
            "--acceptable-recovery-lag", str(ACCEPTABLE_RECOVERY_LAG), "--audit-topic", self.audit_topic,
            *self.client_args, *self.worker_args,
        ]  # fmt: skip
        w = WorkerProcess(name, argv, self.lines.append)
        self.workers[name] = w
        return w

    def events(
        self, name: str | None = None, event: str | None = None, since_ms: int = 0
    ) -> list[dict[str, Any]]:
        return [
            e
            for e in self.lines
            if e.get("kind") == "event"
            and (name is None or e["worker"] == name)
            and (event is None or e["event"] == event)
            and e.get("at_ms", 0) >= since_ms
        ]

    async def produce(self, stop: asyncio.Event) -> None:
        producer = AIOKafkaProducer(**self.settings.aiokafka_kwargs(), linger_ms=5)
        await start_aiokafka(producer, self.settings, "the drill's producer")
        try:
            while not stop.is_set():
                for _ in range(max(1, self.rate // 20)):
                    key, value = record_for(self.seq, self.keys)
                    await self.offsets.send(producer, self.topic, key=key, value=value)
                    k = key.decode()
                    self.last_value[k] = self.seq
                    self.produced_per_key[k] = self.produced_per_key.get(k, 0) + 1
                    self.seq += 1
                await asyncio.sleep(0.05)
            await producer.flush()
        finally:
            await producer.stop()

    def active_owner(self) -> dict[str, str]:
        owner: dict[str, str] = {}
        for w in self.workers.values():
            if w.proc is not None and w.proc.returncode is None:
                for task, role in w.tasks.items():
                    if role == "active":
                        owner[task] = w.name
        return owner

    async def wait_for(self, what: str, cond: Callable[[], bool], timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if cond():
                return True
            await asyncio.sleep(0.25)
        self.say(f"timed out after {timeout_s:.0f}s waiting for {what}")
        return False

    def settled(self, names: tuple[str, ...]) -> bool:
        """Every task active once, every worker of ``names`` active for some (not only in a
        moment of a hand-over where one holds them all), and as many standbys as tasks."""
        owner = self.active_owner()
        if len(owner) != self.partitions or not all(n in owner.values() for n in names):
            return False
        standbys = {t for n in names for t, r in self.workers[n].tasks.items() if r != "active"}
        return len(standbys) >= self.partitions if len(names) > 1 else True


def _int64(data: bytes) -> int:
    return int.from_bytes(data, "big", signed=True)


async def _read_changelog(
    bootstrap: str | ClientSettings, topic: str, decode: Callable[[bytes], int] = _int64
) -> dict[str, int]:
    """Latest value per key in ``topic`` (``decode``: the value's serde; INT64 by default), read
    to its true end."""
    latest: dict[str, int] = {}

    def keep(r: ConsumerRecord[Any, Any]) -> None:
        if r.key is not None and r.value is not None:
            latest[r.key.decode()] = decode(r.value)

    await read_topic(bootstrap, topic, keep)
    return latest


async def run_stateful_phase(
    bootstrap: str | ClientSettings,
    out: TextIO,
    *,
    partitions: int = 6,
    keys: int = 600,
    rate: int = 400,
    group_bootstrap: str | None = None,
    group_protocol: str = "classic",
    name_prefix: str = "",
) -> StatefulReport:
    """Run the phase on a cluster (see the module docstring) and return its report. The app
    workers bootstrap to ``group_bootstrap`` (default: the cluster) with ``group_protocol``
    (``consumer``: KIP-848 on a streamtasks coordinator, the app's assignor client-side)."""
    run = DrillRun(
        bootstrap, out, partitions, keys, rate,
        group_bootstrap=group_bootstrap, group_protocol=group_protocol, name_prefix=name_prefix,
    )  # fmt: skip
    report = StatefulReport()
    await create_topics_async(bootstrap, {run.topic: partitions, run.audit_topic: 1})
    audit_reader = AuditTopicReader(bootstrap, run.audit_topic, run.offsets)
    await audit_reader.start()
    stop_producing = asyncio.Event()
    with tempfile.TemporaryDirectory(prefix="streamtasks-stateful-") as state_root:
        w1, w2 = run.worker("s1", state_root), run.worker("s2", state_root)
        await w1.start()
        await w2.start()
        producer = asyncio.get_running_loop().create_task(run.produce(stop_producing))
        run.say(
            f"stateful: 2 workers, {partitions} tasks, 1 standby each, producing {rate}/s over {keys} keys"
        )
        if not await run.wait_for(
            "actives and standbys on both workers", lambda: run.settled(("s1", "s2")), 90
        ):
            report.problems.append("group did not settle before the crash")
        await asyncio.sleep(3.0)  # let state build up
        await _crash(run, report, w1, bootstrap)
        w3 = await _scale_out(run, report, w2, state_root, partitions)
        stop_producing.set()
        await producer
        report.produced = run.seq
        if not await audit_reader.wait_complete(60):
            run.say("timed out after 60s waiting for every acknowledged input offset to be processed")
        await run.wait_for("the workers to process everything", lambda: _quiet(run), 60)
        for w in (w2, w3):
            await w.stop()
    await asyncio.sleep(1.0)  # the audit reader reads what the clean stops flushed
    await audit_reader.stop()
    if group_protocol == "streams":  # the broker's assignment: never one task active twice
        report.problems += [
            f"task {d.task} active on {d.workers[0]} and {d.workers[1]} for {d.overlap_ms} ms"
            for d in dual_active(run.lines)
        ]
    return await _verify(bootstrap, run, report)


async def _crash(
    run: DrillRun, report: StatefulReport, victim: WorkerProcess, bootstrap: str | ClientSettings
) -> None:
    """kill -9 ``victim``; the survivor s2 promotes its standbys and restores only their tail."""
    victim_tasks = sorted(t for t, r in victim.tasks.items() if r == "active")
    kill_ms = wall_ms()
    await victim.kill()
    run.say(f"crash: kill -9 {victim.name} (active for tasks {', '.join(victim_tasks)})")
    recovered = await run.wait_for(
        "the crashed worker's tasks to process again",
        lambda: (
            all(run.active_owner().get(t) == "s2" for t in victim_tasks)
            and all(
                any(e["task"] == t for e in run.events("s2", "RestoreCompleted", kill_ms))
                for t in victim_tasks
            )
        ),
        60,
    )
    restores = [e for e in run.events("s2", "RestoreCompleted", kill_ms) if e["task"] in victim_tasks]
    if recovered and restores:
        report.crash_recovery_ms = max(e["at_ms"] for e in restores) - kill_ms
        report.crash_restored_records = sum(e["records"] for e in restores)
        report.promoted_tasks = len(
            [e for e in run.events("s2", "TaskRecycled", kill_ms) if e["to_role"] == "active"]
        )
        report.crash_full_restore_records = await _changelog_size(bootstrap, run.app_id, victim_tasks)
        run.say(
            f"  promoted {report.promoted_tasks} standbys on s2; restored "
            f"{report.crash_restored_records} changelog records (a restore without standby would "
            f"read {report.crash_full_restore_records}); "
            f"processing again {report.crash_recovery_ms / 1000:.1f}s after the kill"
        )
    else:
        report.problems.append("the crashed worker's tasks did not recover")


async def _scale_out(
    run: DrillRun, report: StatefulReport, w2: WorkerProcess, state_root: str, partitions: int
) -> WorkerProcess:
    """A fresh worker s3 joins: warm-ups, caught-up triggers, the hand-offs, what s2 kept."""
    join_ms = wall_ms()
    kept_before = {t for t, r in w2.tasks.items() if r == "active"}
    w3 = run.worker("s3", state_root)
    await w3.start()
    run.say("scale out: fresh worker s3 joins with an empty state directory")
    await run.wait_for(
        "half of the tasks active on s3",
        lambda: (
            sum(r == "active" for r in w3.tasks.values()) >= partitions // 2 and run.settled(("s2", "s3"))
        ),
        120,
    )
    report.warmups = len([e for e in run.events("s3", "TaskCreated", join_ms) if e["role"] == "warmup"])
    triggers = [e for e in run.events("s3", "RebalanceTriggered", join_ms) if e["trigger"] == "caught_up"]
    report.lag_triggers = len(triggers)
    for trig in triggers:
        promoted = [
            e for e in run.events("s3", "RestoreCompleted", trig["at_ms"]) if e["task"] == trig["task"]
        ]
        if promoted:
            report.handoff_ms.append(promoted[0]["at_ms"] - trig["at_ms"])
    report.moved_to_new = sum(1 for r in w3.tasks.values() if r == "active")
    # Cooperative: a task s2 runs before and after the scale-out is never closed or rebuilt
    # meanwhile (one whose move was planned and then undone is recycled, not rebuilt).
    kept = kept_before & {t for t, r in w2.tasks.items() if r == "active"}
    report.kept_tasks = len(kept)
    report.kept_task_restarts = len(
        [
            e
            for e in run.events("s2", None, join_ms)
            if e["event"] in ("TaskClosed", "TaskCreated") and e["task"] in kept
        ]
    )
    moved = {t for t, r in w3.tasks.items() if r == "active"}
    report.moved_tasks_rebuilt = len(
        {
            e["task"]
            for e in run.events("s2", None, join_ms)
            if e["event"] in ("TaskClosed", "TaskCreated") and e["task"] in moved
        }
    )
    handoffs = ", ".join(f"{ms / 1000:.1f}s" for ms in report.handoff_ms) or "none"
    run.say(
        f"  s3 got {report.warmups} warm-ups; {report.lag_triggers} caught-up triggers; "
        f"{report.moved_to_new} actives moved to s3 ({report.moved_tasks_rebuilt} closed or rebuilt "
        f"on s2 rather than recycled); caught-up → active: {handoffs}; "
        f"{report.kept_tasks} tasks stayed on s2 ({report.kept_task_restarts} closed or rebuilt)"
    )
    return w3


async def _verify(bootstrap: str | ClientSettings, run: DrillRun, report: StatefulReport) -> StatefulReport:
    """The verdict: the per-offset audit, and the changelogs' latest values and counts against
    what was produced."""
    report.offsets = run.offsets.report()
    latest = await _read_changelog(bootstrap, changelog_topic(run.app_id, "latest"))
    counts = await _read_changelog(bootstrap, changelog_topic(run.app_id, "counts"))
    report.keys = len(run.last_value)
    report.latest_mismatches = sum(1 for k, v in run.last_value.items() if latest.get(k) != v)
    report.missing_counts = sum(1 for k, n in run.produced_per_key.items() if counts.get(k, 0) < n)
    report.duplicate_counts = sum(max(0, counts.get(k, 0) - n) for k, n in run.produced_per_key.items())
    run.say(
        f"verify: {report.produced} records over {report.keys} keys; latest value wrong for "
        f"{report.latest_mismatches} keys; counts short for {report.missing_counts} keys; "
        f"{report.duplicate_counts} duplicate counts (at-least-once replay after the crash)"
    )
    run.say(f"verify per offset: {report.offsets.line()}")
    return report


def _quiet(run: DrillRun) -> bool:
    """True once no live worker processed anything new for two seconds (polled)."""
    now = sum(w.processed for w in run.workers.values() if w.proc is not None and w.proc.returncode is None)
    if run.last_processed is None or run.last_processed[0] != now:
        run.last_processed = (now, time.monotonic())
        return False
    return time.monotonic() - run.last_processed[1] > 2.0


async def _changelog_size(bootstrap: str | ClientSettings, app_id: str, tasks: list[str]) -> int:
    """Records in the changelog partitions of ``tasks``: what a restore from scratch reads."""
    parts = [
        TopicPartition(changelog_topic(app_id, store), int(t.split("_")[1]))
        for t in tasks
        for store in ("counts", "latest")
    ]
    ends = await end_offsets(bootstrap, parts)
    settings = ClientSettings.of(bootstrap)
    consumer = AIOKafkaConsumer(**settings.aiokafka_kwargs(), group_id=None)
    await start_aiokafka(consumer, settings, "the changelog probe")
    try:
        starts = await consumer.beginning_offsets([to_aio(tp) for tp in parts])
    finally:
        await consumer.stop()
    return sum(ends[tp] - starts[to_aio(tp)] for tp in parts)


def print_stateful_report(report: StatefulReport, out: TextIO, *, title: str = "") -> int:
    """The stateful phase's summary; returns the exit status (1 on a wrong or missing count)."""
    recovery = "-" if report.crash_recovery_ms is None else f"{report.crash_recovery_ms / 1000:.1f} s"
    handoffs = ", ".join(f"{ms / 1000:.1f} s" for ms in report.handoff_ms) or "-"
    rows = (
        ("standbys promoted after kill -9", str(report.promoted_tasks)),
        ("changelog records restored", f"{report.crash_restored_records:,}"),
        ("  a restore without standby would read", f"{report.crash_full_restore_records:,}"),
        ("kill -9 → tasks processing again", recovery),
        ("warm-ups on the fresh worker", str(report.warmups)),
        ("caught-up triggers (enforce_rebalance)", str(report.lag_triggers)),
        ("caught up → active", handoffs),
        ("actives moved to the fresh worker", str(report.moved_to_new)),
        ("  closed or rebuilt on the old owner", f"{report.moved_tasks_rebuilt} of {report.moved_to_new}"),
        ("kept tasks rebuilt during scale-out", f"{report.kept_task_restarts} of {report.kept_tasks}"),
        ("keys with a wrong latest value", str(report.latest_mismatches)),
        ("keys counted short (lost)", str(report.missing_counts)),
        ("duplicate counts (at-least-once)", f"{report.duplicate_counts:,} of {report.produced:,} records"),
        ("input offsets acknowledged", "-" if report.offsets is None else f"{report.offsets.acknowledged:,}"),
        ("  never processed (lost)", "-" if report.offsets is None else f"{report.offsets.lost:,}"),
        ("  processed twice or more", "-" if report.offsets is None else f"{report.offsets.duplicates:,}"),
    )
    width = max(len(name) for name, _ in rows)
    out.write(
        f"\nstreamtasks demo — stateful tasks (num_standby_replicas=1){', ' + title if title else ''}\n\n"
    )
    for name, value in rows:
        out.write(f"{name:<{width}}  {value}\n")
    if report.offsets is not None and report.offsets.lost_runs:
        out.write(f"lost input offsets (partition:[offsets]): {', '.join(report.offsets.lost_runs)}\n")
    for problem in report.problems:
        out.write(f"problem: {problem}\n")
    out.write("result: OK\n" if report.ok else "result: FAILED\n")
    out.flush()
    return 0 if report.ok else 1


def print_stateful_comparison(reports: Mapping[str, StatefulReport], out: TextIO) -> None:
    """The figures that differ between group protocols, one column per run of the phase."""

    def seconds(ms: int | None) -> str:
        return "-" if ms is None else f"{ms / 1000:.1f} s"

    rows: tuple[tuple[str, Callable[[StatefulReport], str]], ...] = (
        ("kill -9 → tasks processing again", lambda r: seconds(r.crash_recovery_ms)),
        ("changelog records restored after kill -9", lambda r: f"{r.crash_restored_records:,}"),
        ("caught-up triggers", lambda r: str(r.lag_triggers)),
        ("caught up → active", lambda r: ", ".join(seconds(ms) for ms in r.handoff_ms) or "-"),
        ("actives moved to the fresh worker", lambda r: str(r.moved_to_new)),
        ("  closed or rebuilt on the old owner", lambda r: f"{r.moved_tasks_rebuilt} of {r.moved_to_new}"),
        ("input offsets lost", lambda r: "-" if r.offsets is None else f"{r.offsets.lost:,}"),
        ("result", lambda r: "OK" if r.ok else "FAILED"),
    )
    heads = ("", *reports)
    table = [(name, *(cell(r) for r in reports.values())) for name, cell in rows]
    widths = [max(len(h), *(len(row[i]) for row in table)) for i, h in enumerate(heads)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    out.write("\nstreamtasks demo — stateful tasks, classic beside KIP-848\n\n")
    out.write(fmt.format(*heads).rstrip() + "\n" + fmt.format(*("-" * w for w in widths)) + "\n")
    for row in table:
        out.write(fmt.format(*row).rstrip() + "\n")
    out.flush()
