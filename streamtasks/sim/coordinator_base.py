"""The classic group coordinator model's values and shared plumbing.

:class:`CoordinatorState` is the one owner of the model's state: one group
(:mod:`streamtasks.sim.group_model`), the committed offsets, the keyed timers, the notes and the
replies ready to go out. :class:`~streamtasks.sim.join_phase.JoinPhase` (JoinGroup and the join
barrier) and :class:`~streamtasks.sim.coordinator.ClassicGroupCoordinator` (the other requests
and the public interface) both hold the same ``CoordinatorState`` and change it through its
methods: composition, not a chain of base classes.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

from streamtasks.membership.classic.events import Response as MemberResponse
from streamtasks.protocol.classic_group import (
    DescribeGroupRequest,
    DescribeGroupResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from streamtasks.protocol.errors import KafkaErrorCode
from streamtasks.sim.group_model import GroupModel, GroupSnapshot, ReplyTo
from topology.ids import TopicPartition

__all__ = [
    "AcceptedCommit",
    "CoordinatorState",
    "CoordinatorConfig",
    "Reply",
    "Request",
    "Response",
    "error_response",
    "inconsistent",
    "join_error",
]

E = KafkaErrorCode
Request = (
    JoinGroupRequest
    | SyncGroupRequest
    | HeartbeatRequest
    | LeaveGroupRequest
    | OffsetCommitRequest
    | DescribeGroupRequest
)
#: Every answer the model gives is one the classic member takes (the same union).
Response = MemberResponse


@dataclass(frozen=True, slots=True, kw_only=True)
class CoordinatorConfig:
    """Broker settings of the model (Kafka's ``group.*`` configs, same defaults)."""

    initial_rebalance_delay_ms: int = 3_000
    new_member_join_timeout_ms: int = 300_000
    min_session_timeout_ms: int = 6_000
    max_session_timeout_ms: int = 1_800_000
    #: KIP-814. False models a broker that hides leadership from a rejoining static leader.
    supports_skip_assignment: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class Reply:
    """A response for the request ``request_id`` sent by process ``conn``."""

    conn: str
    request_id: int
    response: Response


@dataclass(frozen=True, slots=True, kw_only=True)
class AcceptedCommit:
    """An offset the coordinator accepted (the simulator checks who committed what, when)."""

    partition: TopicPartition
    offset: int
    member_id: str
    generation: int
    conn: str
    time_ms: int


class CoordinatorState:
    """The one owner of the coordinator model's state: the group, the committed offsets, the
    keyed timers, the notes, the replies ready to go out and whether the coordinator is up.

    :class:`~streamtasks.sim.join_phase.JoinPhase` and
    :class:`~streamtasks.sim.coordinator.ClassicGroupCoordinator` change it only through these
    methods."""

    def __init__(self, group_id: str, config: CoordinatorConfig | None = None) -> None:
        self.group_id = group_id
        self.config = config or CoordinatorConfig()
        self.group = GroupModel(group_id)
        self.offsets: dict[TopicPartition, AcceptedCommit] = {}
        self.accepted: list[AcceptedCommit] = []
        self.notes: list[tuple[int, str]] = []
        self.now = 0
        #: Generations completed with at least one member.
        self.rebalances = 0
        self._snapshot: GroupSnapshot = self.group.snapshot()
        self._timers: dict[tuple[str, str], tuple[int, int, tuple[int, ...]]] = {}
        #: ``(deadline, seq, key)`` of every timer set, the live ones those whose seq is still
        #: the key's in ``_timers``: the earliest found in O(log n), not by a scan of every
        #: member's session timer on each event (a cost quadratic in the group size).
        self._timer_heap: list[tuple[int, int, tuple[str, str]]] = []
        self._timer_seq = 0
        self._ids = 0
        self._out: list[Reply] = []
        self._down_until: int | None = None

    @property
    def available(self) -> bool:
        return self._down_until is None

    @property
    def down_until(self) -> int | None:
        return self._down_until

    # ------------------------------------------------------------------ time and timers

    def begin(self, now_ms: int) -> None:
        """Start handling something at ``now_ms``: nothing to send yet; reload the group if the
        coordinator is back."""
        self.now = max(self.now, now_ms)
        self._out = []
        if self._down_until is not None and self.now >= self._down_until:
            self._recover()

    def finish(self) -> list[Reply]:
        out, self._out = self._out, []
        return out

    def next_deadline_ms(self) -> int | None:
        if self._down_until is not None:
            return self._down_until
        first = self._first_timer()
        return None if first is None else first[0]

    def pop_due(self) -> tuple[str, str, tuple[int, ...]] | None:
        """The earliest timer due now (removed), as ``(kind, key, args)``; ``None`` when none is
        due or the coordinator is down. Earliest: by deadline, then by when it was set."""
        if self._down_until is not None:
            return None
        first = self._first_timer()
        if first is None or first[0] > self.now:
            return None
        key = first[2]
        heapq.heappop(self._timer_heap)
        args = self._timers.pop(key)[2]
        return key[0], key[1], args

    def _first_timer(self) -> tuple[int, int, tuple[str, str]] | None:
        """The earliest live timer's heap entry (stale entries above it dropped)."""
        heap, live = self._timer_heap, self._timers
        while heap:
            timer = live.get(heap[0][2])
            if timer is not None and timer[1] == heap[0][1]:
                return heap[0]
            heapq.heappop(heap)
        return None

    def schedule(self, kind: str, key: str, delay_ms: int, *args: int) -> None:
        self._timer_seq += 1
        deadline = self.now + delay_ms
        self._timers[(kind, key)] = (deadline, self._timer_seq, args)
        heapq.heappush(self._timer_heap, (deadline, self._timer_seq, (kind, key)))
        if len(self._timer_heap) > 64 + 2 * len(self._timers):
            live = self._timers
            self._timer_heap = [e for e in self._timer_heap if live.get(e[2], (0, 0))[1] == e[1]]
            heapq.heapify(self._timer_heap)

    def cancel(self, kind: str, key: str = "") -> None:
        self._timers.pop((kind, key), None)

    def go_down(self, now_ms: int, down_for_ms: int, error: KafkaErrorCode = E.NOT_COORDINATOR) -> None:
        """The coordinator moves: parked requests fail with ``error``, timers stop, and
        requests fail until ``now_ms + down_for_ms``."""
        if self._down_until is None:
            for member in self.group.members.values():
                if member.awaiting_join is not None:
                    self.reply(member.awaiting_join, join_error(member.member_id, error))
                    member.awaiting_join = None
                if member.awaiting_sync is not None:
                    self.reply(member.awaiting_sync, SyncGroupResponse(error=error))
                    member.awaiting_sync = None
            self._timers.clear()
            self._timer_heap.clear()
            self.note(f"coordinator unavailable until {now_ms + down_for_ms}")
        self._down_until = max(self._down_until or 0, now_ms + down_for_ms)

    def _recover(self) -> None:
        self._down_until = None
        self.group = GroupModel.restore(self.group_id, self._snapshot)
        for member in self.group.members.values():
            self.schedule("hb", member.member_id, member.session_timeout_ms)
        self.note(f"coordinator loaded generation {self.group.generation} ({self.group.state.value})")

    # ------------------------------------------------------------------ what handlers record

    def reply(self, to: ReplyTo, response: Response) -> None:
        self._out.append(Reply(conn=to.conn, request_id=to.request_id, response=response))

    def note(self, text: str) -> None:
        self.notes.append((self.now, text))

    def persist(self) -> None:
        self._snapshot = self.group.snapshot()

    def new_member_id(self, prefix: str) -> str:
        self._ids += 1
        return f"{prefix}-{self._ids}"

    def count_rebalance(self) -> None:
        self.rebalances += 1

    def accept(self, commit: AcceptedCommit) -> None:
        self.offsets[commit.partition] = commit
        self.accepted.append(commit)

    def drain_accepted(self) -> list[AcceptedCommit]:
        out, self.accepted = self.accepted, []
        return out

    # ------------------------------------------------------------------ shared request rules

    def validate_member(self, member_id: str, instance_id: str | None) -> KafkaErrorCode | None:
        if instance_id is not None:
            existing = self.group.static_member_id(instance_id)
            if existing is None:
                return E.UNKNOWN_MEMBER_ID
            if existing != member_id:
                return E.FENCED_INSTANCE_ID
        if member_id not in self.group.members:
            return E.UNKNOWN_MEMBER_ID
        return None

    def synced(self, member_id: str) -> None:
        self.group.pending_sync.pop(member_id, None)
        if not self.group.pending_sync:
            self.cancel("sync")

    def propagate_assignment(self, error: KafkaErrorCode) -> None:
        g = self.group
        for member in g.members.values():
            if member.awaiting_sync is None:
                continue
            ok = error is E.NONE
            self.reply(
                member.awaiting_sync,
                SyncGroupResponse(
                    error=error,
                    protocol_type=g.protocol_type if ok else None,
                    protocol_name=g.protocol_name if ok else None,
                    assignment=member.assignment,
                ),
            )
            member.awaiting_sync = None
            self.schedule("hb", member.member_id, member.session_timeout_ms)


def inconsistent(requested: str | None, current: str | None) -> bool:
    """A SyncGroup field that names another protocol than the group's (``None``: not given)."""
    return requested is not None and current is not None and requested != current


def join_error(member_id: str, error: KafkaErrorCode) -> JoinGroupResponse:
    """A failed JoinGroup answer (Kafka echoes the member id)."""
    return JoinGroupResponse(error=error, member_id=member_id)


def error_response(request: Request, error: KafkaErrorCode) -> Response:
    """The answer of the right type for ``request`` carrying only ``error``."""
    if isinstance(request, JoinGroupRequest):
        return join_error(request.member_id, error)
    if isinstance(request, SyncGroupRequest):
        return SyncGroupResponse(error=error)
    if isinstance(request, HeartbeatRequest):
        return HeartbeatResponse(error=error)
    if isinstance(request, LeaveGroupRequest):
        return LeaveGroupResponse(error=error)
    if isinstance(request, DescribeGroupRequest):
        return DescribeGroupResponse(error=error)
    return OffsetCommitResponse(errors=tuple((o.partition, error) for o in request.offsets))
