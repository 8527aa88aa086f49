"""The KIP-848 simulated world: the real coordinator (``streamtasks.coordinator``), the real
member machines (``streamtasks.membership.consumer``) and, client-side, the real streams
assignor, over the simulated network, with fail-over by replaying the coordinator's records.

One scenario (the classic simulator's generator and steps) runs from start to convergence;
the invariants are checked after every event (``checks.py``). Every coordinator write is
appended to the world's log before it is applied (Kafka's order), so a fail-over is a fresh
coordinator loading that log.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from assignors.task.high_availability import HighAvailabilityTaskAssignor
from assignors.types import AssignmentConfigs
from streamtasks.coordinator import (
    CoordinatorConfig,
    GroupCoordinator,
    MetadataImage,
    Record,
    Result,
    TopicMetadata,
    default_assignors,
)
from streamtasks.membership.classic import (
    AssignmentChanged,
    CommitOffsets,
    ErrorReported,
    FindCoordinator,
    InvokeListener,
    ListenerKind,
    MemberConfig,
)
from streamtasks.membership.classic import Request as ClassicRequest
from streamtasks.membership.classic import Response as ClassicResponse
from streamtasks.membership.classic import SendRequest as ClassicSendRequest
from streamtasks.membership.consumer import (
    AssignorMetadata,
    ConsumerMemberConfig,
    Request,
    SendRequest,
)
from streamtasks.membership.consumer import Response as MemberResponse
from streamtasks.protocol.assignment_rpc import (
    ConsumerGroupInstallAssignmentResponse,
    ConsumerGroupPrepareAssignmentRequest,
    ConsumerGroupPrepareAssignmentResponse,
)
from streamtasks.protocol.classic_group import OffsetCommitRequest, OffsetCommitResponse
from streamtasks.protocol.consumer_group import ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse
from streamtasks.protocol.errors import KafkaErrorCode
from streamtasks.protocol.userdata import LATEST_VERSION, MIN_SUPPORTED_VERSION
from streamtasks.sim.invariants import Invariants
from streamtasks.sim.kip848.checks import Checks
from streamtasks.sim.kip848.classic_desk import ClassicDesk
from streamtasks.sim.kip848.process import AnyAction, ClassicProcess, ConsumerProcess, WorldProcess
from streamtasks.sim.ledger import OwnershipLedger, ReleaseKind
from streamtasks.sim.network import LinkProfile, Network
from streamtasks.sim.process import DeferredInput
from streamtasks.sim.scenario import Scenario, Step
from streamtasks.sim.scheduler import Scheduler
from streamtasks.sim.trace import Trace, Violation
from streamtasks.sim.transport import (
    CoordinatorWake,
    ProcessItem,
    StepDue,
    describe_partitions,
    make_assignor,
)
from streamtasks.streams import LastTaskTable, StreamsPartitionAssignor
from topology import TopologyBuilder
from topology.ids import TaskId, TopicPartition

__all__ = ["CLIENT", "MODES", "SERVER", "ConsumerRunResult", "ConsumerSettings", "ConsumerWorld", "topic_id"]

#: ``--protocol consumer``: the coordinator's ``uniform`` assignor.
SERVER = "consumer"
#: ``--protocol consumer-client``: the streams assignor (standbys) run by a member.
CLIENT = "consumer-client"
MODES = (SERVER, CLIENT)
#: A ``failover`` step waits this long at most for a rebalance to be under way.
FAILOVER_WAIT_MS = 15_000
#: ``CoordinatorConfig.assignment_interval_ms`` (target batching) per seed, drawn from its own
#: random stream: half the seeds compute every target at once, the rest batch.
ASSIGNMENT_INTERVALS_MS = (0, 0, 500, 1_000, 3_000)
#: The share of joins that also arrive late, in scenarios with duplication (the late-join fault).
LATE_JOIN_SHARE = 0.25


def topic_id(name: str) -> uuid.UUID:
    return uuid.uuid5(uuid.NAMESPACE_URL, f"streamtasks-sim/{name}")


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerSettings:
    group_id: str = "sim-group"
    record_interval_ms: int = 10
    #: The coordinator's session timeout and heartbeat interval (members assume the same session).
    session_timeout_ms: int = 10_000
    heartbeat_interval_ms: int = 1_000
    standby_replicas: int = 1
    convergence_bound_ms: int = 120_000
    max_events: int = 400_000
    trace_limit: int = 400
    stop_on_violation: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class ToCoordinator:
    conn: str
    request_id: int
    request: Request | OffsetCommitRequest | ClassicRequest
    #: A late copy of a join (see :meth:`ConsumerWorld._send`): its response has nowhere to go.
    late: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class ToMember:
    conn: str
    request_id: int
    response: MemberResponse | ClassicResponse


@dataclass(frozen=True, slots=True, kw_only=True)
class FailoverEnd:
    """The coordinator's replacement has loaded the log."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FailoverDue:
    """A fail-over that waited for a rebalance waits no longer."""


Item = ToCoordinator | ToMember | ProcessItem | StepDue | CoordinatorWake | FailoverEnd | FailoverDue


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerRunResult:
    seed: int
    mode: str
    violations: tuple[Violation, ...]
    events: int
    sim_ms: int
    converged_after_ms: int | None
    group_epochs: int
    targets: int
    installs: int
    membership_changes: int
    revoked: int
    assigned: int
    lost: int
    moved: int
    failovers: int
    failovers_mid_rebalance: int
    messages: int
    trace: tuple[str, ...] = ()
    late_joins: int = 0
    #: Partitions taken over whose previous owner revoked them without a commit.
    handover_without_commit: int = 0
    #: Partition-ms without an owner, from the moment the group first owned every partition.
    orphan_partition_ms: int = 0
    #: Classic-protocol JoinGroups the coordinator parked (answered later through Result.joins).
    parked_joins: int = 0


class ConsumerWorld:
    """One scenario's simulation. ``run()`` once."""

    def __init__(
        self,
        scenario: Scenario,
        mode: str,
        settings: ConsumerSettings | None = None,
        *,
        ledger: OwnershipLedger | None = None,
    ) -> None:
        self.scenario = scenario
        self.mode = mode
        self.settings = settings or ConsumerSettings()
        self.sched: Scheduler[Item] = Scheduler()
        self.rng = random.Random(f"world-{scenario.seed}")
        self.network = Network(random.Random(f"net-{scenario.seed}"), scenario.link)
        #: Draws for the late-join fault only, so the other draws of a seed stay as they were.
        self.late_rng = random.Random(f"late-join-{scenario.seed}")
        self.late_joins = 0
        #: Member ids the coordinator re-created from a late join (see _track_ghost).
        self.ghosts: set[str] = set()
        self.late_join_fault = any(step.duplication > 0 for step in scenario.steps)
        self.assignment_interval_ms = random.Random(f"interval-{scenario.seed}").choice(
            ASSIGNMENT_INTERVALS_MS
        )
        self.counts: dict[str, int] = dict(scenario.topics)
        self.image = self._image()
        self.coordinator = self._new_coordinator()
        self.log: list[Record] = []
        self.unavailable_until: int | None = None
        self.offsets: dict[TopicPartition, int] = {}
        self.ledger = ledger or OwnershipLedger()
        self.trace = Trace(self.settings.trace_limit)
        self.checks = Checks(self)
        self.procs: dict[str, WorldProcess] = {}
        self.current: dict[str, WorldProcess] = {}
        #: Classic members' JoinGroup / SyncGroup / Heartbeat / LeaveGroup (a mixed group).
        self.desk = ClassicDesk(self)
        self.handovers = Invariants()
        self.incarnations: dict[str, int] = {}
        self.violations: list[Violation] = []
        self.events = 0
        self.failovers = 0
        self.failovers_mid_rebalance = 0
        self.installs = 0
        self.converged_at: int | None = None
        self._coord_token: int | None = None
        self._coord_at: int | None = None
        self._failover_armed: tuple[int, int] | None = None
        self._mark: tuple[int, Callable[[], None]] | None = None
        builder = TopologyBuilder("sim")
        for i, (topic, _) in enumerate(scenario.topics):
            builder.stream(topic).store(f"store{i}")
        self.topology = builder.build()
        #: The topology's tasks at the last partition counts (rebuilt only when a topic grew).
        self._tables = LastTaskTable(self.topology)
        self.ledger.set_partitions(self.existing(), 0)

    @property
    def now(self) -> int:
        return self.sched.now_ms

    @property
    def available(self) -> bool:
        return self.unavailable_until is None

    def group(self) -> Any:
        return self.coordinator.group(self.settings.group_id)

    # -- the run --------------------------------------------------------------------------

    def run(self) -> ConsumerRunResult:
        for step in self.scenario.steps:
            self.sched.schedule(step.at_ms, StepDue(step=step))
        quiet = self.scenario.quiet_ms
        deadline = quiet + self.settings.convergence_bound_ms
        while self.events < self.settings.max_events:
            if self.violations and self.settings.stop_on_violation:
                break
            if self.now >= quiet and self._converged():
                break
            nxt = self.sched.peek_time()
            if nxt is None or nxt > deadline:
                self.sched.clock.advance_to(max(self.now, quiet))
                self._converged()
                break
            item = self.sched.pop()
            assert item is not None
            if self._mark is not None and item.time_ms >= self._mark[0]:
                see, self._mark = self._mark[1], None
                see()
            self.events += 1
            self._dispatch(item.item)
            self.checks.after_event()
            if not self.ledger.measuring and self.ledger.all_owned() and self.anyone_alive():
                self.ledger.start_measuring(self.now)
            if self._failover_armed is not None:
                self._maybe_failover()
        else:
            self.violate("event-budget", f"more than {self.settings.max_events} events")
        if not self.violations and self.converged_at is None:
            gaps = self.checks.convergence_gaps()
            self.violate(
                "convergence",
                f"not converged {self.settings.convergence_bound_ms} ms after the last step: "
                + "; ".join(gaps[:6]),
            )
        return self.result()

    def mark(self, at_ms: int, see: Callable[[], None]) -> None:
        """Call ``see`` once, before the first event at or after ``at_ms`` (a reading of the
        world there, e.g. a drill's start; nothing simulated changes)."""
        self._mark = (at_ms, see)

    def _converged(self) -> bool:
        if not self.available or self._failover_armed is not None or self.network.faults_active(self.now):
            return False
        if not self.checks.converged() or any(p.paused for p in self.live()):
            return False
        self.converged_at = self.now
        return True

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
        elif isinstance(item, FailoverEnd):
            self._failover_end()
        elif isinstance(item, FailoverDue):
            self._maybe_failover()
        else:
            self._coord_at = self._coord_token = None
            if self.available:
                # GroupCoordinator.poll, one timer write at a time, each checked as it is applied
                for key in self.coordinator.expired_timers(self.now):
                    self.write(self.coordinator.on_timer(key, self.now))
            self._rearm_coordinator()

    # -- the coordinator ----------------------------------------------------------------------

    def _image(self) -> MetadataImage:
        return MetadataImage(
            tuple(
                TopicMetadata(topic_id=topic_id(t), name=t, num_partitions=n) for t, n in self.counts.items()
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

    def _at_coordinator(self, item: ToCoordinator) -> None:
        proc = self.procs.get(item.conn)
        if proc is None or not self.network.arrives(proc.name, self.now):
            return
        late = " (late copy)" if item.late else ""
        self.trace.add(self.now, f"{item.conn} -> {describe(item.request)}{late}")
        request = item.request
        group = self.group()
        member_id = request.member_id if isinstance(request, ConsumerGroupHeartbeatRequest) else None
        known = member_id is not None and group is not None and group.member(member_id) is not None
        if isinstance(request, ClassicRequest):
            answer = self.desk.serve(item.conn, item.request_id, request)
            if answer is not None and not item.late:
                self.reply(item.conn, item.request_id, answer)
            self._rearm_coordinator()
            return
        response = self._serve(request)
        if member_id is not None:
            self._track_ghost(member_id, known, late=item.late, response=response)
        if not item.late:
            self.reply(item.conn, item.request_id, response)
        self._rearm_coordinator()

    def reply(self, conn: str, request_id: int, response: MemberResponse | ClassicResponse) -> None:
        """The coordinator answers the request ``request_id`` of connection ``conn``."""
        proc = self.procs.get(conn)
        if proc is None or not proc.alive:
            return
        for at in self.network.transmit(proc.name, "down", self.now):
            self.sched.schedule(at, ToMember(conn=conn, request_id=request_id, response=response))

    def _track_ghost(self, member_id: str, known: bool, *, late: bool, response: MemberResponse) -> None:
        """A late join whose member had been removed meanwhile (its session expired, it was
        fenced) makes the coordinator create the member anew: a ghost, whose id the process
        shares but whose membership it never saw (the process may be a paused zombie still
        holding what it owned). Until the process itself is answered by the coordinator again,
        it is not counted as that member (``Checks`` reads :attr:`ghosts`)."""
        group = self.group()
        if late and not known and group is not None and group.member(member_id) is not None:
            self.ghosts.add(member_id)
            self.trace.add(self.now, f"{member_id} re-created by a late join (a ghost)")
        elif not late and isinstance(response, ConsumerGroupHeartbeatResponse) and not response.error:
            self.ghosts.discard(member_id)

    def _serve(self, request: Request | OffsetCommitRequest) -> Any:
        down = KafkaErrorCode.NOT_COORDINATOR
        c = self.coordinator
        if isinstance(request, OffsetCommitRequest):
            if not self.available:
                return OffsetCommitResponse(errors=tuple((o.partition, down) for o in request.offsets))
            return self._commit(request)
        if isinstance(request, ConsumerGroupHeartbeatRequest):
            if not self.available:
                return ConsumerGroupHeartbeatResponse(error=down, member_epoch=0, heartbeat_interval_ms=0)
            response: MemberResponse = self.write(c.heartbeat(request, self.now, client_id=request.member_id))
            return response
        if isinstance(request, ConsumerGroupPrepareAssignmentRequest):
            if not self.available:
                return ConsumerGroupPrepareAssignmentResponse(error=down)
            prepared: ConsumerGroupPrepareAssignmentResponse = self.write(
                c.prepare_assignment(request, self.now)
            )
            return prepared
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

    def _rearm_coordinator(self) -> None:
        deadline = self.coordinator.next_deadline_ms() if self.available else None
        at = None if deadline is None else max(deadline, self.now)
        if at == self._coord_at and self._coord_token is not None:
            return
        if self._coord_token is not None:
            self.sched.cancel(self._coord_token)
        self._coord_at = at
        self._coord_token = None if at is None else self.sched.schedule(at, CoordinatorWake())

    def _maybe_failover(self) -> None:
        armed = self._failover_armed
        group = self.group()
        rebalancing = group is not None and group.state.value not in ("Stable", "Empty")
        if armed is not None and (rebalancing or self.now >= armed[1]):
            self._failover_armed = None
            self._failover_start(armed[0])

    def _failover_start(self, duration_ms: int) -> None:
        until = self.now + duration_ms
        if self.unavailable_until is None:
            self.failovers += 1
            group = self.group()
            if group is not None and group.state.value not in ("Stable", "Empty"):
                self.failovers_mid_rebalance += 1
        self.unavailable_until = max(self.unavailable_until or 0, until)
        self.desk.unload()
        self.sched.schedule(until, FailoverEnd())
        self._rearm_coordinator()

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
        self.trace.add(self.now, f"coordinator loaded {len(self.log)} records")
        self._rearm_coordinator()

    # -- members ---------------------------------------------------------------------------

    def _start(self, name: str, static: bool, step: Step | None = None) -> None:
        incarnation = self.incarnations.get(name, -1) + 1
        self.incarnations[name] = incarnation
        t = self.scenario.timeouts
        if step is not None and step.group_protocol == "classic":
            self._start_classic(name, incarnation, static, step.assignors or ("cooperative_sticky",))
            return
        common: dict[str, Any] = {
            "group_id": self.settings.group_id,
            "member_id": f"{name}-{incarnation}",
            "topics": tuple(self.counts),
            "group_instance_id": name if static else None,
            "rebalance_timeout_ms": t.rebalance_ms,
            "session_timeout_ms": self.settings.session_timeout_ms,
            "heartbeat_interval_ms": t.heartbeat_ms,
            "request_timeout_ms": t.request_ms,
            "retry_backoff_ms": t.retry_backoff_ms,
        }
        if self.mode == CLIENT:
            assignor = StreamsPartitionAssignor(
                self.topology,
                task_assignor=HighAvailabilityTaskAssignor(),
                configs=AssignmentConfigs(num_standby_replicas=self.settings.standby_replicas),
                end_offsets=dict,
                now_ms=lambda: self.now,
            )
            data = assignor.subscription_user_data(
                process_id=uuid.uuid5(uuid.NAMESPACE_URL, f"streamtasks-sim/{name}"),
                task_offset_sums=self._state_on_disk(name),
            )
            config = ConsumerMemberConfig(
                **common,
                client_assignors=(assignor,),
                assignor_metadata={
                    assignor.name: AssignorMetadata(
                        minimum_version=MIN_SUPPORTED_VERSION,
                        maximum_version=LATEST_VERSION,
                        metadata_version=LATEST_VERSION,
                        metadata_bytes=data,
                    )
                },
            )
        else:
            named = step is not None and step.group_protocol == "consumer" and step.assignors
            server = step.assignors[0] if named and step is not None else "uniform"
            config = ConsumerMemberConfig(**common, server_assignor=server)
        self._launch(ConsumerProcess(name=name, incarnation=incarnation, config=config, now_ms=self.now))

    def _start_classic(self, name: str, incarnation: int, static: bool, assignors: tuple[str, ...]) -> None:
        """A classic-protocol member (the real classic member machine) in the consumer group.

        ``lose_on_missed_generation`` is off: its generation is its member epoch, which moves
        with the group epoch, so a jump of more than one is no missed generation here."""
        t = self.scenario.timeouts
        config = MemberConfig(
            group_id=self.settings.group_id,
            topics=tuple(self.counts),
            assignors=tuple(make_assignor(n) for n in assignors),
            group_instance_id=name if static else None,
            session_timeout_ms=self.settings.session_timeout_ms,
            rebalance_timeout_ms=t.rebalance_ms,
            heartbeat_interval_ms=t.heartbeat_ms,
            request_timeout_ms=t.request_ms,
            retry_backoff_ms=t.retry_backoff_ms,
            followup_heartbeat_ms=t.followup_heartbeat_ms,
            lose_on_missed_generation=False,
        )
        self._launch(ClassicProcess(name=name, incarnation=incarnation, config=config, now_ms=self.now))

    def _launch(self, proc: WorldProcess) -> None:
        self.procs[proc.conn] = proc
        self.current[proc.name] = proc
        self._run(proc, self._metadata_for(proc))

    def _state_on_disk(self, name: str) -> dict[TaskId, int]:
        """A restarted process has local state for the tasks it last owned (offset sum 100).
        The task of each partition comes from a table kept per partition counts: rebuilding it
        at every process start was 62 % of a 2,000-member client-side run (docs/spark.md)."""
        task_of = self._tables.get(self.counts).partition_task
        owned = [tp for tp, owner in self.ledger.last_owner_name.items() if owner == name and tp in task_of]
        return {task_of[tp]: 100 for tp in sorted(owned)}

    def _metadata_for(self, proc: WorldProcess) -> list[AnyAction]:
        return proc.metadata(self.counts, {t: topic_id(t) for t in self.counts}, self.now)

    def _metadata(self, topic: str, partitions: int) -> None:
        if partitions <= self.counts.get(topic, 0):
            return
        self.counts[topic] = partitions
        self.image = self._image()
        self.ledger.set_partitions(self.existing(), self.now)
        if self.available:
            self.write(self.coordinator.on_metadata_image(self.image, self.now))
            self._rearm_coordinator()
        for proc in self.live():
            delay = self.rng.randint(0, self.scenario.metadata_refresh_ms)
            self.sched.schedule(self.now + delay, ProcessItem(kind="metadata", conn=proc.conn))

    def _apply(self, step: Step) -> None:
        proc = self.current.get(step.member)
        live = proc if proc is not None and proc.alive else None
        op = step.op
        if op in ("start", "restart"):
            if live is None:
                self._start(step.member, step.static, step)
        elif op == "metadata":
            self._metadata(step.topic, step.partitions)
        elif op == "failover":
            # mid-rebalance: wait (up to FAILOVER_WAIT_MS) until the group is not stable
            self._failover_armed = (step.duration_ms, self.now + FAILOVER_WAIT_MS)
            self.sched.schedule(self.now + FAILOVER_WAIT_MS, FailoverDue())
            self._maybe_failover()
        elif op == "degrade":
            link = self.scenario.link
            profile = LinkProfile(
                min_delay_ms=link.min_delay_ms,
                max_delay_ms=link.max_delay_ms,
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
                at_ms=0,
                op="restart",
                member=step.member,
                static=live.is_static,
                assignors=step.assignors,
                group_protocol=step.group_protocol or live.group_protocol,
            )
            self.sched.schedule(self.now + step.duration_ms, StepDue(step=again))
        elif live.paused:
            live.deferred.append(DeferredInput(kind="step", payload=step))
        elif live.leaving and op in ("leave", "enforce"):
            return
        elif op == "leave":
            live.leaving = True
            self._run(live, live.leave(self.now))
        elif op == "enforce":
            took = live.enforce(self.now)
            self.trace.add(self.now, f"{live.conn} enforce_rebalance -> {took}")
            self._rearm(live)
        elif op == "pause":
            live.paused_until = self.now + step.duration_ms
            if live.wake_token is not None:
                self.sched.cancel(live.wake_token)
                live.wake_token = live.wake_at = None
            self.sched.schedule(live.paused_until, ProcessItem(kind="resume", conn=live.conn))

    def _at_member(self, item: ToMember) -> None:
        proc = self.procs.get(item.conn)
        if proc is None or not proc.alive or not self.network.arrives(proc.name, self.now):
            return
        if proc.paused:
            proc.deferred.append(DeferredInput(kind="response", payload=item))
            return
        self._receive(proc, item)

    def _receive(self, proc: WorldProcess, item: ToMember) -> None:
        response = item.response
        self.trace.add(self.now, f"{proc.conn} <- {describe(response)}")
        if isinstance(response, OffsetCommitResponse):
            sent = proc.pending_commits.pop(item.request_id, {})
            for tp, error in response.errors:
                if error is KafkaErrorCode.NONE and tp in sent:
                    proc.committed[tp] = sent[tp]
        self._run(proc, proc.respond(item.request_id, response, self.now))

    def _process_item(self, item: ProcessItem) -> None:
        proc = self.procs.get(item.conn)
        if proc is None or not proc.alive:
            return
        if item.kind == "resume":
            if proc.paused_until is not None and self.now >= proc.paused_until:
                self._resume(proc)
            return
        if proc.paused:
            if item.kind != "wake":
                proc.deferred.append(DeferredInput(kind=item.kind, payload=item))
            return
        if item.kind == "wake":
            proc.wake_token = proc.wake_at = None
            if self.now == proc.last_wake_ms:
                proc.same_ms_wakes += 1
                if proc.same_ms_wakes > 1_000:
                    self.violate("livelock", f"{proc.conn} keeps asking to be polled at {self.now} ms")
                    return
            else:
                proc.same_ms_wakes = 0
            proc.last_wake_ms = self.now
            self._run(proc, proc.poll(self.now))
        elif item.kind == "lookup":
            if self.available and not self.network.is_cut(proc.name, self.now):
                self._run(proc, proc.found(item.request_id, self.now))
            else:
                cut = self.network.is_cut(proc.name, self.now)
                error = KafkaErrorCode.REQUEST_TIMED_OUT if cut else KafkaErrorCode.COORDINATOR_NOT_AVAILABLE
                self._run(proc, proc.lookup_failed(item.request_id, error, self.now))
        else:
            self._run(proc, self._metadata_for(proc))

    def _run(self, proc: WorldProcess, actions: list[AnyAction]) -> None:
        self._execute(proc, actions)
        self._rearm(proc)

    def _execute(self, proc: WorldProcess, actions: list[AnyAction]) -> None:
        for action in actions:
            if isinstance(action, (SendRequest, ClassicSendRequest)):
                self._send(proc, action.request_id, action.request)
            elif isinstance(action, CommitOffsets):
                offsets = self._positions(proc, action.partitions)
                proc.pending_commits[action.request_id] = offsets
                self._send(proc, action.request_id, action.to_request(offsets))
            elif isinstance(action, InvokeListener):
                self._listener(proc, action)
            elif isinstance(action, AssignmentChanged):
                self.ledger.set_generation(proc.conn, action.generation)
            elif isinstance(action, FindCoordinator):
                cut = self.network.is_cut(proc.name, self.now)
                delay = self.scenario.timeouts.request_ms if cut else self.network.round_trip_ms(self.now)
                self.sched.schedule(
                    self.now + delay, ProcessItem(kind="lookup", conn=proc.conn, request_id=action.request_id)
                )
            elif isinstance(action, ErrorReported):
                self.trace.add(
                    self.now, f"{proc.conn} error{' (fatal)' if action.fatal else ''}: {action.reason}"
                )
        self.checks.after_actions(proc)
        if proc.done and proc.alive:
            self._stop(proc, ReleaseKind.CLOSED)

    def _listener(self, proc: WorldProcess, action: InvokeListener) -> None:
        parts = action.partitions
        self.trace.add(
            self.now,
            f"{proc.conn} {action.kind.value}({describe_partitions(parts)}) epoch {action.generation}",
        )
        if action.kind is ListenerKind.ASSIGNED:
            starts = {tp: self.offsets[tp] for tp in parts if tp in self.offsets}
            self.collect(self.handovers.handover(self.now, proc.conn, self.ledger, parts, starts))
            for tp in parts:
                proc.committed.pop(tp, None)
            self.ledger.acquire(
                proc.conn,
                name=proc.name,
                partitions=parts,
                now_ms=self.now,
                generation=action.generation,
                start_offsets=starts,
            )
        elif action.kind is ListenerKind.REVOKED:
            kind = ReleaseKind.LEFT if proc.leaving else ReleaseKind.REVOKED
            self.ledger.release(proc.conn, parts, self.now, kind, committed=proc.committed)
        else:
            self.ledger.release(proc.conn, parts, self.now, ReleaseKind.LOST)

    def _positions(
        self, proc: WorldProcess, partitions: tuple[TopicPartition, ...]
    ) -> dict[TopicPartition, int]:
        out = {}
        for tp in partitions:
            holding = self.ledger.holding(proc.conn, tp)
            if holding is not None:
                out[tp] = (
                    holding.start_offset + (self.now - holding.since_ms) // self.settings.record_interval_ms
                )
        return out

    def _send(
        self, proc: WorldProcess, request_id: int, request: Request | OffsetCommitRequest | ClassicRequest
    ) -> None:
        for at in self.network.transmit(proc.name, "up", self.now, type(request).__name__):
            self.sched.schedule(at, ToCoordinator(conn=proc.conn, request_id=request_id, request=request))
        self._maybe_late_join(proc, request_id, request)

    def _maybe_late_join(
        self, proc: WorldProcess, request_id: int, request: Request | OffsetCommitRequest | ClassicRequest
    ) -> None:
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
        self.sched.schedule(
            self.now + self.late_rng.randint(200, 8_000),
            ToCoordinator(conn=proc.conn, request_id=request_id, request=request, late=True),
        )

    def _rearm(self, proc: WorldProcess) -> None:
        if not proc.alive or proc.paused:
            return
        deadline = proc.next_deadline_ms()
        at = None if deadline is None else max(deadline, self.now)
        if at == proc.wake_at and proc.wake_token is not None:
            return
        if proc.wake_token is not None:
            self.sched.cancel(proc.wake_token)
        proc.wake_at = at
        proc.wake_token = (
            None if at is None else self.sched.schedule(at, ProcessItem(kind="wake", conn=proc.conn))
        )

    def _stop(self, proc: WorldProcess, kind: ReleaseKind) -> None:
        proc.alive = False
        proc.deferred.clear()
        if proc.wake_token is not None:
            self.sched.cancel(proc.wake_token)
            proc.wake_token = proc.wake_at = None
        released = self.ledger.release_all(proc.conn, self.now, kind)
        self.trace.add(
            self.now, f"{proc.conn} stopped ({kind.value}; dropped {describe_partitions(released)})"
        )

    def _resume(self, proc: WorldProcess) -> None:
        proc.paused_until = None
        self.trace.add(self.now, f"{proc.conn} resumed")
        deferred, proc.deferred = proc.deferred, []
        for item in deferred:
            if not proc.alive:
                return
            if item.kind == "response" and isinstance(item.payload, ToMember):
                self._receive(proc, item.payload)
            elif item.kind == "step" and isinstance(item.payload, Step):
                self._apply(item.payload)
            elif isinstance(item.payload, ProcessItem):
                self._process_item(item.payload)
        if proc.alive:
            self._run(proc, proc.poll(self.now))

    # -- reading ---------------------------------------------------------------------------

    def existing(self) -> frozenset[TopicPartition]:
        return frozenset(TopicPartition(t, p) for t, n in self.counts.items() for p in range(n))

    def live(self) -> list[WorldProcess]:
        return [p for p in self.current.values() if p.alive]

    def anyone_alive(self) -> bool:
        """``bool(live())`` without the list (asked after every event)."""
        return any(p.alive for p in self.current.values())

    def violate(self, invariant: str, detail: str) -> None:
        self.collect([Violation(invariant=invariant, time_ms=self.now, detail=detail)])

    def collect(self, found: list[Violation]) -> None:
        for v in found:
            self.violations.append(v)
            self.trace.add(v.time_ms, f"VIOLATION {v}")

    def result(self) -> ConsumerRunResult:
        group = self.group()
        quiet = self.scenario.quiet_ms
        return ConsumerRunResult(
            seed=self.scenario.seed,
            mode=self.mode,
            violations=tuple(self.violations),
            events=self.events,
            sim_ms=self.now,
            converged_after_ms=None if self.converged_at is None else max(self.converged_at - quiet, 0),
            group_epochs=0 if group is None else group.group_epoch,
            targets=self.checks.targets,
            installs=self.installs,
            membership_changes=self.scenario.membership_changes(),
            revoked=self.ledger.revoked,
            assigned=self.ledger.assigned,
            lost=self.ledger.lost,
            moved=self.ledger.moved,
            failovers=self.failovers,
            failovers_mid_rebalance=self.failovers_mid_rebalance,
            messages=self.network.stats.sent,
            trace=tuple(self.trace.lines()) if self.violations else (),
            late_joins=self.late_joins,
            handover_without_commit=self.handovers.handover_without_commit,
            orphan_partition_ms=self.ledger.orphan_total_ms(self.now),
            parked_joins=self.desk.parked,
        )


def describe(message: object) -> str:
    name = type(message).__name__.replace("ConsumerGroup", "")
    fields = []
    for attr in (
        "error",
        "member_id",
        "member_epoch",
        "generation_id",
        "group_epoch",
        "should_compute_assignment",
    ):
        value = getattr(message, attr, None)
        if value is None or value is False or value == "":
            continue
        if attr == "error":
            value = getattr(value, "name", value)
            if value == "NONE":
                continue
        fields.append(f"{attr}={value}")
    assignment = getattr(message, "assignment", None)
    if assignment is not None and not isinstance(assignment, bytes):
        fields.append(
            f"assigned={[(str(t.topic_id)[:4], t.partitions) for t in assignment.topic_partitions]}"
        )
    owned = getattr(message, "topic_partitions", None)
    if owned is not None and isinstance(message, ConsumerGroupHeartbeatRequest):
        fields.append(f"owned={[(str(t.topic_id)[:4], t.partitions) for t in owned]}")
    return f"{name}({', '.join(fields)})"
