"""The classic side of a simulated world: the model of Kafka's classic group coordinator.

:class:`ClassicSide` serves the members' requests with
:class:`~streamtasks.sim.coordinator.ClassicGroupCoordinator`, wakes it at its deadlines,
fails it over, starts classic members (and their applications, ``Step.app``), checks the
classic invariants after every event and reports a :class:`RunResult`.
:func:`classic_world` makes a :class:`~streamtasks.sim.world.World` with this side.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from assignors.partition.types import RebalanceProtocol
from streamtasks.membership.classic import AssignmentChanged, MemberConfig
from streamtasks.protocol.classic_group import JoinGroupRequest, OffsetCommitRequest
from streamtasks.protocol.errors import KafkaErrorCode
from streamtasks.sim.apps import AppLog, AppOutcome, GenerationApps, build_app
from streamtasks.sim.coordinator import ClassicGroupCoordinator, CoordinatorConfig, Reply, Request
from streamtasks.sim.coordinator_base import error_response
from streamtasks.sim.host import Alarm, MemberHost, describe_fields, describe_partitions
from streamtasks.sim.invariants import convergence_gaps, has_converged, is_current
from streamtasks.sim.items import Item, ToCoordinator
from streamtasks.sim.ledger import Holding, OwnershipLedger
from streamtasks.sim.moves import MoveDue, Moves
from streamtasks.sim.process import SimProcess, make_assignor
from streamtasks.sim.scenario import Scenario, Step
from streamtasks.sim.world import RunFigures, RunSettings, World
from topology.ids import TopicPartition

#: The classic member's count of lapsed assignments it took back (its metrics).
_READOPTED = "lapsed-assignments-taken-back-total"

__all__ = [
    "ClassicSide",
    "RunResult",
    "WorldSettings",
    "classic_world",
    "describe_message",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class WorldSettings(RunSettings):
    """The classic world's settings."""

    coordinator: CoordinatorConfig = field(default_factory=CoordinatorConfig)
    #: The group must converge within ``rebalances_per_member`` × live members +
    #: ``rebalance_slack`` completed rebalances after the last step (each member still
    #: (re)joining may cost its join and, COOPERATIVE, the follow-up its revocations need; the
    #: slack covers a leader's metadata rejoin).
    rebalances_per_member: int = 2
    rebalance_slack: int = 2


@dataclass(frozen=True, slots=True, kw_only=True)
class RunResult(RunFigures):
    """One classic run's outcome and figures."""

    protocol: RebalanceProtocol
    rebalances: int
    rebalances_after_quiet: int
    returned: int
    kip814_blind: int
    #: Lapsed generations' assignments members took back without a rebalance (membership/classic/readopt.py).
    readopted: int = 0
    #: Runs with applications (``Step.app``): each live one at the end, every generation as
    #: they saw it, and the problems any incarnation's application had.
    apps: tuple[AppOutcome, ...] = ()
    app_generations: tuple[GenerationApps, ...] = ()
    app_problems: tuple[str, ...] = ()
    #: Rebalances the applications asked for because version probing moved their version.
    app_version_rejoins: int = 0


def classic_world(
    scenario: Scenario, settings: WorldSettings | None = None, *, ledger: OwnershipLedger | None = None
) -> World[SimProcess, RunResult]:
    """A world of classic members against the classic coordinator model."""
    chosen = settings or WorldSettings()
    return World(
        scenario,
        chosen,
        lambda host: ClassicSide(host, chosen),
        ledger=ledger,
        task_topics=frozenset(scenario.task_topics),
    )


class ClassicSide:
    """The classic coordinator model of one world, and the world's classic checks."""

    epoch_word = "gen"
    replaces_zombies = True

    def __init__(self, host: MemberHost[SimProcess], settings: WorldSettings) -> None:
        self.host = host
        self.settings = settings
        self.scenario = host.scenario
        self.coordinator = ClassicGroupCoordinator(settings.group_id, settings.coordinator)
        self.alarm = Alarm(host.sched)
        #: What the processes' applications saw per generation (``Step.app``).
        self.app_log = AppLog()
        #: When partitions were created (metadata steps), for the KIP-814 check.
        self.created_at: dict[TopicPartition, int] = {}
        self.kip814_blind: frozenset[TopicPartition] = frozenset()
        self._delivered: set[tuple[str, int]] = set()
        self._notes_seen = 0
        self._quiet = host.scenario.quiet_ms
        self._quiet_rebalances: int | None = None
        self.moves = Moves(host, self._go)

    # -- the coordinator ----------------------------------------------------------------------

    def serve(self, item: ToCoordinator) -> None:
        host = self.host
        now = host.now
        request: Request = item.request  # type: ignore[assignment]
        if host.to_old_coordinator(item.conn):
            self._refuse(item, request)
            return
        interrupted = (
            self.moves.interrupting(commit=isinstance(request, OffsetCommitRequest), rebalancing=False)
            if self.moves.armed and self.coordinator.available
            else None
        )
        if interrupted is not None and not self.moves.written_first():
            self.moves.move(interrupted[0], "commit")
            self._refuse(item, request)
            return
        host.trace.add(now, f"{item.conn} -> coordinator: {describe_message(request)}")
        replies = self.coordinator.handle(item.conn, item.request_id, request, now)
        key = (item.conn, item.request_id)
        duplicate = key in self._delivered
        self._delivered.add(key)
        for commit in self.coordinator.drain_accepted():
            host.collect(
                host.invariants.accepted_commit(
                    commit, host.ledger, host.procs, self.is_current, duplicate=duplicate
                )
            )
        if interrupted is not None:
            # written, but the coordinator moved before it answered: the answer is the error
            self.moves.move(interrupted[0], "commit-written")
            error = error_response(request, self.moves.error())
            replies = [r if (r.conn, r.request_id) != key else replace(r, response=error) for r in replies]
        self._route(replies)
        self.alarm.set(self.coordinator.next_deadline_ms())

    def _route(self, replies: list[Reply]) -> None:
        for reply in replies:
            self.host.reply(reply.conn, reply.request_id, reply.response)

    def _refuse(self, item: ToCoordinator, request: Request) -> None:
        """The request reached a broker that is no longer the group's coordinator."""
        response = error_response(request, self.moves.error())
        self.host.trace.add(self.host.now, f"{item.conn} -> old coordinator: {describe_message(request)}")
        self.host.reply(item.conn, item.request_id, response)

    def move(self, step: Step) -> None:
        self.moves.step_due(step)

    def _go(self, load_ms: int, error: KafkaErrorCode) -> None:
        """The coordinator moves (:class:`Moves`): the new one loads the group from what was
        written (the last group record, the offsets) after ``load_ms``."""
        self._route(self.coordinator.fail_over(self.host.now, load_ms, error))
        self.alarm.set(self.coordinator.next_deadline_ms())

    def _triggered(self) -> None:
        """A move waiting for the group to rebalance (or for SyncGroups) moves now."""
        state = self.coordinator.state.value if self.coordinator.available else ""
        trigger = {"PreparingRebalance": "rebalance", "CompletingRebalance": "sync"}.get(state)
        step = None if trigger is None else self.moves.take(trigger)
        if step is not None and trigger is not None:
            self.moves.move(step, trigger)

    def on_item(self, item: Item) -> None:
        """The coordinator's timer fired (or a move's wait is over)."""
        if isinstance(item, MoveDue):
            self.moves.wait_over(item)
            return
        self.alarm.fired()
        self._route(self.coordinator.poll(self.host.now))
        self.alarm.set(self.coordinator.next_deadline_ms())

    def fail_over(self, duration_ms: int) -> None:
        self._route(self.coordinator.fail_over(self.host.now, duration_ms))
        self.alarm.set(self.coordinator.next_deadline_ms())

    def topic_grew(self, new: tuple[TopicPartition, ...]) -> None:
        for tp in new:
            self.created_at[tp] = self.host.now

    def coordinator_up(self) -> bool:
        return self.coordinator.available

    def is_current(self, holding: Holding) -> bool:
        proc = self.host.procs.get(holding.conn)
        return proc is not None and is_current(proc, self.coordinator)

    # -- members --------------------------------------------------------------------------

    def new_process(self, step: Step, static: bool, incarnation: int) -> SimProcess:
        host = self.host
        name, spec = step.member, step.app
        t = self.scenario.timeouts
        app = (
            None
            if spec is None
            else build_app(
                spec,
                name=name,
                incarnation=incarnation,
                partitions_per_topic=host.counts,
                now_ms=lambda: host.now,
            )
        )
        config = MemberConfig(
            group_id=self.settings.group_id,
            topics=tuple(host.counts) if app is None else app.topics,
            assignors=(
                tuple(make_assignor(n) for n in (step.assignors or self.scenario.assignors))
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
        return SimProcess(name=name, incarnation=incarnation, config=config, started_ms=host.now, app=app)

    def describe(self, message: object) -> str:
        return describe_message(message)

    def metadata_for(self, proc: SimProcess) -> Sequence[object]:
        return proc.metadata(self.host.counts, {}, self.host.now)

    def start_offsets(self, parts: tuple[TopicPartition, ...]) -> dict[TopicPartition, int]:
        offsets = self.coordinator.offsets
        return {tp: c.offset for tp in parts if (c := offsets.get(tp)) is not None}

    def sent(self, proc: SimProcess, request_id: int, request: object) -> None:
        if isinstance(request, JoinGroupRequest) and proc.protocol is RebalanceProtocol.EAGER:
            host = self.host
            host.collect(host.invariants.eager_join(host.now, proc, host.ledger))

    def assignment_changed(self, proc: SimProcess, action: AssignmentChanged) -> str | None:
        if proc.app is None:
            return None
        protocol = proc.member.protocol_name
        self.app_log.assigned(action.generation, protocol, proc.app.kind)
        return proc.app.on_assignment(action, protocol)

    def after_actions(self, proc: SimProcess) -> None:
        host = self.host
        host.collect(host.invariants.process_generation_seen(host.now, proc))
        if proc.done and proc.alive:
            return  # the process stops: nothing to match
        believed = proc.member.owned_partitions
        if host.task_topics:
            believed = frozenset(tp for tp in believed if tp.topic in host.task_topics)
        host.collect(host.invariants.ledger_matches(host.now, proc, host.ledger, believed))

    # -- after every event, and convergence -----------------------------------------------------

    def after_event(self) -> None:
        host = self.host
        now = host.now
        if self.moves.armed:
            self._triggered()
        notes = self.coordinator.notes
        reloaded = False
        while self._notes_seen < len(notes):
            t, text = notes[self._notes_seen]
            self._notes_seen += 1
            host.trace.add(t, f"coordinator: {text}")
            reloaded = reloaded or text.startswith("coordinator loaded")
        invariants = host.invariants
        host.collect(
            invariants.coordinator_generation_seen(now, self.coordinator.generation, reloaded=reloaded)
        )
        host.collect(invariants.exclusive_ownership(now, host.ledger, self.is_current))
        ledger = host.ledger
        if self.coordinator.state.value == "Stable" and not ledger.measuring and ledger.all_owned():
            ledger.start_measuring(now)
        if self._quiet_rebalances is None and now >= self._quiet:
            self._quiet_rebalances = self.coordinator.rebalances

    def converged(self) -> bool:
        host = self.host
        if host.network.faults_active(host.now) or self.moves.armed or self.rebalancing():
            return False
        live = host.live()
        if any(p.paused for p in live):
            return False
        if not has_converged(self.coordinator, live, host.ledger, host.existing(), self._kip814_blind()):
            return False
        after = self.coordinator.rebalances - self._quiet_base()
        bound = self.settings.rebalances_per_member * len(host.live()) + self.settings.rebalance_slack
        if after > bound:
            host.violate("convergence", f"converged only after {after} rebalances (bound {bound})")
        return True

    def convergence_gaps(self) -> list[str]:
        host = self.host
        return convergence_gaps(
            self.coordinator, host.live(), host.ledger, host.existing(), self._kip814_blind()
        )

    def _quiet_base(self) -> int:
        quiet = self._quiet_rebalances
        return quiet if quiet is not None else self.coordinator.rebalances

    def rebalancing(self) -> bool:
        """Not converged, known without a pass over the group (the common case after the last
        step): the available coordinator is not Stable while a process lives. Only when no
        topic grew, so the KIP-814 check's notes come when they did."""
        c = self.coordinator
        return (
            not self.created_at
            and c.available
            and c.state.value != "Stable"
            and any(p.alive for p in self.host.current.values())
        )

    def _kip814_blind(self) -> frozenset[TopicPartition]:
        """Partitions KIP-814 admits a group may never pick up: unowned, and created before the
        current leader — a static member that rejoined and was told to skip the assignment —
        learnt it leads, so the change happened before it started to monitor the metadata
        (see docs/simulation.md)."""
        if not self.created_at:
            return frozenset()  # no topic grew: nothing to be blind to
        host = self.host
        leader_id = self.coordinator.group.leader
        leader = next((p for p in host.live() if p.member.member_id == leader_id), None)
        if leader is None or leader.skip_assignment_at is None:
            return frozenset()
        since = leader.skip_assignment_at
        blind = frozenset(tp for tp, t in self.created_at.items() if t < since and not host.ledger.owners(tp))
        if blind and blind != self.kip814_blind:
            self.kip814_blind = blind
            host.trace.add(
                host.now,
                f"KIP-814 blind spot: leader {leader.conn} never saw "
                f"{describe_partitions(tuple(sorted(blind)))}",
            )
        return blind

    def result(self, world: World[SimProcess, Any]) -> RunResult:
        host = self.host
        ledger = host.ledger
        procs = host.procs.values()
        return RunResult(
            **world.run_figures(),
            protocol=self.scenario.protocol,
            rebalances=self.coordinator.rebalances,
            rebalances_after_quiet=self.coordinator.rebalances - self._quiet_base(),
            revoked=ledger.revoked,
            assigned=ledger.assigned,
            lost=ledger.lost,
            moved=ledger.moved,
            returned=ledger.returned,
            orphan_partition_ms=ledger.orphan_total_ms(host.now),
            handover_without_commit=host.invariants.handover_without_commit,
            kip814_blind=len(self.kip814_blind),
            readopted=sum(int(p.member.metrics(host.now)[_READOPTED]) for p in procs),
            apps=tuple(
                p.app.outcome(p.name, p.member.protocol_name) for p in host.live() if p.app is not None
            ),
            app_generations=self.app_log.rows(),
            app_version_rejoins=sum(p.app.version_rejoins for p in procs if p.app is not None),
            app_problems=tuple(
                f"{p.conn}: {problem}" for p in procs if p.app is not None for problem in p.app.problems
            ),
        )


def describe_message(message: object) -> str:
    name = type(message).__name__
    fields = describe_fields(
        message, ("error", "member_id", "generation_id", "leader", "skip_assignment", "group_instance_id")
    )
    members = getattr(message, "members", None)
    if members:
        fields.append(f"members={len(members)}")
    errors = getattr(message, "errors", None)
    if errors:
        codes = sorted({e.name for _, e in errors})
        fields.append(f"commit {len(errors)} partitions: {','.join(codes)}")
    return f"{name}({', '.join(fields)})"
