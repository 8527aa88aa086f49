"""The simulated world: one scenario run from start to convergence, whatever the protocol.

A :class:`World` holds a :class:`~streamtasks.sim.host.MemberHost` (the processes, the network,
the ledger) and a :class:`Side` (the protocol's coordinator, its checks and its result). The
world applies the scenario's steps at their times, counts the events, lets the side check
after every event and, after the last step, keeps running until the side says the group has
converged or the convergence bound passes. The sides: the classic coordinator model
(:func:`streamtasks.sim.classic_side.classic_world`) and the KIP-848 coordinator with its
records and fail-over (:func:`streamtasks.sim.kip848.side.consumer_world`).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from streamtasks.sim.host import MemberHost, MemberRules
from streamtasks.sim.items import Item, ProcessItem, StepDue, ToCoordinator, ToMember
from streamtasks.sim.ledger import OwnershipLedger, ReleaseKind
from streamtasks.sim.network import LinkProfile
from streamtasks.sim.process import HostedProcess
from streamtasks.sim.scenario import Scenario, Step
from streamtasks.sim.trace import Trace, Violation

__all__ = ["GroupSettings", "RunFigures", "RunSettings", "Side", "World"]

P = TypeVar("P", bound=HostedProcess)
R_co = TypeVar("R_co", covariant=True)


@dataclass(frozen=True, slots=True, kw_only=True)
class RunSettings:
    """The settings every world reads (each side's settings add their own)."""

    group_id: str = "sim-group"
    #: The application consumes one record per this many ms of ownership.
    record_interval_ms: int = 10
    #: After the last step, the group must converge within this long (see docs/simulation.md).
    convergence_bound_ms: int = 120_000
    max_events: int = 400_000
    trace_limit: int = 400
    #: Stop at the first violation (the batch runner does; case-study tests may not).
    stop_on_violation: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupSettings(RunSettings):
    """The settings of a world whose coordinator keeps the group's heartbeats (the KIP-848 and
    streams sides)."""

    #: The coordinator's session timeout and heartbeat interval (members assume the same session).
    session_timeout_ms: int = 10_000
    heartbeat_interval_ms: int = 1_000
    standby_replicas: int = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class RunFigures:
    """What every world's run reports (each side's result adds its own figures)."""

    seed: int
    violations: tuple[Violation, ...]
    events: int
    sim_ms: int
    converged_after_ms: int | None
    membership_changes: int
    revoked: int
    assigned: int
    lost: int
    moved: int
    messages: int
    #: The trace's last lines, only when something was violated.
    trace: tuple[str, ...] = ()
    #: Partitions taken over whose previous owner revoked them without a commit.
    handover_without_commit: int = 0
    #: Partition-ms without an owner, from the moment the group first owned every partition.
    orphan_partition_ms: int = 0


class Side(MemberRules[P], Protocol[P, R_co]):
    """One protocol's coordinator, checks and result, as the world runs them."""

    #: A ``replace`` step (a static member's new process beside the live one) is modelled.
    replaces_zombies: bool

    @property
    def coordinator(self) -> Any: ...

    def serve(self, item: ToCoordinator) -> None:
        """A request reached the coordinator."""
        ...

    def on_item(self, item: Item) -> None:
        """The coordinator's timer, or an item only this side schedules, is due."""
        ...

    def fail_over(self, duration_ms: int) -> None: ...

    def move(self, step: Step) -> None:
        """A ``move`` step is due (the coordinator moves now or at its trigger)."""
        ...

    def topic_grew(self, new: tuple[Any, ...]) -> None:
        """A topic got the partitions ``new`` (the host's counts and ledger know already)."""
        ...

    def new_process(self, step: Step, static: bool, incarnation: int) -> P: ...

    def after_event(self) -> None: ...

    def converged(self) -> bool:
        """The group has converged (a side may report a violation of how it got there)."""
        ...

    def convergence_gaps(self) -> list[str]: ...

    def result(self, world: World[P, Any]) -> R_co: ...


class World(Generic[P, R_co]):
    """One scenario's simulation. ``run()`` once; read the attributes after for details.
    ``side`` makes the protocol's side for the world's host."""

    def __init__(
        self,
        scenario: Scenario,
        settings: RunSettings,
        side: Callable[[MemberHost[P]], Side[P, R_co]],
        *,
        ledger: OwnershipLedger | None = None,
        task_topics: frozenset[str] = frozenset(),
    ) -> None:
        self.scenario = scenario
        self.settings = settings
        self.host: MemberHost[P] = MemberHost(
            scenario,
            ledger=ledger or OwnershipLedger(),
            trace_limit=settings.trace_limit,
            record_interval_ms=settings.record_interval_ms,
            apply_step=self._apply,
            task_topics=task_topics,
        )
        self.side = side(self.host)
        self.host.attach(self.side)
        self.rng = random.Random(f"world-{scenario.seed}")
        self.incarnations: dict[str, int] = {}
        self.events = 0
        self.converged_at: int | None = None
        self._steps_scheduled = False
        self._mark: tuple[int, Callable[[], None]] | None = None
        self._watch: tuple[int, Callable[[int, int], None]] | None = None

    # ------------------------------------------------------------------ the host's parts, read-only

    @property
    def now(self) -> int:
        return self.host.now

    def run_figures(self) -> dict[str, Any]:
        """The figures every side's result reports alike (:class:`RunFigures`' fields that are
        the world's, not the side's)."""
        host, converged_at = self.host, self.converged_at
        return {
            "seed": self.scenario.seed,
            "violations": tuple(host.violations),
            "events": self.events,
            "sim_ms": host.now,
            "converged_after_ms": None
            if converged_at is None
            else max(converged_at - self.scenario.quiet_ms, 0),
            "membership_changes": self.scenario.membership_changes(),
            "messages": host.network.stats.sent,
            "trace": tuple(host.trace.lines()) if host.violations else (),
        }

    @property
    def coordinator(self) -> Any:
        return self.side.coordinator

    @property
    def procs(self) -> dict[str, P]:
        return self.host.procs

    @property
    def current(self) -> dict[str, P]:
        return self.host.current

    @property
    def ledger(self) -> OwnershipLedger:
        return self.host.ledger

    @property
    def trace(self) -> Trace:
        return self.host.trace

    @property
    def violations(self) -> list[Violation]:
        return self.host.violations

    def live(self) -> list[P]:
        return self.host.live()

    # ------------------------------------------------------------------ running

    def run(self) -> R_co:
        """Run to convergence (or the bound); may follow ``advance`` calls."""
        self._schedule_steps()
        quiet = self.scenario.quiet_ms
        deadline = quiet + self.settings.convergence_bound_ms
        sched = self.host.sched
        while self.events < self.settings.max_events:
            if self.violations and self.settings.stop_on_violation:
                break
            if self.now >= quiet and self._converged():
                break
            nxt = sched.peek_time()
            if nxt is None or nxt > deadline:
                # nothing left to happen before the bound: let the clock run out the faults
                sched.clock.advance_to(max(self.now, quiet))
                self._converged()
                break
            self.step_once()
        else:
            self.host.violate("event-budget", f"more than {self.settings.max_events} events")
        if not self.violations and self.converged_at is None:
            gaps = self.side.convergence_gaps()
            self.host.violate(
                "convergence",
                f"not converged {self.settings.convergence_bound_ms} ms after the "
                f"last step: {'; '.join(gaps[:6])}",
            )
        return self.result()

    def result(self) -> R_co:
        return self.side.result(self)

    def step_once(self) -> None:
        """Process one scheduled item and check the per-event invariants."""
        item = self.host.sched.pop()
        if item is None:
            return
        if self._mark is not None and item.time_ms >= self._mark[0]:
            see, self._mark = self._mark[1], None
            see()
        self.events += 1
        self._dispatch(item.item)
        self.side.after_event()
        if self._watch is not None and self.events % self._watch[0] == 0:
            self._watch[1](self.events, self.now)

    def advance(self, until_ms: int) -> None:
        """Process every item due up to ``until_ms`` (for scripted tests)."""
        self._schedule_steps()
        sched = self.host.sched
        while (t := sched.peek_time()) is not None and t <= until_ms:
            self.step_once()
        sched.clock.advance_to(max(self.now, until_ms))

    def mark(self, at_ms: int, see: Callable[[], None]) -> None:
        """Call ``see`` once, before the first event at or after ``at_ms`` (a reading of the
        world there, e.g. a drill's start; nothing simulated changes)."""
        self._mark = (at_ms, see)

    def watch(self, every: int, see: Callable[[int, int], None]) -> None:
        """Call ``see(events, now_ms)`` after every ``every``-th event (a progress display for a
        long run; nothing simulated changes)."""
        self._watch = (every, see)

    def inject(self, step: Step, at_ms: int) -> None:
        """Apply ``step`` at ``at_ms`` too (for scripted tests that react to what happened)."""
        self.host.sched.schedule(at_ms, StepDue(step=step))

    def _schedule_steps(self) -> None:
        if not self._steps_scheduled:
            self._steps_scheduled = True
            for step in self.scenario.steps:
                self.host.sched.schedule(step.at_ms, StepDue(step=step))

    def _converged(self) -> bool:
        if not self.side.converged():
            return False
        self.converged_at = self.now
        return True

    def _dispatch(self, item: Item) -> None:
        if isinstance(item, ToCoordinator):
            if self.host.arrives(item):
                self.side.serve(item)
        elif isinstance(item, ToMember):
            self.host.at_member(item)
        elif isinstance(item, ProcessItem):
            self.host.process_item(item)
        elif isinstance(item, StepDue):
            self.trace.add(self.now, f"STEP {item.step.describe()}")
            self._apply(item.step)
        else:
            self.side.on_item(item)

    # ------------------------------------------------------------------ the scenario's steps

    def _apply(self, step: Step) -> None:
        proc = self.current.get(step.member)
        live = proc if proc is not None and proc.alive else None
        op = step.op
        host = self.host
        if op in ("start", "restart"):
            if live is None:
                self._start(step, step.static)
        elif op == "replace":
            if live is not None and live.is_static and self.side.replaces_zombies:
                self._start(step, True)
        elif op in ("metadata", "failover", "degrade", "partition", "move"):
            self._apply_to_cluster(step)
        elif live is None:
            return
        elif op == "pause" and live.paused_until is not None:
            host.pause(live, step.duration_ms)  # extends the pause
        elif op == "crash":
            host.stop(live, ReleaseKind.CRASHED)
        elif op == "bounce":
            host.stop(live, ReleaseKind.CRASHED)
            again = Step(
                at_ms=0,
                op="restart",
                member=step.member,
                static=live.is_static,
                assignors=step.assignors,
                group_protocol=step.group_protocol or live.group_protocol,
                app=step.app,
            )
            host.sched.schedule(self.now + step.duration_ms, StepDue(step=again))
        elif live.paused:
            host.defer(live, step)
        elif live.leaving and op in ("leave", "enforce"):
            return  # the application already closed the consumer
        elif op == "leave":
            host.leave(live)
        elif op == "enforce":
            host.enforce(live)
        elif op == "pause":
            host.pause(live, step.duration_ms)

    def _apply_to_cluster(self, step: Step) -> None:
        """The steps that change no process: metadata, fail-over, a coordinator move, a degraded or
        cut network."""
        op = step.op
        if op == "metadata":
            self._metadata(step.topic, step.partitions)
        elif op == "failover":
            self.side.fail_over(step.duration_ms)
        elif op == "move":
            self.side.move(step)
        elif op == "degrade":
            link = self.scenario.link
            profile = LinkProfile(
                min_delay_ms=link.min_delay_ms,
                max_delay_ms=link.max_delay_ms,
                loss=step.loss,
                duplication=step.duplication,
            )
            self.host.network.degrade(profile, self.now + step.duration_ms)
        else:
            self.host.network.partition(step.member, self.now + step.duration_ms)

    def _start(self, step: Step, static: bool) -> None:
        incarnation = self.incarnations.get(step.member, -1) + 1
        self.incarnations[step.member] = incarnation
        self.host.start(self.side.new_process(step, static, incarnation))

    def _metadata(self, topic: str, partitions: int) -> None:
        new = self.host.grow_topic(topic, partitions)
        if not new:
            return
        self.side.topic_grew(new)
        for proc in self.host.live():
            delay = self.rng.randint(0, self.scenario.metadata_refresh_ms)
            self.host.sched.schedule(self.now + delay, ProcessItem(kind="metadata", conn=proc.conn))
