"""A model of Apache Kafka's classic group coordinator, answering decoded requests.

It follows the classic-group handling of Kafka's group-coordinator module (JoinGroup,
SyncGroup, Heartbeat, LeaveGroup, OffsetCommit validation, the join barrier, pending-sync
expiry, heartbeat expiry, the initial rebalance delay, static member replacement and KIP-814's
SkipAssignment), written as a sans-IO object: requests go in with the time, responses come
out, and parked requests (JoinGroup, SyncGroup) are answered later from :meth:`poll` or from
another member's request. Simplifications are listed in docs/simulation.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from streamtasks.protocol.classic_group import (
    UNKNOWN_MEMBER_ID,
    DescribedMember,
    DescribeGroupRequest,
    DescribeGroupResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    LeaveGroupRequest,
    LeaveGroupResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from streamtasks.protocol.errors import KafkaErrorCode
from streamtasks.sim.coordinator_base import (
    AcceptedCommit,
    CoordinatorConfig,
    CoordinatorState,
    Reply,
    Request,
    Response,
    error_response,
    inconsistent,
    join_error,
)
from streamtasks.sim.group_model import GroupModel, GroupState, ReplyTo
from streamtasks.sim.join_phase import JoinPhase
from topology.ids import TopicPartition

__all__ = [
    "AcceptedCommit",
    "ClassicGroupCoordinator",
    "CoordinatorConfig",
    "Reply",
    "Request",
    "Response",
]

E = KafkaErrorCode


class ClassicGroupCoordinator:
    """One classic group on one coordinator. Not thread-safe; time is passed in.

    Its state is one :class:`CoordinatorState`, shared with the :class:`JoinPhase` that answers
    JoinGroup and runs the join barrier; this class answers the other requests."""

    __slots__ = ("_join", "_s")

    def __init__(self, group_id: str, config: CoordinatorConfig | None = None) -> None:
        self._s = CoordinatorState(group_id, config)
        self._join = JoinPhase(self._s)

    # ------------------------------------------------------------------ read-only view

    @property
    def group_id(self) -> str:
        return self._s.group_id

    @property
    def config(self) -> CoordinatorConfig:
        return self._s.config

    @property
    def group(self) -> GroupModel:
        return self._s.group

    @property
    def offsets(self) -> Mapping[TopicPartition, AcceptedCommit]:
        return self._s.offsets

    @property
    def notes(self) -> Sequence[tuple[int, str]]:
        return self._s.notes

    @property
    def rebalances(self) -> int:
        """Generations completed with at least one member."""
        return self._s.rebalances

    @property
    def available(self) -> bool:
        return self._s.available

    @property
    def generation(self) -> int:
        return self._s.group.generation

    @property
    def state(self) -> GroupState:
        return self._s.group.state

    # ------------------------------------------------------------------ entry points

    def next_deadline_ms(self) -> int | None:
        return self._s.next_deadline_ms()

    def poll(self, now_ms: int) -> list[Reply]:
        """Fire every timer due at ``now_ms``; returns the responses that became ready."""
        self._begin(now_ms)
        return self._s.finish()

    def handle(self, conn: str, request_id: int, request: Request, now_ms: int) -> list[Reply]:
        """Take one request from process ``conn``; returns every response now ready (the
        request's own, unless it is parked, and any it released)."""
        self._begin(now_ms)
        to = ReplyTo(conn=conn, request_id=request_id)
        if not self._s.available:
            self._s.reply(to, error_response(request, E.NOT_COORDINATOR))
        elif isinstance(request, JoinGroupRequest):
            self._join.join(to, request)
        elif isinstance(request, SyncGroupRequest):
            self._sync(to, request)
        elif isinstance(request, HeartbeatRequest):
            self._heartbeat(to, request)
        elif isinstance(request, LeaveGroupRequest):
            self._leave(to, request)
        elif isinstance(request, DescribeGroupRequest):
            self._s.reply(to, self._describe())
        else:
            self._commit(to, request)
        return self._s.finish()

    def fail_over(
        self, now_ms: int, down_for_ms: int, error: KafkaErrorCode = E.NOT_COORDINATOR
    ) -> list[Reply]:
        """The coordinator moves: parked requests fail with ``error``, every request until
        ``now_ms + down_for_ms`` with NOT_COORDINATOR, then the group is reloaded from its last
        persisted state (Stable at that generation, or Empty)."""
        self._begin(now_ms)
        self._s.go_down(now_ms, down_for_ms, error)
        return self._s.finish()

    def member_ids(self) -> frozenset[str]:
        return frozenset(self._s.group.members)

    def drain_accepted(self) -> list[AcceptedCommit]:
        return self._s.drain_accepted()

    def _begin(self, now_ms: int) -> None:
        self._s.begin(now_ms)
        while (due := self._s.pop_due()) is not None:
            kind, name, args = due
            if kind == "join":
                if args:
                    self._join.initial_delay_expired(args[0], args[1])
                else:
                    self._join.complete_join()
            elif kind == "sync":
                self._join.expire_pending_sync(args[0])
            else:
                self._join.expire_heartbeat(name)

    # ------------------------------------------------------------------ the other requests

    def _sync(self, to: ReplyTo, req: SyncGroupRequest) -> None:
        g = self._s.group
        error = self._s.validate_member(req.member_id, req.group_instance_id)
        if error is None and req.generation_id != g.generation:
            error = E.ILLEGAL_GENERATION
        if error is None and (
            inconsistent(req.protocol_type, g.protocol_type)
            or inconsistent(req.protocol_name, g.protocol_name)
        ):
            error = E.INCONSISTENT_GROUP_PROTOCOL
        if error is not None:
            self._s.reply(to, SyncGroupResponse(error=error))
        elif g.state is GroupState.PREPARING_REBALANCE:
            self._s.reply(to, SyncGroupResponse(error=E.REBALANCE_IN_PROGRESS))
        elif g.state is GroupState.COMPLETING_REBALANCE:
            member = g.members[req.member_id]
            member.awaiting_sync = to
            self._s.synced(req.member_id)
            if g.is_leader(req.member_id):
                given = {a.member_id: a.assignment for a in req.assignments}
                for m in g.members.values():
                    m.assignment = given.get(m.member_id, b"")
                self._s.propagate_assignment(E.NONE)
                g.transition(GroupState.STABLE)
                self._s.persist()
                self._s.note(f"generation {g.generation} stable")
        else:
            self._s.synced(req.member_id)
            member = g.members[req.member_id]
            self._s.reply(
                to,
                SyncGroupResponse(
                    error=E.NONE,
                    protocol_type=g.protocol_type,
                    protocol_name=g.protocol_name,
                    assignment=member.assignment,
                ),
            )

    def _heartbeat(self, to: ReplyTo, req: HeartbeatRequest) -> None:
        g = self._s.group
        error = self._s.validate_member(req.member_id, req.group_instance_id)
        if error is None and req.generation_id != g.generation:
            error = E.ILLEGAL_GENERATION
        if error is None:
            member = g.members[req.member_id]
            self._s.schedule("hb", member.member_id, member.session_timeout_ms)
            if g.state is GroupState.PREPARING_REBALANCE:
                error = E.REBALANCE_IN_PROGRESS
        self._s.reply(to, HeartbeatResponse(error=error or E.NONE))

    def _describe(self) -> DescribeGroupResponse:
        """Kafka's classic group summary: members with their assignment only when Stable."""
        g = self._s.group
        stable = g.state is GroupState.STABLE
        return DescribeGroupResponse(
            error=E.NONE,
            group_state=g.state.value,
            protocol_type=g.protocol_type or "",
            protocol_name=(g.protocol_name or "") if stable else "",
            members=tuple(
                DescribedMember(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    assignment=m.assignment if stable else b"",
                )
                for _, m in sorted(g.members.items())
            ),
        )

    def _leave(self, to: ReplyTo, req: LeaveGroupRequest) -> None:
        g = self._s.group
        error: KafkaErrorCode | None = None
        if req.member_id == UNKNOWN_MEMBER_ID:
            static_id = g.static_member_id(req.group_instance_id) if req.group_instance_id else None
            if static_id is None:
                error = E.UNKNOWN_MEMBER_ID
            else:
                self._remove_current_member(static_id)
        elif req.member_id in g.pending_join:
            g.remove(req.member_id)
            self._s.cancel("hb", req.member_id)
        else:
            error = self._s.validate_member(req.member_id, req.group_instance_id)
            if error is None:
                self._remove_current_member(req.member_id)
        self._s.reply(to, LeaveGroupResponse(error=error or E.NONE))
        if error is None:
            if g.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
                self._join.maybe_prepare_rebalance_or_complete_join()
            elif g.state is GroupState.PREPARING_REBALANCE:
                self._join.maybe_complete_join_phase()

    def _remove_current_member(self, member_id: str) -> None:
        member = self._s.group.members[member_id]
        self._s.cancel("hb", member_id)
        if member.awaiting_join is not None:
            self._s.reply(member.awaiting_join, join_error(UNKNOWN_MEMBER_ID, E.UNKNOWN_MEMBER_ID))
            member.awaiting_join = None
        self._s.group.remove(member_id)
        self._s.note(f"member {member_id} left")

    def _commit(self, to: ReplyTo, req: OffsetCommitRequest) -> None:
        g = self._s.group
        error: KafkaErrorCode | None = None
        if req.generation_id < 0 and g.state is GroupState.EMPTY:
            error = None
        elif req.generation_id >= 0 or req.member_id or req.group_instance_id is not None:
            error = self._s.validate_member(req.member_id, req.group_instance_id)
            if error is None and req.generation_id != g.generation:
                error = E.ILLEGAL_GENERATION
        elif g.state is not GroupState.EMPTY:
            error = E.UNKNOWN_MEMBER_ID
        if error is None and g.state is GroupState.COMPLETING_REBALANCE:
            error = E.REBALANCE_IN_PROGRESS
        if error is None:
            for item in req.offsets:
                commit = AcceptedCommit(
                    partition=item.partition,
                    offset=item.offset,
                    member_id=req.member_id,
                    generation=req.generation_id,
                    conn=to.conn,
                    time_ms=self._s.now,
                )
                self._s.accept(commit)
        code = error or E.NONE
        self._s.reply(to, OffsetCommitResponse(errors=tuple((o.partition, code) for o in req.offsets)))
