"""Running one rolling-upgrade drill live (:mod:`streamtasks.drills.catalog` says which).

The script: create the input topic (and, for app drills, the audit topic), start ``workers``
worker processes on stage 0, produce ``rate`` records/s through an
:class:`~streamtasks.drills.offset_audit.OffsetAudit` (every input offset the broker
acknowledged), wait until the group has settled, then for each later stage stop and restart
every worker in turn on that stage's release, waiting after each restart until every partition
has exactly one owner again. Then the producer stops, the workers drain and stop cleanly, and
the audits give the verdict:

* **ownership** (:class:`~streamtasks.drills.ledger.OwnershipAudit`, fed from every worker's
  reports: a consumer worker's rebalance callbacks, an app worker's task events, where a
  partition is owned while its active task exists): no partition may have two owners;
* **records** (per input offset, from what the broker acknowledged): consumer workers report
  each record's (partition, offset) as they consume it; app workers write it to the audit topic
  (:func:`streamtasks.drills.stateful_app.audited`). None may be missing; duplicates are counted.
  A missing record is charged to the member whose offset commit first passed it (workers report
  their commits): one a peer library (faust) committed past is that library's loss, reported
  apart; any other, including one no commit passed, is streamtasks' and fails the drill;
* **state** (app drills): the changelogs read back: every key's latest value must be the last
  value produced for it, and no count may be short.

The result carries what a report needs (:mod:`streamtasks.drills.drill_report`): per-phase
figures, ownership intervals per partition, throughput samples and rebalance markers.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable
from typing import Any

from aiokafka import AIOKafkaProducer

from streamtasks.drills._proc import line_time_ms, pump_json_lines, spawn_worker
from streamtasks.drills.catalog import DrillSpec, Stage
from streamtasks.drills.coordinator_proc import SECURED_COORDINATOR_REFUSED, CoordinatorProcess
from streamtasks.drills.drill_result import DrillOptions, DrillResult, PhaseResult
from streamtasks.drills.ledger import CommitMark, OwnershipAudit, first_commits_past, offset_runs
from streamtasks.drills.offset_audit import AuditTopicReader, OffsetAudit
from streamtasks.drills.peer_worker import CLIENTS as PEER_CLIENTS
from streamtasks.drills.stateful_app import record_for
from streamtasks.drills.stateful_demo import _read_changelog
from streamtasks.errors import ConfigError
from streamtasks.runtime.admin import create_topics_async
from streamtasks.runtime.aiokafka_security import start_aiokafka
from streamtasks.runtime.client_file import child_client_config
from streamtasks.runtime.security import ClientSettings
from topology.ids import TopicPartition
from topology.names import changelog_topic

__all__ = ["DrillOptions", "DrillResult", "PhaseResult", "run_live_drill"]


#: The peer worker's name (DrillOptions.peer).
PEER_NAME = "p1"


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class _Worker:
    """One worker process and the lines it printed."""

    def __init__(self, name: str, module: str, argv: list[str], sink: Callable[[str, dict[str, Any]], None]):
        self.name, self.module, self.argv, self._sink = name, module, argv, sink
        self.proc: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self.proc = await spawn_worker(
            self.module, [*self.argv, "--name", self.name], log_name=f"drill-{self.name}-{_now_ms()}"
        )
        self._reader = asyncio.get_running_loop().create_task(
            pump_json_lines(self.proc, "drill-events.jsonl", lambda line: self._sink(self.name, line))
        )

    async def stop(self, timeout_s: float = 90.0) -> bool:
        """SIGTERM, then SIGKILL after ``timeout_s``; returns whether it had to be killed (a
        killed worker may lose what it had not flushed: the drill reports it)."""
        killed = False
        if self.proc is not None and self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.proc.wait(), timeout_s)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()
                killed = True
        if self._reader is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
        return killed


class _Run:
    def __init__(
        self,
        spec: DrillSpec,
        options: DrillOptions,
        bootstrap: str | ClientSettings,
        say: Callable[[str], None],
    ):
        if not spec.available:
            raise ConfigError(f"drill {spec.name!r} is not available: {spec.unavailable}")
        if options.workers < 2 or options.partitions < 1 or options.rate < 1:
            raise ConfigError("a drill needs --workers >= 2, --partitions >= 1 and --rate >= 1")
        if options.peer is not None:
            if options.peer not in PEER_CLIENTS:
                raise ConfigError(f"--peer must be one of {', '.join(PEER_CLIENTS)}, not {options.peer!r}")
            if spec.worker != "consumer" or not all(stage.peer_args for stage in spec.stages):
                raise ConfigError(f"drill {spec.name!r} takes no peer (consumer drills with peer stages do)")
        #: The cluster (its address and security settings): the producer, audits and workers'.
        self.settings = ClientSettings.of(bootstrap)
        if options.coordinator and self.settings.security_protocol != "PLAINTEXT":
            raise ConfigError(SECURED_COORDINATOR_REFUSED)
        self.spec, self.o, self.say = spec, options, say
        self.bootstrap = self.settings.bootstrap_servers
        #: What the workers bootstrap to: the cluster, or the coordinator once started.
        self.group_bootstrap = self.bootstrap
        #: The workers' ``--client-config`` (a 0600 file: the secrets never go in argv).
        self.client_args = child_client_config(self.settings)
        run = uuid.uuid4().hex[:8]
        self.topic = f"drill-{spec.name}-{run}"
        self.group = f"drill-{spec.name}-{run}"
        self.audit_topic = f"{self.topic}-audit"
        self.t0 = _now_ms()
        self.partitions = [TopicPartition(self.topic, p) for p in range(options.partitions)]
        self.ledger = OwnershipAudit(self.partitions, self.t0)
        self.audit = OffsetAudit()
        self.owned: dict[str, set[TopicPartition]] = {}
        #: When each worker took each partition it holds (two while the ledger sees an overlap).
        self.open: dict[tuple[TopicPartition, str], int] = {}
        #: Wall-clock ms minus monotonic ms: the workers stamp their lines with the latter.
        self.mono_offset = _now_ms() - time.monotonic_ns() // 1_000_000
        self.generations: dict[int, int] = {}
        #: Every offset commit of the input topic the workers reported.
        self.commits: list[CommitMark] = []
        #: App workers: the userdata version each subscribes with, as last reported.
        self.userdata_version: dict[str, int] = {}
        self.restores = 0
        self.last_value: dict[str, int] = {}
        self.produced_per_key: dict[str, int] = {}
        self.result = DrillResult(
            drill=spec.name, broker=self.bootstrap, workers=options.workers, partitions=options.partitions,
            rate=options.rate, peer_client=options.peer,
        )  # fmt: skip
        self.workers: dict[str, _Worker] = {}
        #: The ``streamtasks coordinator`` in front of the cluster (DrillOptions.coordinator).
        self.coordinator: CoordinatorProcess | None = None

    @property
    def audited_by_topic(self) -> bool:
        """App and faust workers report processed offsets through the audit topic."""
        return any((stage.worker or self.spec.worker) != "consumer" for stage in self.spec.stages)

    @property
    def faust_table(self) -> bool:
        return any(stage.worker == "faust" for stage in self.spec.stages)

    def seconds(self, at_ms: int) -> float:
        return round((at_ms - self.t0) / 1000, 3)

    # -- what the workers report --------------------------------------------------------------

    def _take(self, worker: str, tps: list[TopicPartition], at: int) -> None:
        self.ledger.assigned(worker, tps, at)
        for tp in tps:
            self.owned.setdefault(worker, set()).add(tp)
            self.open.setdefault((tp, worker), at)

    def _give(self, worker: str, tps: list[TopicPartition], at: int, lost: bool = False) -> None:
        (self.ledger.lost if lost else self.ledger.revoked)(worker, tps, at)
        for tp in tps:
            self.owned.setdefault(worker, set()).discard(tp)
            since = self.open.pop((tp, worker), None)
            if since is not None:
                self.result.ownership.append((tp.partition, worker, self.seconds(since), self.seconds(at)))

    def on_line(self, worker: str, line: dict[str, Any]) -> None:
        at = line_time_ms(line, _now_ms(), self.mono_offset)  # a loaded harness reads lines late
        kind = line.get("kind")
        generation = line.get("generation")
        if isinstance(generation, int) and generation > 0 and generation not in self.generations:
            self.generations[generation] = at
            self.result.markers.append((self.seconds(at), f"generation {generation}"))
        if kind in ("assigned", "revoked", "lost"):
            tps = [TopicPartition(t, int(p)) for t, p in line.get("partitions", [])]
            if kind == "assigned":
                self._take(worker, tps, at)
            else:
                self._give(worker, tps, at, lost=kind == "lost")
        elif kind == "taken_back":  # streamtasks.drills.worker: a lapsed assignment taken back
            back = (self.seconds(at), worker, generation if isinstance(generation, int) else -1,
                    len(line.get("partitions", [])))  # fmt: skip
            self.result.taken_back.append(back)
            self.say(f"  {worker} took its lapsed assignment back at {back[0]:.1f}s"
                     f" (generation/epoch {back[2]}, {back[3]} partitions, no rebalance)")  # fmt: skip
        elif kind == "committed":  # a faust worker's commit (streamtasks.drills.faust_worker)
            by = str(line.get("by", "faust"))
            self._commits(worker, by, line.get("offsets", []), line.get("wall_ms", at))
        elif kind == "progress" and isinstance(line.get("userdata_version"), int):
            self.userdata_version[worker] = line["userdata_version"]
        elif kind == "consumed":
            for rid in line.get("ids", []):
                self.audit.processed(rid)
        elif kind == "event":
            self._app_event(worker, line, at)

    def _commits(self, worker: str, by: str, rows: list[list[Any]], at: int) -> None:
        for topic, part, off in rows:
            offset = int(off)
            if topic == self.topic:
                mark = CommitMark(at_ms=int(at), worker=worker, by=by, partition=int(part), offset=offset)
                self.commits.append(mark)

    def _app_event(self, worker: str, line: dict[str, Any], at: int) -> None:
        event, task = line.get("event"), str(line.get("task", ""))
        if event == "OffsetsCommitted":
            self._commits(worker, "streamtasks", line.get("offsets", []), line.get("at_ms", at))
            return
        if event == "SubscriptionVersionChanged" and isinstance(line.get("to_version"), int):
            self.userdata_version[worker] = line["to_version"]
            return
        if "_" not in task:
            return
        tp = [TopicPartition(self.topic, int(task.split("_")[1]))]
        if (event == "TaskCreated" and line.get("role") == "active") or (
            event == "TaskRecycled" and line.get("to_role") == "active"
        ):
            self._take(worker, tp, at)
        elif (event == "TaskClosed" and line.get("role") == "active") or (
            event == "TaskRecycled" and line.get("from_role") == "active"
        ):
            self._give(worker, tp, at)
        elif event == "RestoreCompleted":
            self.restores += 1

    async def stop_worker(self, name: str) -> None:
        if await self.workers[name].stop():
            self.result.problems.append(f"{name} did not stop within 90 s after SIGTERM and was killed")
        self.gone(name)

    def gone(self, worker: str) -> None:
        self._give(worker, sorted(self.owned.get(worker, set())), _now_ms())
        self.ledger.member_gone(worker, _now_ms())

    # -- the script ---------------------------------------------------------------------------

    def _argv(self, stage: Stage, state_root: str, name: str) -> tuple[str, list[str]]:
        kind = stage.worker or self.spec.worker
        if name == PEER_NAME and self.o.peer is not None:
            base = ["--client", self.o.peer, "--bootstrap-servers", self.group_bootstrap,
                    "--group", self.group, "--topic", self.topic, *self.client_args]  # fmt: skip
            return "streamtasks.drills.peer_worker", [*base, *stage.peer_args]
        if kind == "faust":
            base = [
                "--bootstrap-servers", self.group_bootstrap, "--app-id", self.group, "--topic", self.topic,
                "--audit-topic", self.audit_topic, "--state-dir", state_root,
                "--partitions", str(self.o.partitions), *self.client_args,
            ]  # fmt: skip
            return "streamtasks.drills.faust_worker", [*base, *stage.args]
        if kind == "consumer":
            base = ["--bootstrap-servers", self.group_bootstrap, "--group", self.group, "--topic", self.topic,
                    "--report-offsets", *self.client_args]  # fmt: skip
            return "streamtasks.drills.worker", [*base, *stage.args]
        base = [
            "--bootstrap-servers", self.group_bootstrap, "--app-id", self.group, "--topic", self.topic,
            "--state-dir", os.path.join(state_root, name), "--standbys", "1",
            "--acceptable-recovery-lag", "1000", "--audit-topic", self.audit_topic, *self.client_args,
        ]  # fmt: skip
        return "streamtasks.drills.stateful_worker", [*base, *stage.args]

    def settled(self, names: list[str]) -> bool:
        """Every partition has a live owner and, when there are enough partitions, every worker
        owns some (so no member is still joining when the next one is bounced)."""
        owners = self.ledger.owners()
        live = set(names)
        if not all(o is not None and o in live for o in owners.values()):
            return False
        return len(owners) < len(names) or all(self.owned.get(n) for n in names)

    async def wait_settled(self, names: list[str], what: str) -> None:
        deadline = time.monotonic() + self.o.settle_timeout_s
        while not self.settled(names):
            exited = [
                n for n in names if (p := self.workers[n].proc) is not None and p.returncode is not None
            ]
            if exited:
                codes = ", ".join(f"{n} ({self.workers[n].proc.returncode})" for n in exited)  # type: ignore[union-attr]
                self.result.problems.append(f"worker process exited: {codes}, while waiting for: {what}")
                self.say(f"  worker process exited: {codes}")
                return
            if time.monotonic() > deadline:
                self.result.problems.append(f"group did not settle: {what}")
                self.say(f"  timed out waiting for: {what}")
                return
            await asyncio.sleep(0.2)

    async def phase(self, name: str, body: Callable[[], Any]) -> None:
        self.say(f"phase: {name}")
        self.result.markers.append((self.seconds(_now_ms()), name))
        start = _now_ms()
        before = self.ledger.report(start)
        gens, restores = len(self.generations), self.restores
        await body()
        end = _now_ms()
        after = self.ledger.report(end)
        self.result.phases.append(
            PhaseResult(
                name=name,
                seconds=round((end - start) / 1000, 1),
                rebalances=len(self.generations) - gens,
                revoked=after.revocations - before.revocations,
                longest_unowned_ms=self.ledger.longest_unowned_between(start, end),
                # a late release may withdraw an earlier phase's violation: never below 0
                double_owned=max(0, len(after.violations) - len(before.violations)),
                restores=self.restores - restores,
            )
        )

    async def produce(self, stop: asyncio.Event) -> None:
        producer = AIOKafkaProducer(**self.settings.aiokafka_kwargs(), linger_ms=5, acks="all")
        await start_aiokafka(producer, self.settings, "the drill's producer")
        seq = 0
        try:
            while not stop.is_set():
                for _ in range(max(1, self.o.rate // 20)):
                    if not await self.send_one(producer, seq):
                        break
                    seq += 1
                await asyncio.sleep(0.05)
            await producer.flush()
        finally:
            await producer.stop()

    async def send_one(self, producer: AIOKafkaProducer, seq: int) -> bool:
        """Send record ``seq`` (through the audit); whether it was sent."""
        key, value = record_for(seq, self.o.keys)
        await self.audit.send(producer, self.topic, key=key, value=value)
        self.last_value[key.decode()] = seq
        self.produced_per_key[key.decode()] = self.produced_per_key.get(key.decode(), 0) + 1
        return True

    def _unprocessed_ours(self) -> bool:
        """Whether an acknowledged record is still unprocessed and not lost by a peer (nobody
        will process those: its worker committed past them)."""
        passed = first_commits_past(self.audit.lost(), self.commits)
        return any(c is None or c.by == "streamtasks" for c in passed.values())

    async def sample(self) -> None:
        while True:
            report = self.audit.report(max_runs=0)
            self.result.samples.append((self.seconds(_now_ms()), report.acknowledged, report.processed))
            await asyncio.sleep(0.5)

    async def run(self) -> DrillResult:
        o = self.o
        topics = {self.topic: o.partitions}
        if self.audited_by_topic:
            topics[self.audit_topic] = 1
        await create_topics_async(self.settings, topics)
        reader = (
            AuditTopicReader(self.settings, self.audit_topic, self.audit) if self.audited_by_topic else None
        )
        if reader is not None:
            await reader.start()
        coordinator = self.coordinator = CoordinatorProcess(self.bootstrap) if o.coordinator else None
        if coordinator is not None:
            self.group_bootstrap = self.result.coordinator = await coordinator.start()
            self.say(f"streamtasks coordinator on {self.group_bootstrap} in front of {self.bootstrap}")
        names = [f"w{i + 1}" for i in range(o.workers)] + ([PEER_NAME] if o.peer is not None else [])
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        producing = loop.create_task(self.produce(stop))
        sampling = loop.create_task(self.sample())
        with tempfile.TemporaryDirectory(prefix="streamtasks-drill-") as state_root:
            try:
                await self._script(names, state_root)
                stop.set()
                await producing
                self.say("producer stopped; draining")
                deadline = time.monotonic() + o.drain_timeout_s
                while self._unprocessed_ours() and time.monotonic() < deadline:
                    await asyncio.sleep(0.25)
                await asyncio.sleep(1.0)
            finally:
                stop.set()
                with contextlib.suppress(Exception):
                    await producing
                for name in list(self.workers):
                    await self.stop_worker(name)
                if coordinator is not None:
                    await coordinator.stop()
                if reader is not None:
                    await asyncio.sleep(1.0)
                    await reader.stop()
                sampling.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await sampling
        await self._verdict()
        return self.result

    async def _script(self, names: list[str], state_root: str) -> None:
        first = self.spec.stages[0]

        async def start_all() -> None:
            for n in names:
                module, argv = self._argv(first, state_root, n)
                self.workers[n] = _Worker(n, module, argv, self.on_line)
                await self.workers[n].start()
            await self.wait_settled(names, "every worker started")

        await self.phase(f"start {len(names)} workers: {first.label}", start_all)
        for index, stage in enumerate(self.spec.bounces, start=1):

            async def bounce(stage: Stage = stage) -> None:
                for n in names:
                    await self.stop_worker(n)
                    module, argv = self._argv(stage, state_root, n)
                    self.workers[n] = _Worker(n, module, argv, self.on_line)
                    await self.workers[n].start()
                    peer = f" ({self.o.peer}: {' '.join(stage.peer_args)})" if n == PEER_NAME else ""
                    self.say(f"  {n} now runs {stage.label}{peer}")
                    await self.wait_settled(names, f"{n} back on {stage.label}")

            await self.phase(f"bounce {index}: {stage.label}", bounce)

    async def _verdict(self) -> None:
        r, end = self.result, _now_ms()
        for (tp, worker), since in sorted(self.open.items()):
            r.ownership.append((tp.partition, worker, self.seconds(since), None))
        final = self.ledger.report(end)
        r.double_owned = len(final.violations)
        r.violations = [
            f"{v.partition} given to {v.claimant} at {self.seconds(v.at_ms)}s while {v.holder} held it"
            for v in final.violations
        ]
        r.violation_marks = [(v.partition.partition, self.seconds(v.at_ms)) for v in final.violations]
        offsets = self.audit.report()
        r.acknowledged, r.duplicates = offsets.acknowledged, offsets.duplicates
        passed = first_commits_past(self.audit.lost(), self.commits)
        ours = [rid for rid, c in passed.items() if c is None or c.by == "streamtasks"]
        peers = {rid: c for rid, c in passed.items() if c is not None and c.by != "streamtasks"}
        r.lost, r.lost_runs = len(ours), offset_runs(ours)[:8]
        r.peer_lost, r.peer_lost_runs = len(peers), offset_runs(peers)[:8]
        r.peer_commits = sorted({c.describe(self.t0) for c in peers.values()})[:8]
        r.rebalances = len(self.generations)
        problem = version_problem(
            self.spec.final_userdata_version, {w: self.userdata_version.get(w) for w in sorted(self.workers)}
        )
        if problem is not None:
            r.problems.append(problem)
        r.revoked = final.revocations
        r.restores = self.restores
        r.longest_unowned_ms = _longest_gaps(r.ownership, self.o.partitions)
        if self.faust_table:  # faust's table: counts only, the value as JSON
            counts = await _read_changelog(
                self.settings, changelog_topic(self.group, "counts"), decode=_json_int
            )
            r.state_checked = True
            # A record a peer lost is missing from its key's count too (unless a duplicate hid it).
            skipped = Counter((self.audit.key_of(rid) or b"").decode() for rid in peers)
            r.state_counts_short = sum(
                1 for k, n in self.produced_per_key.items() if counts.get(k, 0) < n - skipped[k]
            )
        elif self.spec.worker == "app":
            latest = await _read_changelog(self.settings, changelog_topic(self.group, "latest"))
            counts = await _read_changelog(self.settings, changelog_topic(self.group, "counts"))
            r.state_checked = r.latest_checked = True
            r.state_wrong_latest = sum(1 for k, v in self.last_value.items() if latest.get(k) != v)
            r.state_counts_short = sum(1 for k, n in self.produced_per_key.items() if counts.get(k, 0) < n)


def version_problem(want: int | None, ended: dict[str, int | None]) -> str | None:
    """The drill's problem when a worker ends on another userdata version than ``want`` (the
    last version each reported; None: it reported none), or None."""
    if want is None:
        return None
    off = {w: v for w, v in ended.items() if v != want}
    return f"workers not on userdata v{want} at the end: {off}" if off else None


def _json_int(data: bytes) -> int:
    value = json.loads(data)
    return value if isinstance(value, int) else -1


def _longest_gaps(ownership: list[tuple[int, str, float, float | None]], partitions: int) -> dict[int, int]:
    """Per partition, the longest time between one owner's end and the next owner's start
    (from its first owner on)."""
    out: dict[int, int] = {}
    for p in range(partitions):
        spans = sorted((s, e) for q, _, s, e in ownership if q == p)
        longest, covered = 0.0, None
        for start, end in spans:
            if covered is not None and start > covered:
                longest = max(longest, start - covered)
            end_s = float("inf") if end is None else end
            covered = end_s if covered is None else max(covered, end_s)
        out[p] = round(longest * 1000)
    return out


async def run_live_drill(
    spec: DrillSpec, options: DrillOptions, bootstrap: str | ClientSettings, say: Callable[[str], None]
) -> DrillResult:
    """Run ``spec`` against the cluster at ``bootstrap`` (an address, or client settings with
    its TLS/SASL; see the module docstring)."""
    return await _Run(spec, options, bootstrap, say).run()
