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
from streamtasks.sim.coordinator_base import CoordinatorBase, join_error
from streamtasks.sim.group_model import GroupState, MemberModel, ReplyTo

__all__ = ["JoinPhase"]

E = KafkaErrorCode


class JoinPhase(CoordinatorBase):
    """The JoinGroup side of the coordinator (see the module docstring)."""

    def _join(self, to: ReplyTo, req: JoinGroupRequest) -> None:
        g = self.group
        cfg = self.config
        names = tuple(p.name for p in req.protocols)
        if not cfg.min_session_timeout_ms <= req.session_timeout_ms <= cfg.max_session_timeout_ms:
            self._reply(to, join_error(req.member_id, E.INVALID_SESSION_TIMEOUT))
        elif not g.supports_protocols(req.protocol_type, names):
            self._reply(to, join_error(req.member_id, E.INCONSISTENT_GROUP_PROTOCOL))
        elif req.member_id == UNKNOWN_MEMBER_ID:
            if req.group_instance_id is not None:
                new_id = self._new_member_id(req.group_instance_id)
                existing = g.static_member_id(req.group_instance_id)
                if existing is not None:
                    self._replace_static_member(to, req, existing, new_id)
                else:
                    self._add_member(to, req, new_id)
            else:
                new_id = self._new_member_id(to.conn)
                g.pending_join[new_id] = None
                self._schedule("hb", new_id, req.session_timeout_ms)
                self._reply(to, JoinGroupResponse(error=E.MEMBER_ID_REQUIRED, member_id=new_id))
        elif req.member_id in g.pending_join:
            self._add_member(to, req, req.member_id)
        else:
            error = self._validate_member(req.member_id, req.group_instance_id)
            if error is not None:
                self._reply(to, join_error(req.member_id, error))
                return
            member = g.members[req.member_id]
            if g.state is GroupState.PREPARING_REBALANCE:
                self._update_member(to, req, member)
            elif g.state is GroupState.COMPLETING_REBALANCE:
                if member.matches(req.protocols):
                    self._reply(to, self._current_join_info(member.member_id, with_members=True))
                else:
                    self._update_member(to, req, member)
            elif g.state is GroupState.STABLE:
                if g.is_leader(member.member_id) or not member.matches(req.protocols):
                    self._update_member(to, req, member)
                else:
                    self._reply(to, self._current_join_info(member.member_id, with_members=False))
            else:
                self._reply(to, join_error(req.member_id, E.UNKNOWN_MEMBER_ID))

    def _current_join_info(
        self, member_id: str, *, with_members: bool, skip: bool = False
    ) -> JoinGroupResponse:
        g = self.group
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
        g = self.group
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
        self._schedule("hb", member_id, self.config.new_member_join_timeout_ms)
        self._note(f"member {member_id} added")
        self._maybe_prepare_rebalance_or_complete_join()

    def _update_member(self, to: ReplyTo, req: JoinGroupRequest, member: MemberModel) -> None:
        self.group.update(
            member,
            protocols=req.protocols,
            rebalance_timeout_ms=req.rebalance_timeout_ms,
            session_timeout_ms=req.session_timeout_ms,
            reply_to=to,
        )
        self._maybe_prepare_rebalance_or_complete_join()

    def _replace_static_member(self, to: ReplyTo, req: JoinGroupRequest, old_id: str, new_id: str) -> None:
        g = self.group
        assert req.group_instance_id is not None
        old = g.members[old_id]
        if old.awaiting_join is not None:
            self._reply(old.awaiting_join, join_error(old_id, E.FENCED_INSTANCE_ID))
        if old.awaiting_sync is not None:
            self._reply(old.awaiting_sync, SyncGroupResponse(error=E.FENCED_INSTANCE_ID))
        previous_leader = g.leader
        member = g.replace_static(req.group_instance_id, old_id, new_id)
        self._cancel("hb", old_id)
        self._schedule("hb", new_id, member.session_timeout_ms)
        self._note(f"static member {req.group_instance_id}: {old_id} replaced by {new_id}")
        g.update(
            member,
            protocols=req.protocols,
            rebalance_timeout_ms=req.rebalance_timeout_ms,
            session_timeout_ms=req.session_timeout_ms,
            reply_to=to,
        )
        if g.state is GroupState.STABLE:
            if g.select_protocol() == g.protocol_name:
                self._persist()
                member.awaiting_join = None
                if self.config.supports_skip_assignment:
                    leader = g.is_leader(new_id)
                    self._reply(to, self._current_join_info(new_id, with_members=True, skip=leader))
                else:
                    self._reply(
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
                self._maybe_prepare_rebalance_or_complete_join()
        elif g.state is GroupState.COMPLETING_REBALANCE:
            self._prepare_rebalance(f"static member {req.group_instance_id} rejoined")
        else:
            self._maybe_complete_join_phase()

    def _maybe_prepare_rebalance_or_complete_join(self) -> None:
        if self.group.can_rebalance():
            self._prepare_rebalance("membership or metadata changed")
        else:
            self._maybe_complete_join_phase()

    def _maybe_complete_join_phase(self) -> None:
        g = self.group
        if g.state is not GroupState.PREPARING_REBALANCE or g.previous_state is GroupState.EMPTY:
            return
        if g.has_all_joined():
            self._complete_join()

    def _prepare_rebalance(self, reason: str) -> None:
        g = self.group
        if g.state is GroupState.COMPLETING_REBALANCE:
            for member in g.members.values():
                member.assignment = b""
            self._propagate_assignment(E.REBALANCE_IN_PROGRESS)
        g.pending_sync.clear()
        self._cancel("sync")
        initial = g.state is GroupState.EMPTY
        if initial:
            delay = self.config.initial_rebalance_delay_ms
            remaining = max(g.rebalance_timeout_ms() - delay, 0)
            self._schedule("join", "", delay, delay, remaining)
        g.transition(GroupState.PREPARING_REBALANCE)
        self._note(f"preparing rebalance from generation {g.generation}: {reason}")
        if not initial:
            if g.has_all_joined():
                self._complete_join()
            else:
                self._schedule("join", "", g.rebalance_timeout_ms())

    def _initial_delay_expired(self, delay: int, remaining: int) -> None:
        g = self.group
        if g.new_member_added and remaining != 0:
            g.new_member_added = False
            new_delay = min(self.config.initial_rebalance_delay_ms, remaining)
            self._schedule("join", "", new_delay, new_delay, max(remaining - delay, 0))
        else:
            self._complete_join()

    def _complete_join(self) -> None:
        g = self.group
        self._cancel("join")
        for member in g.not_yet_rejoined():
            if not member.is_static:
                g.remove(member.member_id)
                self._cancel("hb", member.member_id)
                self._note(f"member {member.member_id} removed: did not rejoin in time")
        if not g.elect_joined_leader() and g.members:
            self._schedule("join", "", g.rebalance_timeout_ms())
            return
        g.init_next_generation()
        if g.state is GroupState.EMPTY:
            self._persist()
            self._note(f"generation {g.generation}: group is empty")
            return
        self.rebalances += 1
        self._note(
            f"generation {g.generation}: protocol {g.protocol_name}, leader {g.leader}, "
            f"members {', '.join(g.members)}"
        )
        for member in g.members.values():
            if member.awaiting_join is not None:
                self._reply(
                    member.awaiting_join, self._current_join_info(member.member_id, with_members=True)
                )
                member.awaiting_join = None
            self._schedule("hb", member.member_id, member.session_timeout_ms)
            member.is_new = False
            g.pending_sync[member.member_id] = None
        self._schedule("sync", "", g.rebalance_timeout_ms(), g.generation)

    def _expire_pending_sync(self, generation: int) -> None:
        g = self.group
        if generation != g.generation or g.state not in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
            return
        if g.pending_sync:
            late = tuple(g.pending_sync)
            for member_id in late:
                g.remove(member_id)
                self._cancel("hb", member_id)
            self._note(f"members {', '.join(late)} removed: no SyncGroup in time")
            self._prepare_rebalance("pending sync expired")

    def _expire_heartbeat(self, member_id: str) -> None:
        g = self.group
        if member_id in g.pending_join:
            g.remove(member_id)
            if g.state is GroupState.PREPARING_REBALANCE and g.has_all_joined():
                self._complete_join()
            return
        member = g.members.get(member_id)
        if member is None or member.has_satisfied_heartbeat():
            return
        self._note(f"member {member_id} removed: session expired")
        self._remove_member_and_update(member)

    def _remove_member_and_update(self, member: MemberModel) -> None:
        g = self.group
        if member.awaiting_join is not None:
            self._reply(member.awaiting_join, join_error(UNKNOWN_MEMBER_ID, E.UNKNOWN_MEMBER_ID))
            member.awaiting_join = None
        g.remove(member.member_id)
        if g.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance_or_complete_join()
        elif g.state is GroupState.PREPARING_REBALANCE and g.has_all_joined():
            self._complete_join()
