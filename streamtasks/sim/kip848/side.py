"""The KIP-848 side of a simulated world: the real coordinator (``streamtasks.coordinator``), the
real member machines (``streamtasks.membership.consumer``) and, client-side, the real streams
assignor, with fail-over by replaying the coordinator's records.

The invariants are checked after every event (``checks.py``). Every coordinator write is
appended to the side's log before it is applied (Kafka's order), so a fail-over is a fresh
coordinator loading that log. :func:`consumer_world` makes a
:class:`~streamtasks.sim.world.World` with this side.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from streamtasks.coordinator import (
    CoordinatorConfig,
    GroupCoordinator,
    MetadataImage,
    Record,
    Result,
    TopicMetadata,
    default_assignors,
)
from streamtasks.membership.classic import AssignmentChanged
from streamtasks.membership.classic import Request as ClassicRequest
from streamtasks.membership.consumer import Response as MemberResponse
from streamtasks.protocol.assignment_rpc import (
    ConsumerGroupInstallAssignmentResponse,
    ConsumerGroupPrepareAssignmentRequest,
    ConsumerGroupPrepareAssignmentResponse,
)
from streamtasks.protocol.classic_group import OffsetCommitRequest, OffsetCommitResponse
from streamtasks.protocol.consumer_group import ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse
from streamtasks.protocol.errors import KafkaErrorCode
from streamtasks.sim.host import Alarm, MemberHost
from streamtasks.sim.items import CoordinatorWake, FailoverEnd, Item, SideItem, ToCoordinator
from streamtasks.sim.kip848.checks import Checks
from streamtasks.sim.kip848.classic_desk import ClassicDesk, ClassicResponse
from streamtasks.sim.kip848.members import CLIENT, MODES, SERVER, MemberFactory
from streamtasks.sim.kip848.process import WorldProcess
from streamtasks.sim.kip848.wire import describe, topic_id
from streamtasks.sim.ledger import OwnershipLedger
from streamtasks.sim.moves import MoveDue, Moves, refusal
from streamtasks.sim.scenario import Scenario, Step
from streamtasks.sim.world import GroupSettings, RunFigures, World
from topology.ids import TopicPartition

__all__ = [
    "CLIENT",
    "MODES",
    "SERVER",
    "ConsumerRunResult",
    "ConsumerSettings",
    "ConsumerSide",
    "consumer_world",
    "describe",
    "topic_id",
]

E = KafkaErrorCode
#: A ``failover`` step waits this long at most for a rebalance to be under way.
FAILOVER_WAIT_MS = 15_000
#: ``CoordinatorConfig.assignment_interval_ms`` (target batching) per seed, drawn from its own
#: random stream: half the seeds compute every target at once, the rest batch.
ASSIGNMENT_INTERVALS_MS = (0, 0, 500, 1_000, 3_000)
#: The share of joins that also arrive late, in scenarios with duplication (the late-join fault).
LATE_JOIN_SHARE = 0.25


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerSettings(GroupSettings):
    """The KIP-848 world's settings (:class:`GroupSettings`' as they are)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FailoverDue(SideItem):
    """A fail-over that waited for a rebalance waits no longer."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerRunResult(RunFigures):
    """One KIP-848 run's outcome and figures."""

    mode: str
    group_epochs: int
    targets: int
    installs: int
    failovers: int
    failovers_mid_rebalance: int
    late_joins: int = 0
    #: Classic-protocol JoinGroups the coordinator parked (answered later through Result.joins).
    parked_joins: int = 0
    #: Lapsed members' epochs a coordinator vouched for (membership/consumer/lapse.py).
    readopted: int = 0


def consumer_world(
    scenario: Scenario,
    mode: str,
    settings: ConsumerSettings | None = None,
    *,
    ledger: OwnershipLedger | None = None,
) -> World[WorldProcess, ConsumerRunResult]:
    """A world of KIP-848 (and, mixed, classic) members against the KIP-848 coordinator;
    ``mode``: :data:`SERVER` or :data:`CLIENT`."""
    chosen = settings or ConsumerSettings()
    return World(scenario, chosen, lambda host: ConsumerSide(host, mode, chosen), ledger=ledger)


class ConsumerSide:
    """The KIP-848 coordinator of one world, its log and fail-overs, and the world's checks."""

    epoch_word = "epoch"
    replaces_zombies = False

    def __init__(self, host: MemberHost[WorldProcess], mode: str, settings: ConsumerSettings) -> None:
        scenario = host.scenario
        self.host = host
        self.mode = mode
        self.settings = settings
        self.scenario = scenario
        #: Draws for the late-join fault only, so the other draws of a seed stay as they were.
        self.late_rng = random.Random(f"late-join-{scenario.seed}")
        self.late_joins = 0
        #: Member ids the coordinator re-created from a late join (see _track_ghost).
        self.ghosts: set[str] = set()
        self.late_join_fault = any(step.duplication > 0 for step in scenario.steps)
        self.assignment_interval_ms = random.Random(f"interval-{scenario.seed}").choice(
            ASSIGNMENT_INTERVALS_MS
        )
        self.image = self._image()
        self.coordinator = self._new_coordinator()
        self.log: list[Record] = []
        self.unavailable_until: int | None = None
        self.offsets: dict[TopicPartition, int] = {}
        self.checks = Checks(host, self)
        #: Classic members' JoinGroup / SyncGroup / Heartbeat / LeaveGroup (a mixed group).
        self.desk = ClassicDesk(self)
        self.members = MemberFactory(
            scenario,
            mode,
            group_id=settings.group_id,
            session_timeout_ms=settings.session_timeout_ms,
            standby_replicas=settings.standby_replicas,
            counts=host.counts,
            ledger=host.ledger,
            now_ms=lambda: host.now,
        )
        self.failovers = 0
        self.failovers_mid_rebalance = 0
        self.installs = 0
        self.alarm = Alarm(host.sched)
        self._failover_armed: tuple[int, int] | None = None
        self.moves = Moves(host, self._failover_start)

    @property
    def now(self) -> int:
        return self.host.now

    @property
    def available(self) -> bool:
        return self.unavailable_until is None

    def group(self) -> Any:
        return self.coordinator.group(self.settings.group_id)

    # -- the coordinator ----------------------------------------------------------------------

    def _image(self) -> MetadataImage:
        return MetadataImage(
            tuple(
                TopicMetadata(topic_id=topic_id(t), name=t, num_partitions=n)
                for t, n in self.host.counts.items()
            )
        )

    def _new_coordinator(self) -> GroupCoordinator:
        config = CoordinatorConfig(
            session_timeout_ms=self.settings.session_timeout_ms,
            heartbeat_interval_ms=self.settings.heartbeat_interval_ms,
            assignment_interval_ms=self.assignment_interval_ms,
        )
        return GroupCoordinator(config, assignors=default_assignors(), image=self.image)

    def write(self, result: Result[Any]) -> Any:
        """Persist a write's records (the log), then apply it; its response."""
        self.log += result.records
        response = self.coordinator.apply(result)
        self.checks.after_write(result)
        self.desk.answered(result)
        return response

    def reply(self, conn: str, request_id: int, response: MemberResponse | ClassicResponse) -> None:
        self.host.reply(conn, request_id, response)

    def _rearm(self) -> None:
        self.alarm.set(self.coordinator.next_deadline_ms() if self.available else None)

    def serve(self, item: ToCoordinator) -> None:
        late = " (late copy)" if item.late else ""
        request = item.request
        if self.host.to_old_coordinator(item.conn):
            self.host.trace.add(
                self.now, f"{item.conn} -> old coordinator: {describe(request)}{late}: refused"
            )
            if not item.late:
                self.reply(item.conn, item.request_id, refusal(request, self.moves.error()))
            return
        self.host.trace.add(self.now, f"{item.conn} -> {describe(request)}{late}")
        interrupted = (
            self.moves.interrupting(
                commit=isinstance(request, OffsetCommitRequest), rebalancing=self._rebalancing()
            )
            if self.moves.armed and self.available
            else None
        )
        if interrupted is not None and not self.moves.written_first():
            self.moves.move(*interrupted)
            if not item.late:
                self.reply(item.conn, item.request_id, refusal(request, self.moves.error()))
            return
        if isinstance(request, ClassicRequest):
            answer: ClassicResponse | MemberResponse | None = self.desk.serve(
                item.conn, item.request_id, request
            )
            if interrupted is not None:
                self.moves.move(interrupted[0], f"{interrupted[1]}-written")
                answer = None if answer is None else refusal(request, self.moves.error())
            if answer is not None and not item.late:
                self.reply(item.conn, item.request_id, answer)
            self._rearm()
            return
        group = self.group()
        member_id = request.member_id if isinstance(request, ConsumerGroupHeartbeatRequest) else None
        known = member_id is not None and group is not None and group.member(member_id) is not None
        response = self._serve(request)
        if member_id is not None:
            self._track_ghost(member_id, known, late=item.late, response=response)
        if interrupted is not None:
            # written, but the coordinator moved before it answered: the answer is the error
            self.moves.move(interrupted[0], f"{interrupted[1]}-written")
            response = refusal(request, self.moves.error())
        if not item.late:
            self.reply(item.conn, item.request_id, response)
        self._rearm()

    def _rebalancing(self) -> bool:
        group = self.group()
        return group is not None and group.state.value not in ("Stable", "Empty")

    def move(self, step: Step) -> None:
        self.moves.step_due(step)

    def _track_ghost(self, member_id: str, known: bool, *, late: bool, response: MemberResponse) -> None:
        """A late join whose member had been removed meanwhile (its session expired, it was
        fenced) makes the coordinator create the member anew: a ghost, whose id the process
        shares but whose membership it never saw (the process may be a paused zombie still
        holding what it owned). Until the process itself is answered by the coordinator again,
        it is not counted as that member (``Checks`` reads :attr:`ghosts`)."""
        group = self.group()
        if late and not known and group is not None and group.member(member_id) is not None:
            self.ghosts.add(member_id)
            self.host.trace.add(self.now, f"{member_id} re-created by a late join (a ghost)")
        elif not late and isinstance(response, ConsumerGroupHeartbeatResponse) and not response.error:
            self.ghosts.discard(member_id)

    def _serve(self, request: Any) -> Any:
        down = KafkaErrorCode.NOT_COORDINATOR
        c = self.coordinator
        if isinstance(request, OffsetCommitRequest):
            if not self.available:
                return OffsetCommitResponse(errors=tuple((o.partition, down) for o in request.offsets))
            return self._commit(request)
        if isinstance(request, ConsumerGroupHeartbeatRequest):
            if not self.available:
                return ConsumerGroupHeartbeatResponse(error=down, member_epoch=0, heartbeat_interval_ms=0)
            return self.write(c.heartbeat(request, self.now, client_id=request.member_id))
        if isinstance(request, ConsumerGroupPrepareAssignmentRequest):
            if not self.available:
                return ConsumerGroupPrepareAssignmentResponse(error=down)
            return self.write(c.prepare_assignment(request, self.now))
        if not self.available:
            return ConsumerGroupInstallAssignmentResponse(error=down)
        group = self.group()
        before = None if group is None else group.prepared
        installed: ConsumerGroupInstallAssignmentResponse = self.write(
            c.install_assignment(request, self.now)
        )
        self.checks.installed(request, before, installed)
        if installed.error is KafkaErrorCode.NONE:
            self.installs += 1
        return installed

    def _commit(self, request: OffsetCommitRequest) -> OffsetCommitResponse:
        """OffsetCommit with the member epoch (KIP-848): unknown member or another epoch is refused."""
        group = self.group()
        current = None if group is None else group.current(request.member_id)
        code = KafkaErrorCode.NONE
        member = None if group is None else group.member(request.member_id)
        if current is None or member is None:
            code = KafkaErrorCode.UNKNOWN_MEMBER_ID
        elif current.member_epoch != request.generation_id:
            # a classic member commits with its generation (its member epoch)
            code = (
                KafkaErrorCode.STALE_MEMBER_EPOCH
                if member.classic is None
                else KafkaErrorCode.ILLEGAL_GENERATION
            )
        if code is KafkaErrorCode.NONE:
            for o in request.offsets:
                self.offsets[o.partition] = max(self.offsets.get(o.partition, 0), o.offset)
        return OffsetCommitResponse(errors=tuple((o.partition, code) for o in request.offsets))

    def on_item(self, item: Item) -> None:
        if isinstance(item, MoveDue):
            self.moves.wait_over(item)
        elif isinstance(item, FailoverEnd):
            self._failover_end()
        elif isinstance(item, FailoverDue):
            self._maybe_failover()
        elif isinstance(item, CoordinatorWake):
            self.alarm.fired()
            if self.available:
                # GroupCoordinator.poll, one timer write at a time, each checked as it is applied
                for key in self.coordinator.expired_timers(self.now):
                    self.write(self.coordinator.on_timer(key, self.now))
            self._rearm()

    def topic_grew(self, new: tuple[TopicPartition, ...]) -> None:
        self.image = self._image()
        if self.available:
            self.write(self.coordinator.on_metadata_image(self.image, self.now))
            self._rearm()

    # -- fail-over ------------------------------------------------------------------------------

    def fail_over(self, duration_ms: int) -> None:
        """Mid-rebalance: wait (up to :data:`FAILOVER_WAIT_MS`) until the group is not stable."""
        self._failover_armed = (duration_ms, self.now + FAILOVER_WAIT_MS)
        self.host.sched.schedule(self.now + FAILOVER_WAIT_MS, FailoverDue())
        self._maybe_failover()

    def _maybe_failover(self) -> None:
        armed = self._failover_armed
        group = self.group()
        rebalancing = group is not None and group.state.value not in ("Stable", "Empty")
        if armed is not None and (rebalancing or self.now >= armed[1]):
            self._failover_armed = None
            self._failover_start(armed[0])

    def _failover_start(
        self, duration_ms: int, error: KafkaErrorCode = KafkaErrorCode.NOT_COORDINATOR
    ) -> None:
        until = self.now + duration_ms
        if self.unavailable_until is None:
            self.failovers += 1
            group = self.group()
            if group is not None and group.state.value not in ("Stable", "Empty"):
                self.failovers_mid_rebalance += 1
        self.unavailable_until = max(self.unavailable_until or 0, until)
        self.desk.unload(error)
        self.host.sched.schedule(until, FailoverEnd())
        self._rearm()

    def _failover_end(self) -> None:
        if self.unavailable_until is None or self.now < self.unavailable_until:
            return
        self.unavailable_until = None
        old = self.coordinator
        group = old.group(self.settings.group_id)
        before = {} if group is None else dict(group.current_assignments)
        fresh = self._new_coordinator()
        resume = fresh.load(list(self.log), self.now)
        self.checks.failover_loaded(old, fresh)
        self.coordinator = fresh
        self.write(resume)
        self.checks.failover_resumed(before)
        self.host.trace.add(self.now, f"coordinator loaded {len(self.log)} records")
        self._rearm()

    # -- members --------------------------------------------------------------------------------

    def new_process(self, step: Step, static: bool, incarnation: int) -> WorldProcess:
        return self.members.new_process(step, static, incarnation)

    def describe(self, message: object) -> str:
        return describe(message)

    def coordinator_up(self) -> bool:
        return self.available

    def metadata_for(self, proc: WorldProcess) -> Sequence[object]:
        counts = self.host.counts
        return proc.metadata(counts, {t: topic_id(t) for t in counts}, self.now)

    def start_offsets(self, parts: tuple[TopicPartition, ...]) -> dict[TopicPartition, int]:
        return {tp: self.offsets[tp] for tp in parts if tp in self.offsets}

    def sent(self, proc: WorldProcess, request_id: int, request: object) -> None:
        """The late-join fault, in scenarios whose network duplicates (a ``degrade`` step with
        duplication): a quarter of the joins (epoch 0) arrive once more, 0.2-8 s later and out
        of order, as a request retried on a new connection does when the old connection's copy
        was still queued at the broker. Nobody reads the answer to the late copy (its
        connection is gone). A coordinator that reset a present member's assignment on it
        would release partitions the member still owns, perhaps while revoking them."""
        if not self.late_join_fault:
            return
        if not isinstance(request, ConsumerGroupHeartbeatRequest) or request.member_epoch != 0:
            return
        if self.late_rng.random() >= LATE_JOIN_SHARE:
            return
        self.late_joins += 1
        self.host.sched.schedule(
            self.now + self.late_rng.randint(200, 8_000),
            ToCoordinator(conn=proc.conn, request_id=request_id, request=request, late=True),
        )

    def assignment_changed(self, proc: WorldProcess, action: AssignmentChanged) -> str | None:
        return None

    def after_actions(self, proc: WorldProcess) -> None:
        self.checks.after_actions(proc)

    # -- after every event, convergence, the result ----------------------------------------------

    def after_event(self) -> None:
        self.checks.after_event()
        ledger = self.host.ledger
        if not ledger.measuring and ledger.all_owned() and self.host.anyone_alive():
            ledger.start_measuring(self.now)
        if self._failover_armed is not None:
            self._maybe_failover()
        if self.moves.armed and self.available and self._rebalancing():
            step = self.moves.take("rebalance")
            if step is not None:
                self.moves.move(step, "rebalance")

    def converged(self) -> bool:
        host = self.host
        if (
            not self.available
            or self._failover_armed is not None
            or self.moves.armed
            or host.network.faults_active(self.now)
        ):
            return False
        return self.checks.converged() and not any(p.paused for p in host.live())

    def convergence_gaps(self) -> list[str]:
        return self.checks.convergence_gaps()

    def result(self, world: World[WorldProcess, Any]) -> ConsumerRunResult:
        host = self.host
        group = self.group()
        ledger = host.ledger
        return ConsumerRunResult(
            **world.run_figures(),
            mode=self.mode,
            group_epochs=0 if group is None else group.group_epoch,
            targets=self.checks.targets,
            installs=self.installs,
            revoked=ledger.revoked,
            assigned=ledger.assigned,
            lost=ledger.lost,
            moved=ledger.moved,
            failovers=self.failovers,
            failovers_mid_rebalance=self.failovers_mid_rebalance,
            late_joins=self.late_joins,
            handover_without_commit=host.invariants.handover_without_commit,
            orphan_partition_ms=ledger.orphan_total_ms(self.now),
            parked_joins=self.desk.parked,
            readopted=sum(p.lapsed_taken_back for p in host.procs.values()),
        )
