"""The simulated world: one scenario run from start to convergence.

:class:`World` holds a :class:`~streamtasks.sim.transport.Driver` (which moves messages, runs the
member applications and owns them), applies the scenario's steps at their times through it,
checks the invariants after every event and, after the last step, keeps running until the group
converges or the convergence bound passes. The world owns only the run's own bookkeeping: the
event count, the incarnations, when partitions were created, convergence.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from assignors.partition.types import RebalanceProtocol
from streamtasks.membership.classic import ListenerKind, MemberConfig
from streamtasks.sim.apps import AppOutcome, AppSpec, GenerationApps, build_app
from streamtasks.sim.coordinator import ClassicGroupCoordinator
from streamtasks.sim.invariants import convergence_gaps, has_converged
from streamtasks.sim.ledger import OwnershipLedger, ReleaseKind
from streamtasks.sim.network import LinkProfile
from streamtasks.sim.process import SimProcess
from streamtasks.sim.scenario import Scenario, Step
from streamtasks.sim.trace import Trace, Violation
from streamtasks.sim.transport import (
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
    #: Runs with applications (``Step.app``): each live one at the end, every generation as
    #: they saw it, and the problems any incarnation's application had.
    apps: tuple[AppOutcome, ...] = ()
    app_generations: tuple[GenerationApps, ...] = ()
    app_problems: tuple[str, ...] = ()
    #: Rebalances the applications asked for because version probing moved their version.
    app_version_rejoins: int = 0


class World:
    """One scenario's simulation. ``run()`` once; read the attributes after for details."""

    def __init__(
        self,
        scenario: Scenario,
        settings: WorldSettings | None = None,
        *,
        ledger: OwnershipLedger | None = None,
    ) -> None:
        self.scenario = scenario
        self.settings = settings or WorldSettings()
        self.driver = Driver(scenario, self.settings, self._apply, ledger or OwnershipLedger())
        self.rng = random.Random(f"world-{scenario.seed}")
        self.incarnations: dict[str, int] = {}
        self.events = 0
        self.converged_at: int | None = None
        self.created_at: dict[TopicPartition, int] = {}
        self.kip814_blind: frozenset[TopicPartition] = frozenset()
        self._notes_seen = 0
        self._steps_scheduled = False
        self._quiet = scenario.quiet_ms
        self._quiet_rebalances: int | None = None
        self._mark: tuple[int, Callable[[], None]] | None = None

    # ------------------------------------------------------------------ the driver's parts, read-only

    @property
    def now(self) -> int:
        return self.driver.now

    @property
    def coordinator(self) -> ClassicGroupCoordinator:
        return self.driver.coordinator

    @property
    def current(self) -> dict[str, SimProcess]:
        return self.driver.current

    @property
    def procs(self) -> dict[str, SimProcess]:
        return self.driver.procs

    @property
    def ledger(self) -> OwnershipLedger:
        return self.driver.ledger

    @property
    def trace(self) -> Trace:
        return self.driver.trace

    @property
    def violations(self) -> list[Violation]:
        return self.driver.violations

    @property
    def listener_log(self) -> Sequence[tuple[int, str, ListenerKind, tuple[TopicPartition, ...], int]]:
        return self.driver.listener_log

    # ------------------------------------------------------------------ running

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
            nxt = self.driver.sched.peek_time()
            if nxt is None or nxt > deadline:
                # nothing left to happen before the bound: let the clock run out the faults
                self.driver.sched.clock.advance_to(max(self.now, quiet))
                self._converged()
                break
            self.step_once()
        else:
            self.driver.violate("event-budget", f"more than {self.settings.max_events} events")
        if not self.violations and self.converged_at is None:
            gaps = convergence_gaps(
                self.coordinator,
                self.driver.live(),
                self.ledger,
                self.driver.existing(),
                self._kip814_blind(),
            )
            self.driver.violate(
                "convergence",
                f"not converged {self.settings.convergence_bound_ms} ms after the "
                f"last step: {'; '.join(gaps[:6])}",
            )
        return self._result()

    def step_once(self) -> None:
        """Process one scheduled item and check the per-event invariants."""
        item = self.driver.sched.pop()
        if item is None:
            return
        if self._mark is not None and item.time_ms >= self._mark[0]:
            see, self._mark = self._mark[1], None
            see()
        self.events += 1
        self._dispatch(item.item)
        self._after_event()

    def advance(self, until_ms: int) -> None:
        """Process every item due up to ``until_ms`` (for scripted tests)."""
        self._schedule_steps()
        while (t := self.driver.sched.peek_time()) is not None and t <= until_ms:
            self.step_once()
        self.driver.sched.clock.advance_to(max(self.now, until_ms))

    def mark(self, at_ms: int, see: Callable[[], None]) -> None:
        """Call ``see`` once, before the first event at or after ``at_ms`` (a reading of the
        world there, e.g. a drill's start; nothing simulated changes)."""
        self._mark = (at_ms, see)

    def inject(self, step: Step, at_ms: int) -> None:
        """Apply ``step`` at ``at_ms`` too (for scripted tests that react to what happened)."""
        self.driver.sched.schedule(at_ms, StepDue(step=step))

    def _schedule_steps(self) -> None:
        if not self._steps_scheduled:
            self._steps_scheduled = True
            for step in self.scenario.steps:
                self.driver.sched.schedule(step.at_ms, StepDue(step=step))

    def _dispatch(self, item: Item) -> None:
        if isinstance(item, ToCoordinator):
            self.driver.at_coordinator(item)
        elif isinstance(item, ToMember):
            self.driver.at_member(item)
        elif isinstance(item, ProcessItem):
            self.driver.process_item(item)
        elif isinstance(item, StepDue):
            self.trace.add(self.now, f"STEP {item.step.describe()}")
            self._apply(item.step)
        else:
            self.driver.coordinator_wake()

    def _apply(self, step: Step) -> None:
        proc = self.current.get(step.member)
        live = proc if proc is not None and proc.alive else None
        op = step.op
        if op in ("start", "restart"):
            if live is None:
                self._start(step.member, step.static, step.assignors, step.app)
        elif op == "replace":
            if live is not None and live.is_static:
                self._start(step.member, True, step.assignors, step.app)
        elif op == "metadata":
            self._metadata(step.topic, step.partitions)
        elif op == "failover":
            self.driver.fail_over(step.duration_ms)
        elif op == "degrade":
            profile = LinkProfile(
                min_delay_ms=self.scenario.link.min_delay_ms,
                max_delay_ms=self.scenario.link.max_delay_ms,
                loss=step.loss,
                duplication=step.duplication,
            )
            self.driver.network.degrade(profile, self.now + step.duration_ms)
        elif op == "partition":
            self.driver.network.partition(step.member, self.now + step.duration_ms)
        elif live is None:
            return
        elif op == "pause" and live.paused_until is not None:
            self.driver.pause(live, step.duration_ms)  # extends the pause
        elif op == "crash":
            self.driver.stop(live, ReleaseKind.CRASHED)
        elif op == "bounce":
            self.driver.stop(live, ReleaseKind.CRASHED)
            again = Step(
                at_ms=0,
                op="restart",
                member=step.member,
                static=live.is_static,
                assignors=step.assignors,
                app=step.app,
            )
            self.driver.sched.schedule(self.now + step.duration_ms, StepDue(step=again))
        elif live.paused:
            self.driver.defer(live, step)
        elif live.leaving and op in ("leave", "enforce"):
            return  # the application already closed the consumer
        elif op == "leave":
            self.driver.leave(live)
        elif op == "enforce":
            self.driver.enforce(live)
        elif op == "pause":
            self.driver.pause(live, step.duration_ms)

    def _start(
        self, name: str, static: bool, assignors: tuple[str, ...] = (), spec: AppSpec | None = None
    ) -> None:
        incarnation = self.incarnations.get(name, -1) + 1
        self.incarnations[name] = incarnation
        t = self.scenario.timeouts
        app = (
            None
            if spec is None
            else build_app(
                spec,
                name=name,
                incarnation=incarnation,
                partitions_per_topic=self.driver.counts,
                now_ms=lambda: self.driver.now,
            )
        )
        config = MemberConfig(
            group_id=self.settings.group_id,
            topics=tuple(self.driver.counts) if app is None else app.topics,
            assignors=(
                tuple(make_assignor(n) for n in (assignors or self.scenario.assignors))
                if app is None
                else app.assignors
            ),
            group_instance_id=name if static else None,
            session_timeout_ms=(t.static_session_ms or t.session_ms) if static else t.session_ms,
            rebalance_timeout_ms=t.rebalance_ms,
            heartbeat_interval_ms=t.heartbeat_ms,
            request_timeout_ms=t.request_ms,
            retry_backoff_ms=t.retry_backoff_ms,
            followup_heartbeat_ms=t.followup_heartbeat_ms,
            generation_marker=self.scenario.generation_marker,
            # The coordinator model is Kafka's: a member in the group takes part in every
            # generation, so a gap means it missed one (see MemberConfig).
            lose_on_missed_generation=True,
        )
        self.driver.start(
            SimProcess(name=name, incarnation=incarnation, config=config, started_ms=self.now, app=app)
        )

    def _metadata(self, topic: str, partitions: int) -> None:
        new = self.driver.grow_topic(topic, partitions)
        if not new:
            return
        for tp in new:
            self.created_at[tp] = self.now
        for proc in self.driver.live():
            delay = self.rng.randint(0, self.scenario.metadata_refresh_ms)
            self.driver.sched.schedule(self.now + delay, ProcessItem(kind="metadata", conn=proc.conn))

    def _after_event(self) -> None:
        notes = self.coordinator.notes
        reloaded = False
        while self._notes_seen < len(notes):
            t, text = notes[self._notes_seen]
            self._notes_seen += 1
            self.trace.add(t, f"coordinator: {text}")
            reloaded = reloaded or text.startswith("coordinator loaded")
        self.driver.collect(
            self.driver.invariants.coordinator_generation_seen(
                self.now, self.coordinator.generation, reloaded=reloaded
            )
        )
        self.driver.collect(
            self.driver.invariants.exclusive_ownership(self.now, self.ledger, self.driver.is_current)
        )
        if self.coordinator.state.value == "Stable" and not self.ledger.measuring and self._all_owned():
            self.ledger.start_measuring(self.now)
        if self._quiet_rebalances is None and self.now >= self._quiet:
            self._quiet_rebalances = self.coordinator.rebalances

    def _converged(self) -> bool:
        if self.driver.network.faults_active(self.now) or self._rebalancing():
            return False
        live = self.driver.live()
        if any(p.paused for p in live):
            return False
        if not has_converged(
            self.coordinator, live, self.ledger, self.driver.existing(), self._kip814_blind()
        ):
            return False
        self.converged_at = self.now
        quiet_base = (
            self._quiet_rebalances if self._quiet_rebalances is not None else self.coordinator.rebalances
        )
        after = self.coordinator.rebalances - quiet_base
        bound = self.settings.rebalances_per_member * len(self.driver.live()) + self.settings.rebalance_slack
        if after > bound:
            self.driver.violate("convergence", f"converged only after {after} rebalances (bound {bound})")
        return True

    def _rebalancing(self) -> bool:
        """Not converged, known without a pass over the group (the common case after the last
        step): the available coordinator is not Stable while a process lives. Only when no
        topic grew, so the KIP-814 check's notes come when they did."""
        c = self.coordinator
        return (
            not self.created_at
            and c.available
            and c.state.value != "Stable"
            and any(p.alive for p in self.current.values())
        )

    def _kip814_blind(self) -> frozenset[TopicPartition]:
        """Partitions KIP-814 admits a group may never pick up: unowned, and created before the
        current leader — a static member that rejoined and was told to skip the assignment —
        learnt it leads, so the change happened before it started to monitor the metadata
        (see docs/simulation.md)."""
        if not self.created_at:
            return frozenset()  # no topic grew: nothing to be blind to
        leader_id = self.coordinator.group.leader
        leader = next((p for p in self.driver.live() if p.member.member_id == leader_id), None)
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
        return self.ledger.all_owned()

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
            handover_without_commit=self.driver.invariants.handover_without_commit,
            kip814_blind=len(self.kip814_blind),
            messages=self.driver.network.stats.sent,
            trace=tuple(self.trace.lines()) if self.violations else (),
            apps=tuple(
                p.app.outcome(p.name, p.member.protocol_name) for p in self.driver.live() if p.app is not None
            ),
            app_generations=self.driver.app_log.rows(),
            app_version_rejoins=sum(p.app.version_rejoins for p in self.procs.values() if p.app is not None),
            app_problems=tuple(
                f"{p.conn}: {problem}"
                for p in self.procs.values()
                if p.app is not None
                for problem in p.app.problems
            ),
        )
