"""JoinGroup and the join barrier of the classic group coordinator model.

New dynamic members get MEMBER_ID_REQUIRED, static members join at once or replace their old
member id (KIP-345, KIP-814's SkipAssignment for a static leader), existing members rejoin; the
barrier completes when everybody rejoined or the rebalance timeout passed, bumps the
generation, picks the protocol and answers the parked JoinGroups. Also the expiries that end
a membership: pending member, heartbeat (session) and pending SyncGroup.
"""

from __future__ import annotations

from streamtasks.protocol.classic_group import (
    UNKNOWN_MEMBER_ID,
    JoinGroupRequest,
    JoinGroupResponse,
    SyncGroupResponse,
)
from streamtasks.protocol.errors import KafkaErrorCode
from streamtasks.sim.coordinator_base import CoordinatorState, join_error
from streamtasks.sim.group_model import GroupState, MemberModel, ReplyTo

__all__ = ["JoinPhase"]

E = KafkaErrorCode


class JoinPhase:
    """The JoinGroup side of the coordinator (see the module docstring); it holds no state of
    its own and changes the :class:`CoordinatorState` it is given."""

    __slots__ = ("_s",)

    def __init__(self, state: CoordinatorState) -> None:
        self._s = state

    def join(self, to: ReplyTo, req: JoinGroupRequest) -> None:
        g = self._s.group
        cfg = self._s.config
        names = tuple(p.name for p in req.protocols)
        if not cfg.min_session_timeout_ms <= req.session_timeout_ms <= cfg.max_session_timeout_ms:
            self._s.reply(to, join_error(req.member_id, E.INVALID_SESSION_TIMEOUT))
        elif not g.supports_protocols(req.protocol_type, names):
            self._s.reply(to, join_error(req.member_id, E.INCONSISTENT_GROUP_PROTOCOL))
        elif req.member_id == UNKNOWN_MEMBER_ID:
            if req.group_instance_id is not None:
                new_id = self._s.new_member_id(req.group_instance_id)
                existing = g.static_member_id(req.group_instance_id)
                if existing is not None:
                    self._replace_static_member(to, req, existing, new_id)
                else:
                    self._add_member(to, req, new_id)
            else:
                new_id = self._s.new_member_id(to.conn)
                g.pending_join[new_id] = None
                self._s.schedule("hb", new_id, req.session_timeout_ms)
                self._s.reply(to, JoinGroupResponse(error=E.MEMBER_ID_REQUIRED, member_id=new_id))
        elif req.member_id in g.pending_join:
            self._add_member(to, req, req.member_id)
        else:
            error = self._s.validate_member(req.member_id, req.group_instance_id)
            if error is not None:
                self._s.reply(to, join_error(req.member_id, error))
                return
            member = g.members[req.member_id]
            if g.state is GroupState.PREPARING_REBALANCE:
                self._update_member(to, req, member)
            elif g.state is GroupState.COMPLETING_REBALANCE:
                if member.matches(req.protocols):
                    self._s.reply(to, self._current_join_info(member.member_id, with_members=True))
                else:
                    self._update_member(to, req, member)
            elif g.state is GroupState.STABLE:
                if g.is_leader(member.member_id) or not member.matches(req.protocols):
                    self._update_member(to, req, member)
                else:
                    self._s.reply(to, self._current_join_info(member.member_id, with_members=False))
            else:
                self._s.reply(to, join_error(req.member_id, E.UNKNOWN_MEMBER_ID))

    def _current_join_info(
        self, member_id: str, *, with_members: bool, skip: bool = False
    ) -> JoinGroupResponse:
        g = self._s.group
        leader = g.is_leader(member_id)
        return JoinGroupResponse(
            error=E.NONE,
            generation_id=g.generation,
            protocol_type=g.protocol_type,
            protocol_name=g.protocol_name,
            leader=g.leader or UNKNOWN_MEMBER_ID,
            skip_assignment=skip,
            member_id=member_id,
            members=g.join_members() if with_members and leader else (),
        )

    def _add_member(self, to: ReplyTo, req: JoinGroupRequest, member_id: str) -> None:
        g = self._s.group
        member = MemberModel(
            member_id=member_id,
            group_instance_id=req.group_instance_id,
            session_timeout_ms=req.session_timeout_ms,
            rebalance_timeout_ms=req.rebalance_timeout_ms,
            protocol_type=req.protocol_type,
            protocols=req.protocols,
        )
        member.is_new = True
        if g.state is GroupState.PREPARING_REBALANCE and g.previous_state is GroupState.EMPTY:
            g.new_member_added = True
        g.add(member, to)
        self._s.schedule("hb", member_id, self._s.config.new_member_join_timeout_ms)
        self._s.note(f"member {member_id} added")
        self.maybe_prepare_rebalance_or_complete_join()

    def _update_member(self, to: ReplyTo, req: JoinGroupRequest, member: MemberModel) -> None:
        self._s.group.update(
            member,
            protocols=req.protocols,
            rebalance_timeout_ms=req.rebalance_timeout_ms,
            session_timeout_ms=req.session_timeout_ms,
            reply_to=to,
        )
        self.maybe_prepare_rebalance_or_complete_join()

    def _replace_static_member(self, to: ReplyTo, req: JoinGroupRequest, old_id: str, new_id: str) -> None:
        g = self._s.group
        assert req.group_instance_id is not None
        old = g.members[old_id]
        if old.awaiting_join is not None:
            self._s.reply(old.awaiting_join, join_error(old_id, E.FENCED_INSTANCE_ID))
        if old.awaiting_sync is not None:
            self._s.reply(old.awaiting_sync, SyncGroupResponse(error=E.FENCED_INSTANCE_ID))
        previous_leader = g.leader
        member = g.replace_static(req.group_instance_id, old_id, new_id)
        self._s.cancel("hb", old_id)
        self._s.schedule("hb", new_id, member.session_timeout_ms)
        self._s.note(f"static member {req.group_instance_id}: {old_id} replaced by {new_id}")
        g.update(
            member,
            protocols=req.protocols,
            rebalance_timeout_ms=req.rebalance_timeout_ms,
            session_timeout_ms=req.session_timeout_ms,
            reply_to=to,
        )
        if g.state is GroupState.STABLE:
            if g.select_protocol() == g.protocol_name:
                self._s.persist()
                member.awaiting_join = None
                if self._s.config.supports_skip_assignment:
                    leader = g.is_leader(new_id)
                    self._s.reply(to, self._current_join_info(new_id, with_members=True, skip=leader))
                else:
                    self._s.reply(
                        to,
                        JoinGroupResponse(
                            error=E.NONE,
                            generation_id=g.generation,
                            protocol_type=g.protocol_type,
                            protocol_name=g.protocol_name,
                            leader=previous_leader or UNKNOWN_MEMBER_ID,
                            member_id=new_id,
                        ),
                    )
            else:
                self.maybe_prepare_rebalance_or_complete_join()
        elif g.state is GroupState.COMPLETING_REBALANCE:
            self._prepare_rebalance(f"static member {req.group_instance_id} rejoined")
        else:
            self.maybe_complete_join_phase()

    def maybe_prepare_rebalance_or_complete_join(self) -> None:
        if self._s.group.can_rebalance():
            self._prepare_rebalance("membership or metadata changed")
        else:
            self.maybe_complete_join_phase()

    def maybe_complete_join_phase(self) -> None:
        g = self._s.group
        if g.state is not GroupState.PREPARING_REBALANCE or g.previous_state is GroupState.EMPTY:
            return
        if g.has_all_joined():
            self.complete_join()

    def _prepare_rebalance(self, reason: str) -> None:
        g = self._s.group
        if g.state is GroupState.COMPLETING_REBALANCE:
            for member in g.members.values():
                member.assignment = b""
            self._s.propagate_assignment(E.REBALANCE_IN_PROGRESS)
        g.pending_sync.clear()
        self._s.cancel("sync")
        initial = g.state is GroupState.EMPTY
        if initial:
            delay = self._s.config.initial_rebalance_delay_ms
            remaining = max(g.rebalance_timeout_ms() - delay, 0)
            self._s.schedule("join", "", delay, delay, remaining)
        g.transition(GroupState.PREPARING_REBALANCE)
        self._s.note(f"preparing rebalance from generation {g.generation}: {reason}")
        if not initial:
            if g.has_all_joined():
                self.complete_join()
            else:
                self._s.schedule("join", "", g.rebalance_timeout_ms())

    def initial_delay_expired(self, delay: int, remaining: int) -> None:
        g = self._s.group
        if g.new_member_added and remaining != 0:
            g.new_member_added = False
            new_delay = min(self._s.config.initial_rebalance_delay_ms, remaining)
            self._s.schedule("join", "", new_delay, new_delay, max(remaining - delay, 0))
        else:
            self.complete_join()

    def complete_join(self) -> None:
        g = self._s.group
        self._s.cancel("join")
        for member in g.not_yet_rejoined():
            if not member.is_static:
                g.remove(member.member_id)
                self._s.cancel("hb", member.member_id)
                self._s.note(f"member {member.member_id} removed: did not rejoin in time")
        if not g.elect_joined_leader() and g.members:
            self._s.schedule("join", "", g.rebalance_timeout_ms())
            return
        g.init_next_generation()
        if g.state is GroupState.EMPTY:
            self._s.persist()
            self._s.note(f"generation {g.generation}: group is empty")
            return
        self._s.count_rebalance()
        self._s.note(
            f"generation {g.generation}: protocol {g.protocol_name}, leader {g.leader}, "
            f"members {', '.join(g.members)}"
        )
        for member in g.members.values():
            if member.awaiting_join is not None:
                self._s.reply(
                    member.awaiting_join, self._current_join_info(member.member_id, with_members=True)
                )
                member.awaiting_join = None
            self._s.schedule("hb", member.member_id, member.session_timeout_ms)
            member.is_new = False
            g.pending_sync[member.member_id] = None
        self._s.schedule("sync", "", g.rebalance_timeout_ms(), g.generation)

    def expire_pending_sync(self, generation: int) -> None:
        g = self._s.group
        if generation != g.generation or g.state not in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
            return
        if g.pending_sync:
            late = tuple(g.pending_sync)
            for member_id in late:
                g.remove(member_id)
                self._s.cancel("hb", member_id)
            self._s.note(f"members {', '.join(late)} removed: no SyncGroup in time")
            self._prepare_rebalance("pending sync expired")

    def expire_heartbeat(self, member_id: str) -> None:
        g = self._s.group
        if member_id in g.pending_join:
            g.remove(member_id)
            if g.state is GroupState.PREPARING_REBALANCE and g.has_all_joined():
                self.complete_join()
            return
        member = g.members.get(member_id)
        if member is None or member.has_satisfied_heartbeat():
            return
        self._s.note(f"member {member_id} removed: session expired")
        self._remove_member_and_update(member)

    def _remove_member_and_update(self, member: MemberModel) -> None:
        g = self._s.group
        if member.awaiting_join is not None:
            self._s.reply(member.awaiting_join, join_error(UNKNOWN_MEMBER_ID, E.UNKNOWN_MEMBER_ID))
            member.awaiting_join = None
        g.remove(member.member_id)
        if g.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self.maybe_prepare_rebalance_or_complete_join()
        elif g.state is GroupState.PREPARING_REBALANCE and g.has_all_joined():
            self.complete_join()
