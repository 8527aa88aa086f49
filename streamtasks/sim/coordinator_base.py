"""The classic group coordinator model's values and shared plumbing.

:class:`CoordinatorBase` holds one group (:mod:`streamtasks.sim.group_model`), the committed
offsets, the keyed timers and the helpers every request handler uses;
:mod:`streamtasks.sim.join_phase` adds JoinGroup and the join barrier,
:mod:`streamtasks.sim.coordinator` the other requests and the public interface.
"""

from __future__ import annotations

from dataclasses import dataclass

from streamtasks.protocol.classic_group import (
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
from streamtasks.sim.group_model import GroupModel, GroupSnapshot, GroupState, ReplyTo
from topology.ids import TopicPartition

__all__ = [
    "AcceptedCommit",
    "CoordinatorBase",
    "CoordinatorConfig",
    "Reply",
    "Request",
    "Response",
    "error_response",
    "inconsistent",
    "join_error",
]

E = KafkaErrorCode
Request = JoinGroupRequest | SyncGroupRequest | HeartbeatRequest | LeaveGroupRequest | OffsetCommitRequest
Response = (
    JoinGroupResponse | SyncGroupResponse | HeartbeatResponse | LeaveGroupResponse | OffsetCommitResponse
)


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


class CoordinatorBase:
    """State and plumbing shared by the request handlers (see ClassicGroupCoordinator)."""

    def __init__(self, group_id: str, config: CoordinatorConfig | None = None) -> None:
        self.group_id = group_id
        self.config = config or CoordinatorConfig()
        self.group = GroupModel(group_id)
        self.offsets: dict[TopicPartition, AcceptedCommit] = {}
        self.accepted: list[AcceptedCommit] = []
        self.notes: list[tuple[int, str]] = []
        self._snapshot: GroupSnapshot = self.group.snapshot()
        self._timers: dict[tuple[str, str], tuple[int, int, tuple[int, ...]]] = {}
        self._timer_seq = 0
        self._ids = 0
        self._now = 0
        self._out: list[Reply] = []
        self._down_until: int | None = None
        #: Generations completed with at least one member.
        self.rebalances = 0

    @property
    def available(self) -> bool:
        return self._down_until is None

    @property
    def generation(self) -> int:
        return self.group.generation

    @property
    def state(self) -> GroupState:
        return self.group.state

    def _finish(self) -> list[Reply]:
        out, self._out = self._out, []
        return out

    def _reply(self, to: ReplyTo, response: Response) -> None:
        self._out.append(Reply(conn=to.conn, request_id=to.request_id, response=response))

    def _note(self, text: str) -> None:
        self.notes.append((self._now, text))

    def _schedule(self, kind: str, key: str, delay_ms: int, *args: int) -> None:
        self._timer_seq += 1
        self._timers[(kind, key)] = (self._now + delay_ms, self._timer_seq, args)

    def _cancel(self, kind: str, key: str = "") -> None:
        self._timers.pop((kind, key), None)

    def _persist(self) -> None:
        self._snapshot = self.group.snapshot()

    def _new_member_id(self, prefix: str) -> str:
        self._ids += 1
        return f"{prefix}-{self._ids}"

    def _validate_member(self, member_id: str, instance_id: str | None) -> KafkaErrorCode | None:
        if instance_id is not None:
            existing = self.group.static_member_id(instance_id)
            if existing is None:
                return E.UNKNOWN_MEMBER_ID
            if existing != member_id:
                return E.FENCED_INSTANCE_ID
        if member_id not in self.group.members:
            return E.UNKNOWN_MEMBER_ID
        return None

    def _synced(self, member_id: str) -> None:
        self.group.pending_sync.pop(member_id, None)
        if not self.group.pending_sync:
            self._cancel("sync")

    def _propagate_assignment(self, error: KafkaErrorCode) -> None:
        g = self.group
        for member in g.members.values():
            if member.awaiting_sync is None:
                continue
            ok = error is E.NONE
            self._reply(
                member.awaiting_sync,
                SyncGroupResponse(
                    error=error,
                    protocol_type=g.protocol_type if ok else None,
                    protocol_name=g.protocol_name if ok else None,
                    assignment=member.assignment,
                ),
            )
            member.awaiting_sync = None
            self._schedule("hb", member.member_id, member.session_timeout_ms)


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
    return OffsetCommitResponse(errors=tuple((o.partition, error) for o in request.offsets))
