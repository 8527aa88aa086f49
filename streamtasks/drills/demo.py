"""``streamtasks demo``: a live rolling-upgrade drill on a real broker.

Starts an embedded broker (``--broker``: Apache Kafka or Tansu) or uses ``--bootstrap-servers``,
creates a 12-partition topic, runs three worker *processes* (``streamtasks.drills.worker``) in one
group, produces a steady stream, then bounces every worker in turn as a dynamic member, moves
them to static membership, and bounces them again as static members. Every callback and consumed
record's (partition, offset) comes back to this process, which keeps an
:class:`~streamtasks.drills.OwnershipAudit` and an :class:`~streamtasks.drills.offset_audit.OffsetAudit`
(every offset the broker acknowledged to the producer must be consumed) and prints a report per
phase. Exit status 1 if any partition was owned twice or any acknowledged offset was not consumed.

``--protocol`` picks the group protocol (:data:`PROTOCOLS`): classic ``eager`` or
``cooperative``; ``consumer`` (KIP-848 on the cluster's own coordinator, its ``uniform``
assignor; refused where the cluster does not serve ConsumerGroupHeartbeat, as Tansu does not);
``consumer-client`` (KIP-848 on a ``streamtasks coordinator`` child process in front of the
cluster, the members assigning client-side through PrepareAssignment / InstallAssignment).

``--client-config FILE`` (or ``$STREAMTASKS_CLIENT_CONFIG``) gives ``--bootstrap-servers``' TLS
and SASL settings (:attr:`DemoOptions.client`); ``--secure`` starts the secured embedded Apache
Kafka instead (:mod:`streamtasks.embedded.secure_broker`) and runs every phase over its
SASL_SSL listener with SCRAM-SHA-512 as its user ``app`` (topics and groups named
``secure-...``, the names its ACLs allow). Either way the demo's producer, audits, topic creation
and every worker connect with those settings; the workers read them from a 0600 file
(``--client-config``), never from argv.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import signal
import sys
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TextIO

from aiokafka import AIOKafkaProducer

from streamtasks.drills._proc import pump_json_lines, spawn_worker
from streamtasks.drills.coordinator_proc import CoordinatorProcess
from streamtasks.drills.demo_cluster import api_keys, prepare_cluster, require_kip848, require_streams_groups
from streamtasks.drills.demo_options import DemoOptions
from streamtasks.drills.ledger import OwnershipAudit
from streamtasks.drills.offset_audit import OffsetAudit
from streamtasks.errors import ConfigError
from streamtasks.runtime.admin import create_topics_async
from streamtasks.runtime.aiokafka_security import start_aiokafka
from streamtasks.runtime.client_file import child_client_config
from streamtasks.runtime.member_loop import monotonic_ms
from streamtasks.runtime.security import ClientSettings
from topology.ids import TopicPartition

__all__ = ["PROTOCOLS", "DemoOptions", "PhaseReport", "run_demo"]

#: ``--protocol`` → the partition workers' group settings (streamtasks.drills.worker).
PROTOCOLS: dict[str, tuple[str, ...]] = {
    "cooperative": ("--assignor", "cooperative_sticky"),
    "eager": ("--assignor", "sticky"),
    # KIP-848 on the cluster's coordinator, its server-side assignor.
    "consumer": ("--group-protocol", "consumer", "--remote-assignor", "uniform"),
    # KIP-848 on streamtasks coordinator: the members assign (Prepare -> assignor -> Install).
    "consumer-client": ("--group-protocol", "consumer", "--assignor", "cooperative_sticky"),
    # KIP-1071 streams groups: App workers only (the stateful phase); no partition workers.
    "streams": (),
}
#: What the report's title says of each protocol.
PROTOCOL_TITLES = {
    "cooperative": "cooperative rebalancing (classic protocol, cooperative_sticky)",
    "eager": "eager rebalancing (classic protocol, sticky)",
    "consumer": "KIP-848 consumer protocol on the cluster's coordinator (server-side uniform)",
    "consumer-client": "KIP-848 consumer protocol on streamtasks coordinator (client-side "
    "cooperative_sticky)",
    "streams": "KIP-1071 streams group on the cluster's coordinator (the broker's task assignor)",
}


#: Why the static-membership phases do not run on Tansu (docs/testing.md has the evidence).
TANSU_STATIC_SKIP = (
    "static-membership phases skipped on the embedded Tansu broker: it can complete a join round "
    "from a static member's stale subscription and hand a partition out twice even with the "
    "demo's nudges (docs/testing.md, 'Where the embedded broker differs'); run them on Apache "
    "Kafka (--broker kafka)"
)


@dataclass(slots=True, kw_only=True)
class PhaseReport:
    name: str
    seconds: float = 0.0
    rebalances: int = 0
    revoked: int = 0
    longest_unowned_ms: int = 0
    consumed_during_rebalance: int = 0
    violations: int = 0
    nudges: int = 0


@dataclass(slots=True)
class _State:
    ledger: OwnershipAudit
    audit: OffsetAudit = field(default_factory=OffsetAudit)
    owned: dict[str, set[TopicPartition]] = field(default_factory=dict)
    generations: set[int] = field(default_factory=set)
    rebalancing: bool = False
    consumed_in_rebalance: int = 0
    restarts: int = 0
    #: worker -> time of its last nudge that took effect (``enforce_rebalance`` returned True)
    nudge_taken: dict[str, int] = field(default_factory=dict)


class _Worker:
    def __init__(self, name: str, instance_id: str | None, state: _State, argv: list[str]) -> None:
        self.name, self.instance_id, self.state, self.argv = name, instance_id, state, argv
        self.proc: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None

    async def start(self) -> None:
        argv = [*self.argv, "--name", self.name]
        if self.instance_id:
            argv += ["--instance-id", self.instance_id]
        self.proc = await spawn_worker(
            "streamtasks.drills.worker", argv, log_name=f"{self.name}-{monotonic_ms()}"
        )
        self._reader = asyncio.get_running_loop().create_task(
            pump_json_lines(self.proc, "events.jsonl", self._apply)
        )

    def _apply(self, ev: dict[str, Any]) -> None:
        st, kind, t = self.state, ev.get("kind"), int(ev.get("t", monotonic_ms()))
        tps = [TopicPartition(p[0], int(p[1])) for p in ev.get("partitions", [])]
        if kind == "assigned":
            st.ledger.assigned(self.name, tps, t)
            st.owned.setdefault(self.name, set()).update(tps)
            st.generations.add(int(ev.get("generation", -1)))
        elif kind in ("revoked", "lost"):
            (st.ledger.revoked if kind == "revoked" else st.ledger.lost)(self.name, tps, t)
            st.owned.setdefault(self.name, set()).difference_update(tps)
        elif kind == "restarted":
            st.restarts += 1
        elif kind == "nudged" and ev.get("took"):
            st.nudge_taken[self.name] = t
        elif kind == "consumed":
            for rid in ev["ids"]:
                st.audit.processed(rid)
            if st.rebalancing:
                st.consumed_in_rebalance += len(ev["ids"])

    def nudge(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.send_signal(signal.SIGUSR1)

    async def stop(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.terminate()
            try:
                await asyncio.wait_for(self.proc.wait(), 30)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()
        if self._reader is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
        self.state.ledger.member_gone(self.name, monotonic_ms())
        self.state.owned.pop(self.name, None)


class Demo:
    def __init__(self, options: DemoOptions, out: TextIO) -> None:
        self.o = options
        self.out = out
        self.t0 = monotonic_ms()
        self.reports: list[PhaseReport] = []
        self.workers: dict[str, _Worker] = {}
        self.nudges = 0

    def say(self, text: str) -> None:
        self.out.write(f"[{(monotonic_ms() - self.t0) / 1000:6.1f}s] {text}\n")
        self.out.flush()

    def _stable(self, members: set[str]) -> Callable[[], bool]:
        def check() -> bool:
            owned = [tp for m in members for tp in self.state.owned.get(m, set())]
            return len(owned) == self.o.partitions == len(set(owned)) and all(
                self.state.owned.get(m) for m in members
            )

        return check

    async def _settle(self, members: set[str], what: str, static: bool = False) -> None:
        self.state.rebalancing = True
        nudging = bool(self.o.tansu_workarounds)
        deadline = monotonic_ms() + int(self.o.settle_timeout_s * 1000)
        nudge_every_ms = int((self.o.nudge_after_s if static else self.o.dynamic_nudge_after_s) * 1000)
        next_nudge = monotonic_ms() + nudge_every_ms
        last = ""
        while not self._stable(members)():
            if monotonic_ms() > deadline:
                raise TimeoutError(f"group did not settle: {what}")
            if nudging and monotonic_ms() > next_nudge:
                self.say(f"  still waiting: nudging the group (enforce_rebalance): {what}")
                self._nudge(self.workers.values())
                next_nudge = monotonic_ms() + nudge_every_ms
            owned = sum(len(self.state.owned.get(m, ())) for m in members)
            line = f"  waiting: {what} ({owned}/{self.o.partitions} partitions owned)"
            if line != last:
                self.say(line)
                last = line
            await asyncio.sleep(0.2)
        self.state.rebalancing = False

    def _nudge(self, workers: Iterable[_Worker]) -> None:
        for w in workers:
            w.nudge()
        self.nudges += 1

    async def _refresh(self, members: set[str]) -> None:
        """Nudge ``members`` until each has confirmed that its rejoin took effect, so the broker
        holds every running member's current subscription (DemoOptions.refresh_before_static_restart).
        A member in the middle of a rebalance does not take a nudge; it is nudged again."""
        start = monotonic_ms()
        deadline = start + int(self.o.refresh_timeout_s * 1000)
        self.say(f"  nudging {', '.join(sorted(members))} so the broker has their current subscriptions")
        self._nudge(self.workers[m] for m in sorted(members))
        while True:
            pending = sorted(m for m in members if self.state.nudge_taken.get(m, -1) < start)
            if not pending:
                return
            if monotonic_ms() > deadline:
                self.say(f"  no confirmed rejoin from {', '.join(pending)}; going on")
                return
            await asyncio.sleep(0.5)
            for m in pending:  # not taken yet (mid-rebalance, or the signal is still on its way)
                self.workers[m].nudge()

    async def _phase(self, name: str, body: Callable[[], Any]) -> None:
        self.say(f"phase: {name}")
        before = self.state.ledger.report(monotonic_ms())
        gens = len(self.state.generations)
        nudges = self.nudges
        consumed = self.state.consumed_in_rebalance
        start = monotonic_ms()
        await body()
        end = monotonic_ms()
        after = self.state.ledger.report(end)
        self.reports.append(
            PhaseReport(
                name=name,
                seconds=(end - start) / 1000,
                rebalances=len(self.state.generations) - gens,
                revoked=after.revocations - before.revocations,
                longest_unowned_ms=self.state.ledger.longest_unowned_between(start, end),
                consumed_during_rebalance=self.state.consumed_in_rebalance - consumed,
                violations=len(after.violations) - len(before.violations),
                nudges=self.nudges - nudges,
            )
        )

    async def run(self, settings: ClientSettings, group_bootstrap: str | None = None) -> int:
        """The bounce phases on the cluster of ``settings``; the workers bootstrap to
        ``group_bootstrap`` (default: the cluster; ``--protocol consumer-client``: the
        streamtasks coordinator before it)."""
        prefix = self.o.name_prefix
        topic = f"{prefix}demo-{uuid.uuid4().hex[:8]}"
        group = f"{prefix}demo-{self.o.protocol}-{uuid.uuid4().hex[:6]}"
        await create_topics_async(settings, {topic: self.o.partitions})
        self.say(
            f"broker {settings.bootstrap_servers} ({settings.security_protocol}), topic {topic} "
            f"({self.o.partitions} partitions), group {group}"
        )
        log_dir = os.environ.get("STREAMTASKS_DEMO_LOGS")
        if log_dir:  # maps the report's times (monotonic) to the logs' wall clock
            os.makedirs(log_dir, exist_ok=True)
            with open(os.path.join(log_dir, "events.jsonl"), "a") as events:
                events.write(json.dumps({"kind": "demo", "t": self.t0, "wall": time.time()}) + "\n")
        partitions = [TopicPartition(topic, p) for p in range(self.o.partitions)]
        self.state = _State(ledger=OwnershipAudit(partitions, monotonic_ms()))
        argv = [
            "--bootstrap-servers", group_bootstrap or settings.bootstrap_servers, "--group", group,
            "--topic", topic, "--report-offsets", *PROTOCOLS[self.o.protocol],
            *(child_client_config(settings) if group_bootstrap is None else []),
        ]  # fmt: skip
        if self.o.tansu_workarounds:
            argv.append("--no-lose-on-missed-generation")
        names = [f"worker-{i + 1}" for i in range(self.o.workers)]
        producer = AIOKafkaProducer(**settings.aiokafka_kwargs(), linger_ms=5)
        await start_aiokafka(producer, settings, "the demo's producer")
        produce = asyncio.get_running_loop().create_task(self._produce(producer, topic))
        workers = self.workers
        try:

            async def start_all() -> None:
                for n in names:
                    workers[n] = _Worker(n, None, self.state, argv)
                    await workers[n].start()
                    self.say(f"  started {n}")
                await self._settle(set(names), "all workers share the partitions")

            async def bounce(static: bool) -> None:
                for n in names:
                    replaced = workers[n].instance_id is not None  # its replacement takes its place
                    await workers[n].stop()
                    self.say(f"  stopped {n}")
                    if replaced and self.o.refresh_before_static_restart and self.o.tansu_workarounds:
                        await self._refresh(set(names) - {n})
                    if not static:
                        await self._settle(set(names) - {n}, f"the group without {n}")
                    workers[n] = _Worker(n, n if static else None, self.state, argv)
                    await workers[n].start()
                    self.say(f"  restarted {n}{' (static)' if static else ''}")
                    await self._settle(set(names), f"{n} back", static=static)
                    if static and self.o.static_pause_s:
                        await asyncio.sleep(self.o.static_pause_s)

            await self._phase("start 3 workers", start_all)
            await self._phase("rolling bounce, dynamic members", lambda: bounce(False))
            if self.o.tansu_workarounds:
                self.say(TANSU_STATIC_SKIP)
            elif "bounce" in self.o.phases:  # "dynamic": the dynamic members' bounce only
                await self._phase("move to static members", lambda: bounce(True))
                await self._phase("rolling bounce, static members", lambda: bounce(True))
            produce.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await produce
            await producer.flush()
            self.say("producer stopped; waiting for the workers to consume the rest")
            deadline = monotonic_ms() + 60_000
            while not self.state.audit.complete() and monotonic_ms() < deadline:
                await asyncio.sleep(0.2)
        finally:
            produce.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await produce
            await producer.stop()
            for w in workers.values():
                await w.stop()
        return self._print_report()

    async def _produce(self, producer: AIOKafkaProducer, topic: str) -> None:
        ids = itertools.count()
        per_tick = max(1, self.o.rate // 20)
        while True:
            for _ in range(per_tick):
                n = next(ids)
                rid = f"{n}".encode()
                await self.state.audit.send(
                    producer, topic, key=rid, value=rid, partition=n % self.o.partitions
                )
            await asyncio.sleep(0.05)

    def _print_report(self) -> int:
        audit = self.state.audit.report()
        final = self.state.ledger.report(monotonic_ms())
        heads = (
            "phase",
            "seconds",
            "rebalances",
            "revoked",
            "max unowned ms",
            "consumed in rebalance",
            "double-owned",
            "nudges",
        )
        rows = [
            (r.name, f"{r.seconds:.1f}", str(r.rebalances), str(r.revoked), str(r.longest_unowned_ms),
             str(r.consumed_during_rebalance), str(r.violations), str(r.nudges))
            for r in self.reports
        ]  # fmt: skip
        widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(heads)]
        fmt = "  ".join(f"{{:<{w}}}" for w in widths)
        self.out.write("\n" + f"streamtasks demo — {PROTOCOL_TITLES[self.o.protocol]}\n\n")
        self.out.write(fmt.format(*heads) + "\n" + fmt.format(*("-" * w for w in widths)) + "\n")
        for row in rows:
            self.out.write(fmt.format(*row) + "\n")
        self.out.write(
            f"\nrecords (per offset the broker acknowledged): produced {audit.acknowledged}, "
            f"consumed {audit.processed}, duplicates {audit.duplicates}, lost {audit.lost}\n"
        )
        if audit.lost_runs:
            self.out.write(f"lost offsets (partition:[offsets]): {', '.join(audit.lost_runs)}\n")
        if self.state.restarts:
            self.out.write(f"workers restarted after a fatal group error: {self.state.restarts}\n")
        self.out.write(f"double ownership: {len(final.violations)}\n")
        for v in final.violations:
            when = (v.at_ms - self.t0) / 1000
            self.out.write(f"  {v.partition} given to {v.claimant} at {when:.1f}s while {v.holder} held it\n")
        ok = audit.lost == 0 and not final.violations
        self.out.write("result: OK\n" if ok else "result: FAILED\n")
        self.out.flush()
        return 0 if ok else 1


#: Why only the stateful phase runs under ``--protocol streams``.
STREAMS_BOUNCE_SKIP = (
    "bounce phases skipped under --protocol streams: a streams group's members are applications "
    "that declare a topology (App workers), not plain consumers; the stateful phase runs them"
)

#: Why the stateful phase does not run under ``--protocol consumer``.
CONSUMER_STATEFUL_SKIP = (
    "stateful phase skipped under --protocol consumer: an App's tasks, standbys and warm-ups are "
    "placed by its own (client-side) task assignor, which Apache Kafka's coordinator does not run; "
    "--protocol consumer-client runs it through streamtasks coordinator"
)


async def run_demo(options: DemoOptions, out: TextIO = sys.stdout) -> int:
    if options.protocol not in PROTOCOLS:
        raise ConfigError(f"unknown protocol {options.protocol!r}: one of {', '.join(PROTOCOLS)}")
    options, cluster, settings = prepare_cluster(options, out)
    coordinator: CoordinatorProcess | None = None
    try:
        group_bootstrap = cluster.bootstrap_servers
        if options.protocol in ("consumer", "streams"):
            secured = settings.security_protocol != "PLAINTEXT"
            served = await api_keys(settings) if secured else None
            if options.protocol == "streams":
                require_streams_groups(cluster, served)
            else:
                require_kip848(cluster, served)
        elif options.protocol == "consumer-client":
            coordinator = CoordinatorProcess(cluster.bootstrap_servers)
            group_bootstrap = await coordinator.start()
            out.write(
                f"streamtasks coordinator listening on {group_bootstrap} in front of "
                f"{cluster.bootstrap_servers} (log topic {coordinator.topic})\n"
            )
        status = 0
        if options.protocol == "streams" and ("bounce" in options.phases or "dynamic" in options.phases):
            out.write(f"{STREAMS_BOUNCE_SKIP}\n")
        elif "bounce" in options.phases or "dynamic" in options.phases:
            status = await Demo(options, out).run(settings, None if coordinator is None else group_bootstrap)
            if coordinator is not None:
                out.write(f"coordinator: {coordinator.status()}\n")
        if "stateful" in options.phases:
            from streamtasks.drills.stateful_demo import (
                print_stateful_comparison,
                print_stateful_report,
                run_stateful_phase,
            )

            if options.protocol == "consumer":
                out.write(f"\n{CONSUMER_STATEFUL_SKIP}\n")
            elif options.protocol == "streams":
                out.write("\nstateful phase, a streams group: the broker places tasks and standbys\n")
                report = await run_stateful_phase(
                    settings, out, name_prefix=options.name_prefix, group_protocol="streams"
                )
                status = max(status, print_stateful_report(report, out, title="streams group (KIP-1071)"))
            elif coordinator is not None:
                # The KIP-848 path beside the classic one, on the same broker in the same run.
                reports = {}
                for label, protocol, via in (
                    ("classic (cooperative)", "classic", cluster.bootstrap_servers),
                    ("KIP-848 (streamtasks coordinator)", "consumer", group_bootstrap),
                ):
                    out.write(f"\nstateful phase, {label}: tasks with state, standbys and warm-ups\n")
                    reports[label] = await run_stateful_phase(
                        cluster.bootstrap_servers, out, group_bootstrap=via, group_protocol=protocol
                    )
                    status = max(status, print_stateful_report(reports[label], out, title=label))
                print_stateful_comparison(reports, out)
                out.write(f"coordinator: {coordinator.status()}\n")
            else:
                out.write("\nstateful phase: tasks with state, standbys and warm-ups\n")
                report = await run_stateful_phase(settings, out, name_prefix=options.name_prefix)
                status = max(status, print_stateful_report(report, out))
        return status
    finally:
        if coordinator is not None:
            await coordinator.stop()
        cluster.stop()
