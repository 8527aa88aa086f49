"""A jittered crash and scale-out of stateful app workers, audited per input offset.

Worker processes run the stateful drill app (``stateful_app``, one standby per task) as one
group while a producer writes a steady stream. At a random moment one worker is killed with
``kill -9`` (possibly while the group is still forming), at another a fresh worker joins, and a
little later the producer stops. The run passes when every input offset the broker
acknowledged was processed (:mod:`streamtasks.drills.offset_audit`). The moments come from a
seeded ``random.Random``: the seed printed with every result replays its timing.

``guarantee="exactly_once_v2"`` runs the workers exactly-once and reads the audit topic (an
output of the app) with ``read_committed``: the run passes only when every acknowledged input
offset appears there exactly once. ``bounce=True`` adds a rolling bounce after the scale-out:
each surviving worker in turn is stopped (SIGTERM, a clean close) and started again on its
state directory, at jittered intervals, while the producer goes on. ``kill_busy=True`` kills
the victim only once it reported processing records (on a loaded machine a worker may take
longer to start than the jittered moment, and killing it before it processed anything tests
nothing). ``kill_uncommitted=True`` (at-least-once) waits instead until the victim has work a
``kill -9`` must replay: a partition it runs as active whose audit topic already shows an input
offset at or past that partition's last commit; with ``commit_interval_ms`` longer than the run
(no interval commit can land between that check and the kill) the run then reports duplicates
by construction, not by where the kill happened to fall.
"""

from __future__ import annotations

import asyncio
import random
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TextIO

from streamtasks.drills.dual_active import DualActive, dual_active
from streamtasks.drills.offset_audit import AuditTopicReader, OffsetAuditReport, reread_audit_topic
from streamtasks.drills.stateful_demo import DrillRun, WorkerProcess
from streamtasks.runtime.admin import create_topics_async
from streamtasks.runtime.security import ClientSettings

__all__ = ["CrashAuditReport", "run_crash_audit", "uncommitted_partitions"]


@dataclass(frozen=True, slots=True, kw_only=True)
class CrashAuditReport:
    seed: int
    kill_after_s: float
    join_after_s: float
    produce_after_s: float
    complete: bool
    offsets: OffsetAuditReport
    guarantee: str = "at_least_once"
    #: How many workers the rolling bounce restarted (0: no bounce).
    bounced: int = 0
    #: Moments two live workers ran one task as active (:mod:`~streamtasks.drills.dual_active`).
    dual_active: tuple[DualActive, ...] = ()

    @property
    def exactly_once(self) -> bool:
        """Every acknowledged input offset appears exactly once in the committed output."""
        return self.complete and self.offsets.lost == 0 and self.offsets.duplicates == 0

    @property
    def ok(self) -> bool:
        """The run kept its guarantee: nothing lost, and under exactly-once nothing twice."""
        if self.guarantee == "exactly_once_v2":
            return self.exactly_once
        return self.complete and self.offsets.lost == 0

    def line(self) -> str:
        bounce = f", rolling bounce of {self.bounced} workers" if self.bounced else ""
        return (
            f"seed {self.seed} ({self.guarantee}): kill -9 at {self.kill_after_s:.1f}s, fresh worker "
            f"{self.join_after_s:.1f}s later{bounce}, producing {self.produce_after_s:.1f}s more; "
            f"{self.offsets.line()}; {len(self.dual_active)} dual-active tasks"
        )


async def run_crash_audit(
    bootstrap: str | ClientSettings,
    out: TextIO,
    *,
    seed: int,
    workers: int = 3,
    partitions: int = 8,
    keys: int = 3_000,
    rate: int = 600,
    drain_timeout_s: float = 90.0,
    guarantee: str = "at_least_once",
    bounce: bool = False,
    kill_busy: bool = False,
    kill_uncommitted: bool = False,
    commit_interval_ms: int | None = None,
    group_protocol: str = "classic",
) -> CrashAuditReport:
    """One jittered run (see the module docstring); the workers join with ``group_protocol``."""
    rng = random.Random(seed)
    kill_after, join_after = rng.uniform(2.0, 9.0), rng.uniform(0.5, 8.0)
    produce_after = rng.uniform(2.0, 8.0)
    run = DrillRun(bootstrap, out, partitions, keys, rate, group_protocol=group_protocol)
    run.worker_args = ["--processing-guarantee", guarantee]
    if commit_interval_ms is not None:
        run.worker_args += ["--commit-interval-ms", str(commit_interval_ms)]
    await create_topics_async(bootstrap, {run.topic: partitions, run.audit_topic: 1})
    reader = AuditTopicReader(bootstrap, run.audit_topic, run.offsets, isolation_level="read_committed")
    bounced = 0
    await reader.start()
    stop_producing = asyncio.Event()
    try:
        with tempfile.TemporaryDirectory(prefix="streamtasks-crash-audit-") as state_root:
            first = [run.worker(f"w{i}", state_root) for i in range(1, workers + 1)]
            for w in first:
                await w.start()
            producer = asyncio.get_running_loop().create_task(run.produce(stop_producing))
            try:
                await asyncio.sleep(kill_after)
                victim = first[rng.randrange(len(first))]
                replay = await _victim_ready(run, victim, busy=kill_busy, uncommitted=kill_uncommitted)
                await victim.kill()
                past = f" (processed past its last commit on partitions {replay})" if replay else ""
                run.say(f"seed {seed}: kill -9 {victim.name}{past}")
                await asyncio.sleep(join_after)
                fresh = run.worker("fresh", state_root)
                await fresh.start()
                run.say(f"seed {seed}: fresh worker joins")
                if bounce:
                    others = [w for w in first if w is not victim]
                    bounced = await _bounce_each(run, [*others, fresh], rng, seed)
                await asyncio.sleep(produce_after)
            finally:
                stop_producing.set()
                await producer
            complete = await reader.wait_complete(drain_timeout_s)
            for w in run.workers.values():
                await w.stop()
        await asyncio.sleep(0.5)
    finally:
        await reader.stop()
    report = CrashAuditReport(
        seed=seed,
        kill_after_s=kill_after,
        join_after_s=join_after,
        produce_after_s=produce_after,
        complete=complete,
        offsets=run.offsets.report(),
        guarantee=guarantee,
        bounced=bounced,
        dual_active=tuple(dual_active(run.lines)),
    )
    run.say(report.line())
    if not report.ok:
        reread = await reread_audit_topic(bootstrap, run.audit_topic)
        for line in explain_loss(run.lines, run.offsets.lost(), reread, reader.skipped):
            run.say(line)
    return report


async def _bounce_each(run: DrillRun, workers: list[WorkerProcess], rng: random.Random, seed: int) -> int:
    """Stop and start each of ``workers`` in turn, 1-4 s apart; the number bounced."""
    for w in workers:
        await asyncio.sleep(rng.uniform(1.0, 4.0))
        await w.stop()
        await w.start()
        run.say(f"seed {seed}: bounced {w.name}")
    return len(workers)


async def _victim_ready(run: DrillRun, victim: WorkerProcess, *, busy: bool, uncommitted: bool) -> list[int]:
    """Wait (up to 60 s) until ``victim`` may be killed: at once; once it processed a record
    (``busy``); or once it processed past a commit (``uncommitted``: those partitions)."""
    replay: list[int] = []
    for _ in range(600):
        if uncommitted:
            replay = uncommitted_partitions(run.lines, victim.name, run.offsets.highest_processed)
            if replay:
                break
        elif not busy or victim.processed > 0:
            break
        await asyncio.sleep(0.1)
    return replay


def uncommitted_partitions(
    lines: list[dict[str, Any]], worker: str, highest_processed: Callable[[int], int | None]
) -> list[int]:
    """The input partitions whose task ``worker`` runs as active (its latest progress line) and
    whose audit topic shows an input offset at or past the partition's latest commit by anyone
    (``OffsetsCommitted`` offsets are the next offset to read; a commit handed to the member
    before a revocation counts too, as it may have been accepted): what a ``kill -9`` of
    ``worker`` now makes its successor process again."""
    tasks: dict[str, str] = {}
    committed: dict[int, int] = {}
    for line in lines:
        if line.get("worker") == worker and line.get("kind") == "progress":
            tasks = line.get("tasks", {})
        elif line.get("event") == "OffsetsCommitted":
            for _topic, p, offset in line["offsets"]:
                committed[p] = max(offset, committed.get(p, offset))
    out = []
    for task, role in sorted(tasks.items()):
        partition = int(task.rsplit("_", 1)[1])
        highest = highest_processed(partition)
        if role == "active" and highest is not None and highest >= committed.get(partition, 0):
            out.append(partition)
    return out


def explain_loss(
    lines: list[dict[str, Any]],
    lost: list[str],
    reread: set[str],
    reader_skips: list[tuple[int, int, int]],
    *,
    around: int = 6,
) -> list[str]:
    """What the workers reported about each partition that lost offsets: whether a second read
    of the audit topic finds them (the reader missed them) or not (nobody processed them), then
    that partition's task events (``ProcessingStarted`` says at which offset each owner began)
    and the commits that named it, oldest first, with who sent them (times in seconds from the
    first line)."""
    found = len(set(lost) & reread)
    out = [f"audit topic read again: {found} of the {len(lost)} missing offsets are there"]
    if reader_skips:
        out.append(f"the audit reader's own reading jumped (partition, expected, read): {reader_skips[:5]}")
    fetch = {
        line["worker"]: line["fetch"]
        for line in lines
        if line.get("kind") == "progress" and line.get("fetch")
    }
    out.extend(
        f"{worker}'s consumer at its last progress line: {counters}"
        for worker, counters in sorted(fetch.items())
    )
    t0 = min((_at(line) for line in lines), default=0)
    firsts: dict[int, int] = {}
    for rid in lost:
        part, offset = (int(x) for x in rid.split(":"))
        firsts[part] = min(offset, firsts.get(part, offset))
    for partition, first in sorted(firsts.items()):
        history = sorted(_partition_history(lines, partition, first))
        past = next((i for i, (_, text) in enumerate(history) if text.endswith(_PAST)), len(history))
        out.append(f"partition {partition}, first lost offset {first}, up to the first commit past it:")
        out.extend(
            f"  {(at - t0) / 1000:7.2f}s {text}"
            for at, text in history[max(0, past - 3 * around) : past + around]
        )
    return out


_PAST = "<- past the first lost offset"
_NOT_FIELDS = frozenset({"worker", "kind", "event", "at_ms", "wall_ms"})


def _partition_history(lines: list[dict[str, Any]], partition: int, first: int) -> list[tuple[int, str]]:
    """Workers' starts and stops, the events of ``partition``'s task and the commits naming it."""
    task = f"0_{partition}"
    history: list[tuple[int, str]] = []
    for line in lines:
        at, who = _at(line), line.get("worker", "?")
        if line.get("kind") in ("started", "restarted", "stopped"):
            history.append((at, f"{who} {line['kind']} {line.get('reason', '')}".rstrip()))
        elif line.get("event") == "OffsetsCommitted":
            for _topic, p, offset in line["offsets"]:
                if p == partition:
                    mark = f" {_PAST}" if offset > first else ""
                    history.append((at, f"{who} commits {p}@{offset} confirmed={line['confirmed']}{mark}"))
        elif line.get("task") == task:
            fields = {k: v for k, v in line.items() if k not in _NOT_FIELDS}
            history.append((at, f"{who} {line['event']} {fields}"))
    return history


def _at(line: dict[str, Any]) -> int:
    """When a worker's line happened (an app event's own time, else when it was printed)."""
    return int(line.get("at_ms", line.get("wall_ms", 0)))
