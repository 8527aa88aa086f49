"""The member host: the processes of one simulated world and everything that reaches them.

:class:`MemberHost` owns the scheduler, the network, the member processes, the topics' partition
counts and the ownership ledger. It delivers responses to processes (a paused process keeps
them until it resumes), wakes the member machines at their deadlines, executes each member's
actions the way a small consumer application would (requests over the network, commits of the
application's positions, listener calls applied to the ledger; see docs/simulation.md) and
offers the operations a scenario step needs (start, pause, leave, enforce, stop). It is the
same for every protocol: what differs — how a message is described, where commits start, what
is checked after a member's actions — it asks the world's side through :class:`MemberRules`.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Generic, Protocol, TypeVar

from streamtasks.errors import StreamTasksError
from streamtasks.membership.classic import (
    AssignmentChanged,
    CommitOffsets,
    ErrorReported,
    FindCoordinator,
    InvokeListener,
    ListenerKind,
    SendRequest,
)
from streamtasks.membership.consumer import SendRequest as ConsumerSendRequest
from streamtasks.membership.streams import SendRequest as StreamsSendRequest
from streamtasks.protocol.classic_group import JoinGroupResponse, OffsetCommitResponse
from streamtasks.protocol.errors import KafkaErrorCode
from streamtasks.sim.invariants import Invariants
from streamtasks.sim.items import CoordinatorWake, Item, ProcessItem, ToCoordinator, ToMember
from streamtasks.sim.ledger import OwnershipLedger, ReleaseKind
from streamtasks.sim.network import Network
from streamtasks.sim.process import DeferredInput, HostedProcess
from streamtasks.sim.scenario import Scenario, Step
from streamtasks.sim.scheduler import Scheduler
from streamtasks.sim.trace import Trace, Violation
from topology.ids import TopicPartition

__all__ = ["Alarm", "MemberHost", "MemberRules", "describe_fields", "describe_partitions"]

P = TypeVar("P", bound=HostedProcess)
P_contra = TypeVar("P_contra", bound=HostedProcess, contravariant=True)


class MemberRules(Protocol[P_contra]):
    """What the host asks the protocol's side about its members."""

    #: How a listener call names the member's generation in the trace (``gen``, ``epoch``).
    @property
    def epoch_word(self) -> str: ...

    def describe(self, message: object) -> str:
        """A request or response, as the trace shows it."""
        ...

    def coordinator_up(self) -> bool:
        """Whether a FindCoordinator finds one now."""
        ...

    def metadata_for(self, proc: P_contra) -> Sequence[object]:
        """The process reads the cluster's metadata as it is now: its member's actions."""
        ...

    def start_offsets(self, parts: tuple[TopicPartition, ...]) -> dict[TopicPartition, int]:
        """The committed offsets newly assigned partitions start from."""
        ...

    def sent(self, proc: P_contra, request_id: int, request: object) -> None:
        """A request went out (checks, faults)."""
        ...

    def assignment_changed(self, proc: P_contra, action: AssignmentChanged) -> str | None:
        """The member's assignment changed: a reason to rejoin, if the application asks."""
        ...

    def after_actions(self, proc: P_contra) -> None:
        """The per-process checks after a batch of actions (before a finished process stops)."""
        ...


class Alarm:
    """One timer in the scheduler, moved when its deadline moves (the coordinator's)."""

    def __init__(self, sched: Scheduler[Item]) -> None:
        self._sched = sched
        self._token: int | None = None
        self._at: int | None = None

    def set(self, deadline: int | None) -> None:
        at = None if deadline is None else max(deadline, self._sched.now_ms)
        if at == self._at and self._token is not None:
            return
        if self._token is not None:
            self._sched.cancel(self._token)
        self._at = at
        self._token = None if at is None else self._sched.schedule(at, CoordinatorWake())

    def fired(self) -> None:
        self._at = self._token = None


class MemberHost(Generic[P]):
    """The processes, messages and ledger of one world. ``apply_step`` applies a scenario
    step; the host calls it for steps a paused process deferred, when the process resumes."""

    def __init__(
        self,
        scenario: Scenario,
        *,
        ledger: OwnershipLedger,
        trace_limit: int,
        record_interval_ms: int,
        apply_step: Callable[[Step], None],
        task_topics: frozenset[str] = frozenset(),
    ) -> None:
        self.scenario = scenario
        self.sched: Scheduler[Item] = Scheduler()
        self.network = Network(random.Random(f"net-{scenario.seed}"), scenario.link)
        self.ledger = ledger
        self.invariants = Invariants()
        self.trace = Trace(trace_limit)
        self.procs: dict[str, P] = {}
        self.current: dict[str, P] = {}
        self.counts: dict[str, int] = dict(scenario.topics)
        self.violations: list[Violation] = []
        self.listener_log: list[tuple[int, str, ListenerKind, tuple[TopicPartition, ...], int]] = []
        #: The topics the ledger follows (``Scenario.task_topics`` in the classic world; empty:
        #: every topic).
        self.task_topics = task_topics
        self.record_interval_ms = record_interval_ms
        self._apply_step = apply_step
        self._rules: MemberRules[P] | None = None
        #: Called with a process that started or stopped (:meth:`watch_liveness`).
        self._liveness_watchers: list[Callable[[P], None]] = []
        #: Which coordinator is the group's: bumped by every ``move`` step. A process talks to
        #: the one its last successful FindCoordinator found (``found_epoch``); a request to an
        #: older one reaches a broker that is no longer the group's coordinator.
        self.coordinator_epoch = 0
        self.found_epoch: dict[str, int] = {}
        #: How a duplicated request reaches the coordinator. False: two identical copies, each
        #: answered. True (TCP's model, the streams side): a request reaches the coordinator
        #: twice only when the client saw its first attempt fail; the first copy is served, its
        #: answer lost with the connection, and the failure reaches the member (``failed``),
        #: whose machine sends the second attempt itself (docs/simulation.md).
        self.duplicate_is_retry = False
        #: ``existing()``'s answer for the counts it was built from (rebuilt when they change).
        self._existing: tuple[tuple[tuple[str, int], ...], frozenset[TopicPartition]] = ((), frozenset())
        self.ledger.set_partitions(self.existing(), 0)

    def attach(self, rules: MemberRules[P]) -> None:
        self._rules = rules

    def watch_liveness(self, see: Callable[[P], None]) -> None:
        """``see(proc)`` whenever a process starts (taking its name from an older incarnation)
        or stops: what an incremental check needs to know beyond the processes' own actions."""
        self._liveness_watchers.append(see)

    @property
    def rules(self) -> MemberRules[P]:
        assert self._rules is not None, "attach the side first"
        return self._rules

    @property
    def now(self) -> int:
        return self.sched.now_ms

    # -- arrivals ---------------------------------------------------------------------------

    def arrives(self, item: ToCoordinator) -> bool:
        """A request reaches the coordinator (its sender is known and not cut off)."""
        proc = self.procs.get(item.conn)
        return proc is not None and self.network.arrives(proc.name, self.now)

    def to_old_coordinator(self, conn: str) -> bool:
        """The process ``conn`` still talks to a coordinator the group moved away from."""
        return self.found_epoch.get(conn, 0) < self.coordinator_epoch

    def at_member(self, item: ToMember) -> None:
        proc = self.procs.get(item.conn)
        if proc is None or not proc.alive or not self.network.arrives(proc.name, self.now):
            return
        if proc.paused:
            proc.deferred.append(DeferredInput(kind="response", payload=item))
            return
        self._receive(proc, item)

    def _receive(self, proc: P, item: ToMember) -> None:
        response = item.response
        self.trace.add(self.now, f"{proc.conn} <- {self.rules.describe(response)}")
        if isinstance(response, JoinGroupResponse) and response.skip_assignment:
            proc.skip_assignment_at = self.now
        if isinstance(response, OffsetCommitResponse):
            sent = proc.pending_commits.pop(item.request_id, {})
            for tp, error in response.errors:
                if error is KafkaErrorCode.NONE and tp in sent:
                    proc.committed[tp] = sent[tp]
        self.run(proc, proc.respond(item.request_id, response, self.now))

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
            self.run(proc, proc.poll(self.now))
        elif item.kind == "lookup":
            cut = self.network.is_cut(proc.name, self.now)
            if self.rules.coordinator_up() and not cut:
                self.found_epoch[proc.conn] = self.coordinator_epoch
                self.run(proc, proc.found(item.request_id, self.now))
            else:
                error = KafkaErrorCode.REQUEST_TIMED_OUT if cut else KafkaErrorCode.COORDINATOR_NOT_AVAILABLE
                self.run(proc, proc.lookup_failed(item.request_id, error, self.now))
        elif item.kind == "failed":  # the connection broke under a request (duplicate_is_retry)
            self.trace.add(self.now, f"{proc.conn} request {item.request_id} failed: connection lost")
            self.run(proc, proc.lookup_failed(item.request_id, KafkaErrorCode.NETWORK_EXCEPTION, self.now))
        else:
            # a refresh reads the cluster's metadata as it is now (never older than before)
            self.run(proc, self.rules.metadata_for(proc))

    # -- a member's actions -------------------------------------------------------------------

    def run(self, proc: P, actions: Sequence[object]) -> None:
        self._execute(proc, actions)
        self.rearm(proc)

    def _execute(self, proc: P, actions: Sequence[object]) -> None:
        rejoin: str | None = None
        for action in actions:
            if isinstance(action, (SendRequest, ConsumerSendRequest, StreamsSendRequest)):
                self.send(proc, action.request_id, action.request)
            elif isinstance(action, CommitOffsets):
                offsets = self._positions(proc, action.partitions)
                proc.pending_commits[action.request_id] = offsets
                self.send(proc, action.request_id, action.to_request(offsets))
            elif isinstance(action, InvokeListener):
                self._listener(proc, action)
            elif isinstance(action, AssignmentChanged):
                self.ledger.set_generation(proc.conn, action.generation)
                rejoin = self.rules.assignment_changed(proc, action) or rejoin
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
        if rejoin is not None:
            self._rejoin(proc, rejoin)
        self.rules.after_actions(proc)
        if proc.done and proc.alive:
            self.stop(proc, ReleaseKind.CLOSED)

    def _rejoin(self, proc: P, reason: str) -> None:
        """The application asks for a rebalance (KIP-568), as the App does after version probing."""
        try:
            took = proc.enforce(self.now, reason)
        except StreamTasksError as exc:  # leaving or closed: nothing to rejoin
            self.trace.add(self.now, f"{proc.conn} {reason} (not rejoining: {exc})")
            return
        self.trace.add(self.now, f"{proc.conn} {reason}{'' if took else ' (a rebalance is under way)'}")

    def _listener(self, proc: P, action: InvokeListener) -> None:
        parts = action.partitions
        if self.task_topics:
            parts = tuple(tp for tp in parts if tp.topic in self.task_topics)
        self.listener_log.append((self.now, proc.conn, action.kind, parts, action.generation))
        self.trace.add(
            self.now,
            f"{proc.conn} {action.kind.value}({describe_partitions(parts)}) "
            f"{self.rules.epoch_word} {action.generation}",
        )
        if action.kind is ListenerKind.ASSIGNED:
            starts = self.rules.start_offsets(parts)
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

    def _positions(self, proc: P, partitions: tuple[TopicPartition, ...]) -> dict[TopicPartition, int]:
        """Where the application is in each partition: one record per ``record_interval_ms``
        owned, from the offset it started at."""
        out = {}
        for tp in partitions:
            holding = self.ledger.holding(proc.conn, tp)
            if holding is not None:
                out[tp] = holding.start_offset + (self.now - holding.since_ms) // self.record_interval_ms
        return out

    def send(self, proc: P, request_id: int, request: object) -> None:
        times = self.network.transmit(proc.name, "up", self.now, type(request).__name__)
        if self.duplicate_is_retry and len(times) == 2:
            served, failed = times
            self.sched.schedule(
                served, ToCoordinator(conn=proc.conn, request_id=request_id, request=request, late=True)
            )
            self.sched.schedule(failed, ProcessItem(kind="failed", conn=proc.conn, request_id=request_id))
            times = []
        for at in times:
            self.sched.schedule(at, ToCoordinator(conn=proc.conn, request_id=request_id, request=request))
        self.rules.sent(proc, request_id, request)

    def reply(self, conn: str, request_id: int, response: object) -> None:
        """The coordinator answers the request ``request_id`` of connection ``conn``."""
        proc = self.procs.get(conn)
        if proc is None or not proc.alive:
            return
        for at in self.network.transmit(proc.name, "down", self.now):
            self.sched.schedule(at, ToMember(conn=conn, request_id=request_id, response=response))

    def rearm(self, proc: P) -> None:
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

    # -- what a scenario step does to a process ----------------------------------------------

    def start(self, proc: P) -> None:
        """A new process (a member incarnation) starts: metadata first, then its subscription."""
        self.procs[proc.conn] = proc
        self.current[proc.name] = proc
        for see in self._liveness_watchers:
            see(proc)
        self.run(proc, self.rules.metadata_for(proc))
        subscription = proc.subscribe(self.counts, self.now)
        if subscription is not None:
            self.run(proc, subscription)

    def stop(self, proc: P, kind: ReleaseKind) -> None:
        proc.alive = False
        for see in self._liveness_watchers:
            see(proc)
        proc.deferred.clear()
        if proc.wake_token is not None:
            self.sched.cancel(proc.wake_token)
            proc.wake_token = proc.wake_at = None
        released = self.ledger.release_all(proc.conn, self.now, kind)
        self.trace.add(
            self.now, f"{proc.conn} stopped ({kind.value}; dropped {describe_partitions(released)})"
        )

    def pause(self, proc: P, duration_ms: int) -> None:
        """The application stops polling for ``duration_ms`` (a pause in progress is extended)."""
        if proc.paused_until is not None:
            proc.paused_until = max(proc.paused_until, self.now + duration_ms)
        else:
            proc.paused_until = self.now + duration_ms
            if proc.wake_token is not None:
                self.sched.cancel(proc.wake_token)
                proc.wake_token = proc.wake_at = None
        self.sched.schedule(proc.paused_until, ProcessItem(kind="resume", conn=proc.conn))

    def _resume(self, proc: P) -> None:
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
            self.run(proc, proc.poll(self.now))

    def defer(self, proc: P, step: Step) -> None:
        """A step for a paused process waits until it resumes."""
        proc.deferred.append(DeferredInput(kind="step", payload=step))

    def leave(self, proc: P) -> None:
        proc.leaving = True
        self.run(proc, proc.leave(self.now))

    def enforce(self, proc: P) -> None:
        took = proc.enforce(self.now)
        self.trace.add(self.now, f"{proc.conn} enforce_rebalance -> {took}")
        self.rearm(proc)

    def grow_topic(self, topic: str, partitions: int) -> tuple[TopicPartition, ...]:
        """``topic`` gets ``partitions`` partitions; returns the new ones (none if it is not
        larger)."""
        if partitions <= self.counts.get(topic, 0):
            return ()
        new = tuple(TopicPartition(topic, p) for p in range(self.counts[topic], partitions))
        self.counts[topic] = partitions
        self.ledger.set_partitions(self.existing(), self.now)
        return new

    # -- reading ----------------------------------------------------------------------------

    def existing(self) -> frozenset[TopicPartition]:
        counts = tuple(
            (t, n) for t, n in self.counts.items() if not self.task_topics or t in self.task_topics
        )
        if counts != self._existing[0]:
            partitions = frozenset(TopicPartition(t, p) for t, n in counts for p in range(n))
            self._existing = (counts, partitions)
        return self._existing[1]

    def live(self) -> list[P]:
        return [p for p in self.current.values() if p.alive]

    def anyone_alive(self) -> bool:
        """``bool(live())`` without the list (asked after every event)."""
        return any(p.alive for p in self.current.values())

    def collect(self, found: list[Violation]) -> None:
        for v in found:
            self.violations.append(v)
            self.trace.add(v.time_ms, f"VIOLATION {v}")

    def violate(self, invariant: str, detail: str) -> None:
        self.collect([Violation(invariant=invariant, time_ms=self.now, detail=detail)])


def describe_partitions(parts: tuple[TopicPartition, ...]) -> str:
    return ",".join(f"{tp.topic}-{tp.partition}" for tp in parts) or "-"


def describe_fields(message: object, attrs: tuple[str, ...]) -> list[str]:
    """``attr=value`` for each of ``attrs`` the message has set (an error only when not NONE),
    as the trace shows a request or response."""
    fields = []
    for attr in attrs:
        value = getattr(message, attr, None)
        if value is None or value is False or value == "":
            continue
        if attr == "error":
            value = getattr(value, "name", value)
            if value == "NONE":
                continue
        fields.append(f"{attr}={value}")
    return fields
