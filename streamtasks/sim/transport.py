"""The half of the simulated world that moves messages and runs the applications.

:class:`Driver` owns the scheduler, the network, the coordinator model, the member processes
and the ownership ledger, and is the only code that changes them. It carries requests and
responses over the simulated network, wakes the member machines and the coordinator at their
deadlines, executes each member's actions the way a small consumer application would (see
docs/simulation.md), and offers the operations a scenario step needs (start, pause, leave,
enforce, fail over, grow a topic). :class:`~streamtasks.sim.world.World` holds a ``Driver``
(composition, not a base class) and adds the scenario's steps, the per-event checks and the
end-of-run result; it hands the driver the function that applies a step a paused process
deferred.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from assignors.partition.types import PartitionAssignor, RebalanceProtocol
from assignors.registry import get_partition_assignor
from streamtasks.errors import StreamTasksError
from streamtasks.membership.classic import (
    Action,
    AssignmentChanged,
    CommitOffsets,
    CoordinatorDiscovered,
    ErrorReported,
    Event,
    FindCoordinator,
    InvokeListener,
    Leave,
    ListenerKind,
    MemberState,
    MetadataUpdated,
    RequestFailed,
    ResponseReceived,
    SendRequest,
    Subscribe,
)
from streamtasks.protocol.classic_group import JoinGroupRequest, JoinGroupResponse, OffsetCommitResponse
from streamtasks.protocol.errors import KafkaErrorCode
from streamtasks.sim.apps import AppLog
from streamtasks.sim.coordinator import ClassicGroupCoordinator, CoordinatorConfig, Reply, Request, Response
from streamtasks.sim.invariants import Invariants, is_current
from streamtasks.sim.ledger import Holding, OwnershipLedger, ReleaseKind
from streamtasks.sim.network import Network
from streamtasks.sim.process import DeferredInput, SimProcess
from streamtasks.sim.scenario import Scenario, Step
from streamtasks.sim.scheduler import Scheduler
from streamtasks.sim.trace import Trace, Violation
from topology.ids import TopicPartition

__all__ = [
    "CoordinatorWake",
    "Driver",
    "Item",
    "ProcessItem",
    "StepDue",
    "ToCoordinator",
    "ToMember",
    "WorldSettings",
    "describe_message",
    "describe_partitions",
    "make_assignor",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class WorldSettings:
    group_id: str = "sim-group"
    #: The application consumes one record per this many ms of ownership.
    record_interval_ms: int = 10
    coordinator: CoordinatorConfig = field(default_factory=CoordinatorConfig)
    #: After the last step, the group must converge within this long (see docs/simulation.md).
    convergence_bound_ms: int = 120_000
    #: ... and within ``rebalances_per_member`` × live members + ``rebalance_slack`` completed
    #: rebalances (each member still (re)joining may cost its join and, COOPERATIVE, the
    #: follow-up its revocations need; the slack covers a leader's metadata rejoin).
    rebalances_per_member: int = 2
    rebalance_slack: int = 2
    max_events: int = 400_000
    trace_limit: int = 400
    #: Stop at the first violation (the batch runner does; case-study tests may not).
    stop_on_violation: bool = True


# -- scheduled items ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ToCoordinator:
    """A request arriving at the coordinator."""

    conn: str
    request_id: int
    request: Request


@dataclass(frozen=True, slots=True, kw_only=True)
class ToMember:
    """A response arriving at a process."""

    conn: str
    request_id: int
    response: Response


@dataclass(frozen=True, slots=True, kw_only=True)
class ProcessItem:
    """Something due at a process: ``wake`` (its member's deadline), ``resume`` (end of a
    pause), ``lookup`` (a FindCoordinator answer), ``metadata`` (a metadata refresh)."""

    kind: str
    conn: str
    request_id: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class StepDue:
    """A scenario step whose time has come."""

    step: Step


@dataclass(frozen=True, slots=True, kw_only=True)
class CoordinatorWake:
    """The coordinator's next timer is due."""


Item = ToCoordinator | ToMember | ProcessItem | StepDue | CoordinatorWake


class Driver:
    """The messages, processes and ledger of one simulated world; :class:`World` runs it.

    ``apply_step`` applies a scenario step; the driver calls it for steps a paused process
    deferred, when the process resumes."""

    def __init__(
        self,
        scenario: Scenario,
        settings: WorldSettings,
        apply_step: Callable[[Step], None],
        ledger: OwnershipLedger,
    ) -> None:
        self.scenario = scenario
        self.settings = settings
        self.sched: Scheduler[Item] = Scheduler()
        self.network = Network(random.Random(f"net-{scenario.seed}"), scenario.link)
        self.coordinator = ClassicGroupCoordinator(self.settings.group_id, self.settings.coordinator)
        self.ledger = ledger
        self.invariants = Invariants()
        self.trace = Trace(self.settings.trace_limit)
        self.procs: dict[str, SimProcess] = {}
        self.current: dict[str, SimProcess] = {}
        self.counts: dict[str, int] = dict(scenario.topics)
        #: ``existing()``'s answer for the counts it was built from (rebuilt when they change).
        self._existing: tuple[tuple[tuple[str, int], ...], frozenset[TopicPartition]] = ((), frozenset())
        self.violations: list[Violation] = []
        self.listener_log: list[tuple[int, str, ListenerKind, tuple[TopicPartition, ...], int]] = []
        self._apply_step = apply_step
        self._coord_token: int | None = None
        self._coord_at: int | None = None
        self._delivered: set[tuple[str, int]] = set()
        #: The topics the ledger follows (``Scenario.task_topics``; empty: every topic).
        self.task_topics = frozenset(scenario.task_topics)
        #: What the processes' applications saw per generation (``Step.app``).
        self.app_log = AppLog()
        self.ledger.set_partitions(self.existing(), 0)

    @property
    def now(self) -> int:
        return self.sched.now_ms

    def at_coordinator(self, item: ToCoordinator) -> None:
        proc = self.procs.get(item.conn)
        if proc is None or not self.network.arrives(proc.name, self.now):
            return
        self.trace.add(self.now, f"{item.conn} -> coordinator: {describe_message(item.request)}")
        self.route(self.coordinator.handle(item.conn, item.request_id, item.request, self.now))
        self.rearm_coordinator()
        key = (item.conn, item.request_id)
        duplicate = key in self._delivered
        self._delivered.add(key)
        for commit in self.coordinator.drain_accepted():
            self.collect(
                self.invariants.accepted_commit(
                    commit, self.ledger, self.procs, self.is_current, duplicate=duplicate
                )
            )

    def at_member(self, item: ToMember) -> None:
        proc = self.procs.get(item.conn)
        if proc is None or not proc.alive or not self.network.arrives(proc.name, self.now):
            return
        if proc.paused:
            proc.deferred.append(DeferredInput(kind="response", payload=item))
            return
        self._receive(proc, item)

    def _receive(self, proc: SimProcess, item: ToMember) -> None:
        response = item.response
        self.trace.add(self.now, f"{proc.conn} <- {describe_message(response)}")
        if isinstance(response, JoinGroupResponse) and response.skip_assignment:
            proc.skip_assignment_at = self.now
        if isinstance(response, OffsetCommitResponse):
            sent = proc.pending_commits.pop(item.request_id, {})
            for tp, error in response.errors:
                if error is KafkaErrorCode.NONE and tp in sent:
                    proc.committed[tp] = sent[tp]
        self.drive(proc, ResponseReceived(request_id=item.request_id, response=response))

    def process_item(self, item: ProcessItem) -> None:
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
            self._execute(proc, proc.member.poll(self.now))
            self.rearm(proc)
        elif item.kind == "lookup":
            self._lookup_done(proc, item.request_id)
        else:
            # a refresh reads the cluster's metadata as it is now (never older than before)
            self.drive(proc, MetadataUpdated(partitions_per_topic=dict(self.counts)))

    def _lookup_done(self, proc: SimProcess, request_id: int) -> None:
        if self.coordinator.available and not self.network.is_cut(proc.name, self.now):
            self.drive(proc, CoordinatorDiscovered(request_id=request_id))
        else:
            error = (
                KafkaErrorCode.REQUEST_TIMED_OUT
                if self.network.is_cut(proc.name, self.now)
                else KafkaErrorCode.COORDINATOR_NOT_AVAILABLE
            )
            self.drive(proc, RequestFailed(request_id=request_id, error=error))

    def drive(self, proc: SimProcess, event: Event) -> None:
        self._execute(proc, proc.member.handle(event, self.now))
        self.rearm(proc)

    def _execute(self, proc: SimProcess, actions: list[Action]) -> None:
        rejoin: str | None = None
        for action in actions:
            if isinstance(action, SendRequest):
                if isinstance(action.request, JoinGroupRequest) and proc.protocol is RebalanceProtocol.EAGER:
                    self.collect(self.invariants.eager_join(self.now, proc, self.ledger))
                self._send(proc, action.request_id, action.request)
            elif isinstance(action, CommitOffsets):
                offsets = self._positions(proc, action.partitions)
                proc.pending_commits[action.request_id] = offsets
                self._send(proc, action.request_id, action.to_request(offsets))
            elif isinstance(action, InvokeListener):
                self._listener(proc, action)
            elif isinstance(action, AssignmentChanged):
                self.ledger.set_generation(proc.conn, action.generation)
                if proc.app is not None:
                    protocol = proc.member.protocol_name
                    self.app_log.assigned(action.generation, protocol, proc.app.kind)
                    rejoin = proc.app.on_assignment(action, protocol) or rejoin
            elif isinstance(action, FindCoordinator):
                delay = (
                    self.scenario.timeouts.request_ms
                    if self.network.is_cut(proc.name, self.now)
                    else (self.network.round_trip_ms(self.now))
                )
                self.sched.schedule(
                    self.now + delay, ProcessItem(kind="lookup", conn=proc.conn, request_id=action.request_id)
                )
            elif isinstance(action, ErrorReported):
                self.trace.add(
                    self.now, f"{proc.conn} error{' (fatal)' if action.fatal else ''}: {action.reason}"
                )
        if rejoin is not None:
            self._enforce(proc, rejoin)
        self.collect(self.invariants.process_generation_seen(self.now, proc))
        if proc.member.state in (MemberState.CLOSED, MemberState.FAILED) and proc.alive:
            self.stop(proc, ReleaseKind.CLOSED)
        else:
            believed = proc.member.owned_partitions
            if self.task_topics:
                believed = frozenset(tp for tp in believed if tp.topic in self.task_topics)
            self.collect(self.invariants.ledger_matches(self.now, proc, self.ledger, believed))

    def _enforce(self, proc: SimProcess, reason: str) -> None:
        """The application asks for a rebalance (KIP-568), as the App does after version probing."""
        try:
            took = proc.member.enforce_rebalance(reason)
        except StreamTasksError as exc:  # leaving or closed: nothing to rejoin
            self.trace.add(self.now, f"{proc.conn} {reason} (not rejoining: {exc})")
            return
        self.trace.add(self.now, f"{proc.conn} {reason}{'' if took else ' (a rebalance is under way)'}")

    def _listener(self, proc: SimProcess, action: InvokeListener) -> None:
        parts = action.partitions
        if self.task_topics:
            parts = tuple(tp for tp in parts if tp.topic in self.task_topics)
        self.listener_log.append((self.now, proc.conn, action.kind, parts, action.generation))
        self.trace.add(
            self.now, f"{proc.conn} {action.kind.value}({describe_partitions(parts)}) gen {action.generation}"
        )
        if action.kind is ListenerKind.ASSIGNED:
            starts = {tp: c.offset for tp in parts if (c := self.coordinator.offsets.get(tp)) is not None}
            self.collect(self.invariants.handover(self.now, proc.conn, self.ledger, parts, starts))
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
        self, proc: SimProcess, partitions: tuple[TopicPartition, ...]
    ) -> dict[TopicPartition, int]:
        out = {}
        for tp in partitions:
            holding = self.ledger.holding(proc.conn, tp)
            if holding is not None:
                out[tp] = (
                    holding.start_offset + (self.now - holding.since_ms) // self.settings.record_interval_ms
                )
        return out

    def _send(self, proc: SimProcess, request_id: int, request: Request) -> None:
        for at in self.network.transmit(proc.name, "up", self.now, type(request).__name__):
            self.sched.schedule(at, ToCoordinator(conn=proc.conn, request_id=request_id, request=request))

    def route(self, replies: list[Reply]) -> None:
        for reply in replies:
            proc = self.procs.get(reply.conn)
            if proc is None or not proc.alive:
                continue
            for at in self.network.transmit(proc.name, "down", self.now):
                self.sched.schedule(
                    at, ToMember(conn=reply.conn, request_id=reply.request_id, response=reply.response)
                )

    def rearm(self, proc: SimProcess) -> None:
        if not proc.alive or proc.paused:
            return
        deadline = proc.member.next_deadline_ms()
        at = None if deadline is None else max(deadline, self.now)
        if at == proc.wake_at and proc.wake_token is not None:
            return
        if proc.wake_token is not None:
            self.sched.cancel(proc.wake_token)
        proc.wake_at = at
        proc.wake_token = (
            None if at is None else self.sched.schedule(at, ProcessItem(kind="wake", conn=proc.conn))
        )

    def rearm_coordinator(self) -> None:
        deadline = self.coordinator.next_deadline_ms()
        at = None if deadline is None else max(deadline, self.now)
        if at == self._coord_at and self._coord_token is not None:
            return
        if self._coord_token is not None:
            self.sched.cancel(self._coord_token)
        self._coord_at = at
        self._coord_token = None if at is None else self.sched.schedule(at, CoordinatorWake())

    def stop(self, proc: SimProcess, kind: ReleaseKind) -> None:
        proc.alive = False
        proc.deferred.clear()
        if proc.wake_token is not None:
            self.sched.cancel(proc.wake_token)
            proc.wake_token = proc.wake_at = None
        released = self.ledger.release_all(proc.conn, self.now, kind)
        self.trace.add(
            self.now, f"{proc.conn} stopped ({kind.value}; dropped {describe_partitions(released)})"
        )

    def _resume(self, proc: SimProcess) -> None:
        proc.paused_until = None
        self.trace.add(self.now, f"{proc.conn} resumed")
        deferred, proc.deferred = proc.deferred, []
        for item in deferred:
            if not proc.alive:
                return
            if item.kind == "response" and isinstance(item.payload, ToMember):
                self._receive(proc, item.payload)
            elif item.kind == "step" and isinstance(item.payload, Step):
                self._apply_step(item.payload)
            elif isinstance(item.payload, ProcessItem):
                self.process_item(item.payload)
        if proc.alive:
            self._execute(proc, proc.member.poll(self.now))
            self.rearm(proc)

    def is_current(self, holding: Holding) -> bool:
        proc = self.procs.get(holding.conn)
        return proc is not None and is_current(proc, self.coordinator)

    def existing(self) -> frozenset[TopicPartition]:
        counts = tuple(
            (t, n) for t, n in self.counts.items() if not self.task_topics or t in self.task_topics
        )
        if counts != self._existing[0]:
            partitions = frozenset(TopicPartition(t, p) for t, n in counts for p in range(n))
            self._existing = (counts, partitions)
        return self._existing[1]

    def live(self) -> list[SimProcess]:
        return [p for p in self.current.values() if p.alive]

    def collect(self, found: list[Violation]) -> None:
        for v in found:
            self.violations.append(v)
            self.trace.add(v.time_ms, f"VIOLATION {v}")

    def violate(self, invariant: str, detail: str) -> None:
        self.collect([Violation(invariant=invariant, time_ms=self.now, detail=detail)])

    # ------------------------------------------------------------------ what a scenario step does

    def coordinator_wake(self) -> None:
        """The coordinator's timer fired."""
        self._coord_at = self._coord_token = None
        self.route(self.coordinator.poll(self.now))
        self.rearm_coordinator()

    def fail_over(self, duration_ms: int) -> None:
        self.route(self.coordinator.fail_over(self.now, duration_ms))
        self.rearm_coordinator()

    def start(self, proc: SimProcess) -> None:
        """A new process (a member incarnation) starts: metadata first, then its subscription."""
        self.procs[proc.conn] = proc
        self.current[proc.name] = proc
        self.drive(proc, MetadataUpdated(partitions_per_topic=dict(self.counts)))
        topics = tuple(self.counts) if proc.app is None else proc.app.topics
        self.drive(proc, Subscribe(topics=topics))

    def grow_topic(self, topic: str, partitions: int) -> tuple[TopicPartition, ...]:
        """``topic`` gets ``partitions`` partitions; returns the new ones (none if it is not
        larger)."""
        if partitions <= self.counts.get(topic, 0):
            return ()
        new = tuple(TopicPartition(topic, p) for p in range(self.counts[topic], partitions))
        self.counts[topic] = partitions
        self.ledger.set_partitions(self.existing(), self.now)
        return new

    def pause(self, proc: SimProcess, duration_ms: int) -> None:
        """The application stops polling for ``duration_ms`` (a pause in progress is extended)."""
        if proc.paused_until is not None:
            proc.paused_until = max(proc.paused_until, self.now + duration_ms)
        else:
            proc.paused_until = self.now + duration_ms
            if proc.wake_token is not None:
                self.sched.cancel(proc.wake_token)
                proc.wake_token = proc.wake_at = None
        self.sched.schedule(proc.paused_until, ProcessItem(kind="resume", conn=proc.conn))

    def defer(self, proc: SimProcess, step: Step) -> None:
        """A step for a paused process waits until it resumes."""
        proc.deferred.append(DeferredInput(kind="step", payload=step))

    def leave(self, proc: SimProcess) -> None:
        proc.leaving = True
        self.drive(proc, Leave(reason="scenario"))

    def enforce(self, proc: SimProcess) -> None:
        took = proc.member.enforce_rebalance("scenario")
        self.trace.add(self.now, f"{proc.conn} enforce_rebalance -> {took}")
        self.rearm(proc)


_ASSIGNOR_TYPES: dict[str, type[PartitionAssignor]] = {}


def make_assignor(name: str) -> PartitionAssignor:
    """A fresh assignor; the registry lookup (entry points) is done once per name."""
    kind = _ASSIGNOR_TYPES.get(name)
    if kind is None:
        found = get_partition_assignor(name)
        _ASSIGNOR_TYPES[name] = type(found)
        return found
    return kind()


def describe_partitions(parts: tuple[TopicPartition, ...]) -> str:
    return ",".join(f"{tp.topic}-{tp.partition}" for tp in parts) or "-"


def describe_message(message: object) -> str:
    name = type(message).__name__
    fields = []
    for attr in ("error", "member_id", "generation_id", "leader", "skip_assignment", "group_instance_id"):
        value = getattr(message, attr, None)
        if value is None or value == "" or value is False:
            continue
        if attr == "error":
            value = getattr(value, "name", value)
            if value == "NONE":
                continue
        fields.append(f"{attr}={value}")
    members = getattr(message, "members", None)
    if members:
        fields.append(f"members={len(members)}")
    errors = getattr(message, "errors", None)
    if errors:
        codes = sorted({e.name for _, e in errors})
        fields.append(f"commit {len(errors)} partitions: {','.join(codes)}")
    return f"{name}({', '.join(fields)})"
