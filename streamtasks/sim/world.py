"""The simulated world: one scenario run from start to convergence.

:class:`World` (on top of :class:`~streamtasks.sim.driver.Driver`, which moves messages and
runs the member applications) applies the scenario's steps at their times, checks the
invariants after every event and, after the last step, keeps running until the group
converges or the convergence bound passes.
"""

from __future__ import annotations

from dataclasses import dataclass

from assignors.partition.types import RebalanceProtocol
from streamtasks.membership.classic import Leave, MemberConfig, MetadataUpdated, Subscribe
from streamtasks.sim.driver import (
    Driver,
    Item,
    ProcessItem,
    StepDue,
    ToCoordinator,
    ToMember,
    WorldSettings,
    describe_partitions,
    make_assignor,
)
from streamtasks.sim.invariants import convergence_gaps
from streamtasks.sim.ledger import ReleaseKind
from streamtasks.sim.network import LinkProfile
from streamtasks.sim.process import DeferredInput, SimProcess
from streamtasks.sim.scenario import Step
from streamtasks.sim.trace import Violation
from topology.ids import TopicPartition

__all__ = ["RunResult", "World", "WorldSettings"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RunResult:
    """One run's outcome and figures (``trace`` only when something was violated)."""

    seed: int
    protocol: RebalanceProtocol
    violations: tuple[Violation, ...]
    events: int
    sim_ms: int
    converged_after_ms: int | None
    rebalances: int
    rebalances_after_quiet: int
    membership_changes: int
    revoked: int
    assigned: int
    lost: int
    moved: int
    returned: int
    orphan_partition_ms: int
    handover_without_commit: int
    kip814_blind: int
    messages: int
    trace: tuple[str, ...] = ()


class World(Driver):
    """One scenario's simulation. ``run()`` once; read the attributes after for details."""

    def run(self) -> RunResult:
        """Run to convergence (or the bound); may follow ``advance`` calls."""
        self._schedule_steps()
        quiet = self.scenario.quiet_ms
        deadline = quiet + self.settings.convergence_bound_ms
        while self.events < self.settings.max_events:
            if self.violations and self.settings.stop_on_violation:
                break
            if self.now >= quiet and self._converged():
                break
            nxt = self.sched.peek_time()
            if nxt is None or nxt > deadline:
                # nothing left to happen before the bound: let the clock run out the faults
                self.sched.clock.advance_to(max(self.now, quiet))
                self._converged()
                break
            self.step_once()
        else:
            self._violate("event-budget", f"more than {self.settings.max_events} events")
        if not self.violations and self.converged_at is None:
            gaps = convergence_gaps(
                self.coordinator, self._live(), self.ledger, self._existing(), self._kip814_blind()
            )
            self._violate(
                "convergence",
                f"not converged {self.settings.convergence_bound_ms} ms after the "
                f"last step: {'; '.join(gaps[:6])}",
            )
        return self._result()

    def step_once(self) -> None:
        """Process one scheduled item and check the per-event invariants."""
        item = self.sched.pop()
        if item is None:
            return
        self.events += 1
        self._dispatch(item.item)
        self._after_event()

    def advance(self, until_ms: int) -> None:
        """Process every item due up to ``until_ms`` (for scripted tests)."""
        self._schedule_steps()
        while (t := self.sched.peek_time()) is not None and t <= until_ms:
            self.step_once()
        self.sched.clock.advance_to(max(self.now, until_ms))

    def inject(self, step: Step, at_ms: int) -> None:
        """Apply ``step`` at ``at_ms`` too (for scripted tests that react to what happened)."""
        self.sched.schedule(at_ms, StepDue(step=step))

    def _schedule_steps(self) -> None:
        if not self._steps_scheduled:
            self._steps_scheduled = True
            for step in self.scenario.steps:
                self.sched.schedule(step.at_ms, StepDue(step=step))

    def _dispatch(self, item: Item) -> None:
        if isinstance(item, ToCoordinator):
            self._at_coordinator(item)
        elif isinstance(item, ToMember):
            self._at_member(item)
        elif isinstance(item, ProcessItem):
            self._process_item(item)
        elif isinstance(item, StepDue):
            self.trace.add(self.now, f"STEP {item.step.describe()}")
            self._apply(item.step)
        else:
            self._coord_at = self._coord_token = None
            self._route(self.coordinator.poll(self.now))
            self._rearm_coordinator()

    def _apply(self, step: Step) -> None:
        proc = self.current.get(step.member)
        live = proc if proc is not None and proc.alive else None
        op = step.op
        if op in ("start", "restart"):
            if live is None:
                self._start(step.member, step.static, step.assignors)
        elif op == "replace":
            if live is not None and live.is_static:
                self._start(step.member, True, step.assignors)
        elif op == "metadata":
            self._metadata(step.topic, step.partitions)
        elif op == "failover":
            self._route(self.coordinator.fail_over(self.now, step.duration_ms))
            self._rearm_coordinator()
        elif op == "degrade":
            profile = LinkProfile(
                min_delay_ms=self.scenario.link.min_delay_ms,
                max_delay_ms=self.scenario.link.max_delay_ms,
                loss=step.loss,
                duplication=step.duplication,
            )
            self.network.degrade(profile, self.now + step.duration_ms)
        elif op == "partition":
            self.network.partition(step.member, self.now + step.duration_ms)
        elif live is None:
            return
        elif op == "pause" and live.paused_until is not None:
            live.paused_until = max(live.paused_until, self.now + step.duration_ms)
            self.sched.schedule(live.paused_until, ProcessItem(kind="resume", conn=live.conn))
        elif op == "crash":
            self._stop(live, ReleaseKind.CRASHED)
        elif op == "bounce":
            self._stop(live, ReleaseKind.CRASHED)
            again = Step(
                at_ms=0, op="restart", member=step.member, static=live.is_static, assignors=step.assignors
            )
            self.sched.schedule(self.now + step.duration_ms, StepDue(step=again))
        elif live.paused:
            live.deferred.append(DeferredInput(kind="step", payload=step))
        elif live.leaving and op in ("leave", "enforce"):
            return  # the application already closed the consumer
        elif op == "leave":
            live.leaving = True
            self._drive(live, Leave(reason="scenario"))
        elif op == "enforce":
            took = live.member.enforce_rebalance("scenario")
            self.trace.add(self.now, f"{live.conn} enforce_rebalance -> {took}")
            self._rearm(live)
        elif op == "pause":
            live.paused_until = self.now + step.duration_ms
            if live.wake_token is not None:
                self.sched.cancel(live.wake_token)
                live.wake_token = live.wake_at = None
            self.sched.schedule(live.paused_until, ProcessItem(kind="resume", conn=live.conn))

    def _start(self, name: str, static: bool, assignors: tuple[str, ...] = ()) -> None:
        incarnation = self.incarnations.get(name, -1) + 1
        self.incarnations[name] = incarnation
        t = self.scenario.timeouts
        config = MemberConfig(
            group_id=self.settings.group_id,
            topics=tuple(self.counts),
            assignors=tuple(make_assignor(n) for n in (assignors or self.scenario.assignors)),
            group_instance_id=name if static else None,
            session_timeout_ms=(t.static_session_ms or t.session_ms) if static else t.session_ms,
            rebalance_timeout_ms=t.rebalance_ms,
            heartbeat_interval_ms=t.heartbeat_ms,
            request_timeout_ms=t.request_ms,
            retry_backoff_ms=t.retry_backoff_ms,
            generation_marker=self.scenario.generation_marker,
            # The coordinator model is Kafka's: a member in the group takes part in every
            # generation, so a gap means it missed one (see MemberConfig).
            lose_on_missed_generation=True,
        )
        proc = SimProcess(name=name, incarnation=incarnation, config=config, started_ms=self.now)
        self.procs[proc.conn] = proc
        self.current[name] = proc
        self._drive(proc, MetadataUpdated(partitions_per_topic=dict(self.counts)))
        self._drive(proc, Subscribe(topics=tuple(self.counts)))

    def _metadata(self, topic: str, partitions: int) -> None:
        if partitions <= self.counts.get(topic, 0):
            return
        for p in range(self.counts[topic], partitions):
            self.created_at[TopicPartition(topic, p)] = self.now
        self.counts[topic] = partitions
        self.ledger.set_partitions(self._existing(), self.now)
        for proc in self._live():
            delay = self.rng.randint(0, self.scenario.metadata_refresh_ms)
            self.sched.schedule(self.now + delay, ProcessItem(kind="metadata", conn=proc.conn))

    def _after_event(self) -> None:
        notes = self.coordinator.notes
        reloaded = False
        while self._notes_seen < len(notes):
            t, text = notes[self._notes_seen]
            self._notes_seen += 1
            self.trace.add(t, f"coordinator: {text}")
            reloaded = reloaded or text.startswith("coordinator loaded")
        self._collect(
            self.invariants.coordinator_generation_seen(
                self.now, self.coordinator.generation, reloaded=reloaded
            )
        )
        self._collect(self.invariants.exclusive_ownership(self.now, self.ledger, self._is_current))
        if self.coordinator.state.value == "Stable" and not self.ledger.measuring and self._all_owned():
            self.ledger.start_measuring(self.now)
        if self._quiet_rebalances is None and self.now >= self._quiet:
            self._quiet_rebalances = self.coordinator.rebalances

    def _converged(self) -> bool:
        if self.network.faults_active(self.now) or any(p.paused for p in self._live()):
            return False
        if convergence_gaps(
            self.coordinator, self._live(), self.ledger, self._existing(), self._kip814_blind()
        ):
            return False
        self.converged_at = self.now
        quiet_base = (
            self._quiet_rebalances if self._quiet_rebalances is not None else self.coordinator.rebalances
        )
        after = self.coordinator.rebalances - quiet_base
        bound = self.settings.rebalances_per_member * len(self._live()) + self.settings.rebalance_slack
        if after > bound:
            self._violate("convergence", f"converged only after {after} rebalances (bound {bound})")
        return True

    def _kip814_blind(self) -> frozenset[TopicPartition]:
        """Partitions KIP-814 admits a group may never pick up: unowned, and created before the
        current leader — a static member that rejoined and was told to skip the assignment —
        learnt it leads, so the change happened before it started to monitor the metadata
        (see docs/simulation.md)."""
        leader_id = self.coordinator.group.leader
        leader = next((p for p in self._live() if p.member.member_id == leader_id), None)
        if leader is None or leader.skip_assignment_at is None:
            return frozenset()
        since = leader.skip_assignment_at
        blind = frozenset(tp for tp, t in self.created_at.items() if t < since and not self.ledger.owners(tp))
        if blind and blind != self.kip814_blind:
            self.kip814_blind = blind
            self.trace.add(
                self.now,
                f"KIP-814 blind spot: leader {leader.conn} never saw "
                f"{describe_partitions(tuple(sorted(blind)))}",
            )
        return blind

    def _all_owned(self) -> bool:
        return all(self.ledger.owners(tp) for tp in self._existing())

    def _result(self) -> RunResult:
        quiet_base = (
            self._quiet_rebalances if self._quiet_rebalances is not None else self.coordinator.rebalances
        )
        quiet = self.scenario.quiet_ms
        return RunResult(
            seed=self.scenario.seed,
            protocol=self.scenario.protocol,
            violations=tuple(self.violations),
            events=self.events,
            sim_ms=self.now,
            converged_after_ms=None if self.converged_at is None else max(self.converged_at - quiet, 0),
            rebalances=self.coordinator.rebalances,
            rebalances_after_quiet=self.coordinator.rebalances - quiet_base,
            membership_changes=self.scenario.membership_changes(),
            revoked=self.ledger.revoked,
            assigned=self.ledger.assigned,
            lost=self.ledger.lost,
            moved=self.ledger.moved,
            returned=self.ledger.returned,
            orphan_partition_ms=self.ledger.orphan_total_ms(self.now),
            handover_without_commit=self.invariants.handover_without_commit,
            kip814_blind=len(self.kip814_blind),
            messages=self.network.stats.sent,
            trace=tuple(self.trace.lines()) if self.violations else (),
        )
