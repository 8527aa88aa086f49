"""A model of Apache Kafka's classic group coordinator, answering decoded requests.

It follows the classic-group handling of Kafka's group-coordinator module (JoinGroup,
SyncGroup, Heartbeat, LeaveGroup, OffsetCommit validation, the join barrier, pending-sync
expiry, heartbeat expiry, the initial rebalance delay, static member replacement and KIP-814's
SkipAssignment), written as a sans-IO object: requests go in with the time, responses come
out, and parked requests (JoinGroup, SyncGroup) are answered later from :meth:`poll` or from
another member's request. Simplifications are listed in docs/simulation.md.
"""

from __future__ import annotations

from streamtasks.protocol.classic_group import (
    UNKNOWN_MEMBER_ID,
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
    Reply,
    Request,
    Response,
    error_response,
    inconsistent,
    join_error,
)
from streamtasks.sim.group_model import GroupModel, GroupState, ReplyTo
from streamtasks.sim.join_phase import JoinPhase

__all__ = [
    "AcceptedCommit",
    "ClassicGroupCoordinator",
    "CoordinatorConfig",
    "Reply",
    "Request",
    "Response",
]

E = KafkaErrorCode


class ClassicGroupCoordinator(JoinPhase):
    """One classic group on one coordinator. Not thread-safe; time is passed in."""

    def next_deadline_ms(self) -> int | None:
        if self._down_until is not None:
            return self._down_until
        return min((t[0] for t in self._timers.values()), default=None)

    def poll(self, now_ms: int) -> list[Reply]:
        """Fire every timer due at ``now_ms``; returns the responses that became ready."""
        self._begin(now_ms)
        return self._finish()

    def handle(self, conn: str, request_id: int, request: Request, now_ms: int) -> list[Reply]:
        """Take one request from process ``conn``; returns every response now ready (the
        request's own, unless it is parked, and any it released)."""
        self._begin(now_ms)
        to = ReplyTo(conn=conn, request_id=request_id)
        if self._down_until is not None:
            self._reply(to, error_response(request, E.NOT_COORDINATOR))
        elif isinstance(request, JoinGroupRequest):
            self._join(to, request)
        elif isinstance(request, SyncGroupRequest):
            self._sync(to, request)
        elif isinstance(request, HeartbeatRequest):
            self._heartbeat(to, request)
        elif isinstance(request, LeaveGroupRequest):
            self._leave(to, request)
        else:
            self._commit(to, request)
        return self._finish()

    def fail_over(self, now_ms: int, down_for_ms: int) -> list[Reply]:
        """The coordinator moves: parked requests fail with NOT_COORDINATOR, every request
        until ``now_ms + down_for_ms`` does too, then the group is reloaded from its last
        persisted state (Stable at that generation, or Empty)."""
        self._begin(now_ms)
        if self._down_until is None:
            for member in self.group.members.values():
                if member.awaiting_join is not None:
                    self._reply(member.awaiting_join, join_error(member.member_id, E.NOT_COORDINATOR))
                    member.awaiting_join = None
                if member.awaiting_sync is not None:
                    self._reply(member.awaiting_sync, SyncGroupResponse(error=E.NOT_COORDINATOR))
                    member.awaiting_sync = None
            self._timers.clear()
            self._note(f"coordinator unavailable until {now_ms + down_for_ms}")
        self._down_until = max(self._down_until or 0, now_ms + down_for_ms)
        return self._finish()

    def member_ids(self) -> frozenset[str]:
        return frozenset(self.group.members)

    def drain_accepted(self) -> list[AcceptedCommit]:
        out, self.accepted = self.accepted, []
        return out

    def _begin(self, now_ms: int) -> None:
        self._now = max(self._now, now_ms)
        self._out = []
        if self._down_until is not None and self._now >= self._down_until:
            self._recover()
        self._fire_due()

    def _fire_due(self) -> None:
        while self._timers and self._down_until is None:
            key, (deadline, _, args) = min(self._timers.items(), key=lambda kv: (kv[1][0], kv[1][1]))
            if deadline > self._now:
                return
            del self._timers[key]
            kind, name = key
            if kind == "join":
                if args:
                    self._initial_delay_expired(args[0], args[1])
                else:
                    self._complete_join()
            elif kind == "sync":
                self._expire_pending_sync(args[0])
            else:
                self._expire_heartbeat(name)

    def _recover(self) -> None:
        self._down_until = None
        self.group = GroupModel.restore(self.group_id, self._snapshot)
        for member in self.group.members.values():
            self._schedule("hb", member.member_id, member.session_timeout_ms)
        self._note(f"coordinator loaded generation {self.group.generation} ({self.group.state.value})")

    def _sync(self, to: ReplyTo, req: SyncGroupRequest) -> None:
        g = self.group
        error = self._validate_member(req.member_id, req.group_instance_id)
        if error is None and req.generation_id != g.generation:
            error = E.ILLEGAL_GENERATION
        if error is None and (
            inconsistent(req.protocol_type, g.protocol_type)
            or inconsistent(req.protocol_name, g.protocol_name)
        ):
            error = E.INCONSISTENT_GROUP_PROTOCOL
        if error is not None:
            self._reply(to, SyncGroupResponse(error=error))
        elif g.state is GroupState.PREPARING_REBALANCE:
            self._reply(to, SyncGroupResponse(error=E.REBALANCE_IN_PROGRESS))
        elif g.state is GroupState.COMPLETING_REBALANCE:
            member = g.members[req.member_id]
            member.awaiting_sync = to
            self._synced(req.member_id)
            if g.is_leader(req.member_id):
                given = {a.member_id: a.assignment for a in req.assignments}
                for m in g.members.values():
                    m.assignment = given.get(m.member_id, b"")
                self._propagate_assignment(E.NONE)
                g.transition(GroupState.STABLE)
                self._persist()
                self._note(f"generation {g.generation} stable")
        else:
            self._synced(req.member_id)
            member = g.members[req.member_id]
            self._reply(
                to,
                SyncGroupResponse(
                    error=E.NONE,
                    protocol_type=g.protocol_type,
                    protocol_name=g.protocol_name,
                    assignment=member.assignment,
                ),
            )

    def _heartbeat(self, to: ReplyTo, req: HeartbeatRequest) -> None:
        g = self.group
        error = self._validate_member(req.member_id, req.group_instance_id)
        if error is None and req.generation_id != g.generation:
            error = E.ILLEGAL_GENERATION
        if error is None:
            member = g.members[req.member_id]
            self._schedule("hb", member.member_id, member.session_timeout_ms)
            if g.state is GroupState.PREPARING_REBALANCE:
                error = E.REBALANCE_IN_PROGRESS
        self._reply(to, HeartbeatResponse(error=error or E.NONE))

    def _leave(self, to: ReplyTo, req: LeaveGroupRequest) -> None:
        g = self.group
        error: KafkaErrorCode | None = None
        if req.member_id == UNKNOWN_MEMBER_ID:
            static_id = g.static_member_id(req.group_instance_id) if req.group_instance_id else None
            if static_id is None:
                error = E.UNKNOWN_MEMBER_ID
            else:
                self._remove_current_member(static_id)
        elif req.member_id in g.pending_join:
            g.remove(req.member_id)
            self._cancel("hb", req.member_id)
        else:
            error = self._validate_member(req.member_id, req.group_instance_id)
            if error is None:
                self._remove_current_member(req.member_id)
        self._reply(to, LeaveGroupResponse(error=error or E.NONE))
        if error is None:
            if g.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
                self._maybe_prepare_rebalance_or_complete_join()
            elif g.state is GroupState.PREPARING_REBALANCE:
                self._maybe_complete_join_phase()

    def _remove_current_member(self, member_id: str) -> None:
        member = self.group.members[member_id]
        self._cancel("hb", member_id)
        if member.awaiting_join is not None:
            self._reply(member.awaiting_join, join_error(UNKNOWN_MEMBER_ID, E.UNKNOWN_MEMBER_ID))
            member.awaiting_join = None
        self.group.remove(member_id)
        self._note(f"member {member_id} left")

    def _commit(self, to: ReplyTo, req: OffsetCommitRequest) -> None:
        g = self.group
        error: KafkaErrorCode | None = None
        if req.generation_id < 0 and g.state is GroupState.EMPTY:
            error = None
        elif req.generation_id >= 0 or req.member_id or req.group_instance_id is not None:
            error = self._validate_member(req.member_id, req.group_instance_id)
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
                    time_ms=self._now,
                )
                self.offsets[item.partition] = commit
                self.accepted.append(commit)
        code = error or E.NONE
        self._reply(to, OffsetCommitResponse(errors=tuple((o.partition, code) for o in req.offsets)))
