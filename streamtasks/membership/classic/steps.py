"""The protocol steps of the classic member: join (with join prepare), the leader's step,
sync, the commit-before-revocation gate and heartbeats (KIP-429 1a-1e, 3a-3d; KIP-814)."""

from __future__ import annotations

from assignors.partition.types import PartitionAssignor, RebalanceProtocol
from streamtasks.errors import DecodeError
from streamtasks.membership.classic.actions import (
    CommitOffsets,
    ListenerKind,
)
from streamtasks.membership.classic.core import (
    HAS_GENERATION,
    Gate,
    MemberCore,
    Purpose,
    sorted_tps,
)
from streamtasks.membership.classic.leader import decode_members, lead
from streamtasks.membership.classic.reactions import Api, Reaction, reaction
from streamtasks.membership.classic.states import MemberState as S
from streamtasks.membership.classic.subscription import join_protocols
from streamtasks.protocol.classic_group import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    OffsetCommitResponse,
    SyncGroupAssignment,
    SyncGroupRequest,
    SyncGroupResponse,
)
from streamtasks.protocol.consumer import decode_assignment
from streamtasks.protocol.errors import KafkaErrorCode
from topology.ids import TopicPartition

__all__ = ["RebalanceSteps"]

_SEVERITY = {
    r: i
    for i, r in enumerate(
        (
            Reaction.FATAL,
            Reaction.RESET_MEMBER,
            Reaction.RESET_GENERATION,
            Reaction.COORDINATOR,
            Reaction.RETRY,
        )
    )
}


class RebalanceSteps(MemberCore):
    """Joining, syncing, revoking and heartbeating; entry points are in ``ClassicMember``."""

    # ------------------------------------------------------------------ joining

    def _wants_join(self) -> bool:
        if self._state is S.UNJOINED:
            return True
        if self._state is S.JOINING:
            return not self._join_sent
        return self._state is S.STABLE and self._rejoin_needed

    def _maybe_join(self, now_ms: int) -> None:
        if not self._wants_join() or not self._coordinator_known or now_ms < self._join_retry_ms:
            return
        if self._state in (S.UNJOINED, S.STABLE) and self._needs_join_prepare:
            self._metrics.rebalance_started(now_ms)
            self._is_leader = False
            self._group_topics = ()
            if self._generation < 0:
                self._lose_all(now_ms)
            revoking = (
                self._owned
                if self._protocol is RebalanceProtocol.EAGER
                else frozenset(tp for tp in self._owned if tp.topic not in self._topics)
            )
            if revoking:  # KIP-429 1a, and EAGER's revoke-everything
                self._goto(S.PREPARING, "rejoin: commit before revoking")
                self._start_gate(Purpose.JOIN, revoking, now_ms)
                return
            self._needs_join_prepare = False
        self._send_join(now_ms)

    def _send_join(self, now_ms: int) -> None:
        if self._state is not S.JOINING:
            trigger = "join" if self._state is S.UNJOINED else "rejoin"
            self._goto(S.JOINING, f"{trigger}: nothing to revoke, JoinGroup sent")
        if not self._coordinator_known or now_ms < self._join_retry_ms:
            return
        self._metrics.rebalance_started(now_ms)
        protocols = join_protocols(
            self._config,
            topics=self._topics,
            owned=sorted_tps(self._owned),
            owned_generation=self._owned_generation,
            previous=self._previous,
            previous_generation=self._previous_generation,
        )
        request = JoinGroupRequest(
            group_id=self._config.group_id,
            member_id=self._member_id,
            group_instance_id=self._config.group_instance_id,
            session_timeout_ms=self._config.session_timeout_ms,
            rebalance_timeout_ms=self._config.rebalance_timeout_ms,
            protocol_type=self._config.protocol_type,
            protocols=protocols,
            reason=self._rejoin_reason or None,
        )
        self._send(Api.JOIN_GROUP, request, now_ms)
        self._join_sent = True
        self._rejoin_needed = False
        self._rejoin_reason = ""
        self._followup_due_ms = None  # this rebalance is the follow-up

    def _on_join(self, resp: JoinGroupResponse, now_ms: int) -> None:
        self._join_sent = False
        act = reaction(Api.JOIN_GROUP, resp.error)
        if act is Reaction.PROCEED:
            self._joined(resp, now_ms)
            return
        if act is not Reaction.MEMBER_ID_REQUIRED:
            self._metrics.rebalance_failed(now_ms)
        if act is Reaction.MEMBER_ID_REQUIRED:  # 1e
            self._member_id = resp.member_id
            self._send_join(now_ms)
        elif act is Reaction.REJOIN:
            self._send_join(now_ms)
        elif act in (Reaction.RESET_MEMBER, Reaction.RESET_GENERATION):  # 1d
            self._reset(now_ms, member_id=act is Reaction.RESET_MEMBER, trigger="fenced: partitions lost")
            self._maybe_join(now_ms)
        else:
            self._retry_or_fail(Api.JOIN_GROUP, act, resp.error, now_ms)

    def _retry_or_fail(self, api: Api, act: Reaction, code: KafkaErrorCode, now_ms: int) -> None:
        if act is Reaction.FATAL:
            self._fail(now_ms, f"{api.value} failed with {code.name}", code)
        elif act is Reaction.COORDINATOR:
            self._coordinator_lost(now_ms, f"{api.value} answered {code.name}")
        else:
            if act is Reaction.REPORT:
                self._report(f"{api.value} failed with {code.name}; rejoining", code)
            self._join_retry_ms = now_ms + self._config.retry_backoff_ms
            if self._state is S.SYNCING:
                self._goto(S.JOINING, "SyncGroup failed: rejoin")

    def _joined(self, resp: JoinGroupResponse, now_ms: int) -> None:
        names = [a.name for a in self._config.assignors]
        problem = None
        if resp.protocol_name not in names:
            problem = f"coordinator selected protocol {resp.protocol_name!r}, not one of {names}"
        elif resp.generation_id < max(self._generation, 0):
            problem = f"JoinGroup generation {resp.generation_id} is older than ours ({self._generation})"
        if problem is not None:
            self._metrics.rebalance_failed(now_ms)
            self._report(problem + "; rejoining", None)
            self._join_retry_ms = now_ms + self._config.retry_backoff_ms
            return
        if (
            self._config.lose_on_missed_generation
            and self._owned
            and self._generation >= 0
            and resp.generation_id > self._generation + 1
        ):
            # KIP-429/KIP-341: a generation went by without this member's JoinGroup (a static
            # member paused past the rebalance timeout); the leader of that generation worked
            # from a stale copy of its claims, so what it owns may have moved: lost, not revoked.
            self._report(
                f"missed generation(s) {self._generation + 1}..{resp.generation_id - 1}: "
                "owned partitions lost",
                None,
            )
            self._lose_all(now_ms)
        self._member_id = resp.member_id or self._member_id
        self._generation = resp.generation_id
        self._protocol_name = resp.protocol_name
        self._leader_id = resp.leader
        self._is_leader = resp.leader == self._member_id
        self._hb_last_ok_ms = now_ms
        self._hb_next_ms = now_ms + self._config.heartbeat_interval_ms
        assignments: tuple[SyncGroupAssignment, ...] = ()
        if self._is_leader:
            assignments = self._lead(resp)
        request = SyncGroupRequest(
            group_id=self._config.group_id,
            generation_id=self._generation,
            member_id=self._member_id,
            group_instance_id=self._config.group_instance_id,
            protocol_type=self._config.protocol_type,
            protocol_name=self._protocol_name,
            assignments=assignments,
        )
        self._goto(S.SYNCING, "JoinGroup ok: SyncGroup sent")
        self._send(Api.SYNC_GROUP, request, now_ms)

    def _selected_assignor(self) -> PartitionAssignor:
        return next(a for a in self._config.assignors if a.name == self._protocol_name)

    def _lead(self, resp: JoinGroupResponse) -> tuple[SyncGroupAssignment, ...]:
        """Leader step; KIP-814: with SkipAssignment only learn the group's topics."""
        marker = self._config.generation_marker
        assignments: tuple[SyncGroupAssignment, ...] = ()
        self._followup_needed = False
        if resp.skip_assignment:
            decoded = decode_members(
                resp.members, assignor_name=self._protocol_name, generation_marker=marker
            )
            problems = decoded.problems
            self._group_topics = decoded.topics
        else:
            result = lead(
                resp.members,
                assignor=self._selected_assignor(),
                partitions_per_topic=self._metadata or {},
                generation_marker=marker,
            )
            problems, assignments = result.problems, result.assignments
            self._group_topics = result.group_topics
            self._followup_needed = result.followup_needed
        self._take_snapshot(lazy=resp.skip_assignment)
        for problem in problems:
            self._report(f"leader: {problem}", None)
        return assignments

    # ------------------------------------------------------------------ syncing

    def _on_sync(self, resp: SyncGroupResponse, now_ms: int) -> None:
        act = reaction(Api.SYNC_GROUP, resp.error)
        if act is not Reaction.PROCEED:
            self._metrics.rebalance_failed(now_ms)
        if act is Reaction.PROCEED:
            self._synced(resp, now_ms)
        elif act is Reaction.REJOIN:  # 1c: keep generation and partitions
            self._goto(S.JOINING, "SyncGroup failed: rejoin")
            self._send_join(now_ms)
        elif act in (Reaction.RESET_MEMBER, Reaction.RESET_GENERATION):  # 1d
            self._reset(now_ms, member_id=act is Reaction.RESET_MEMBER, trigger="fenced: partitions lost")
            self._maybe_join(now_ms)
        else:
            self._retry_or_fail(Api.SYNC_GROUP, act, resp.error, now_ms)

    def _sync_problem(self, problem: str, now_ms: int) -> None:
        self._metrics.rebalance_failed(now_ms)
        self._report(problem + "; rejoining", None)
        self._join_retry_ms = now_ms + self._config.retry_backoff_ms
        self._goto(S.JOINING, "SyncGroup failed: rejoin")

    def _synced(self, resp: SyncGroupResponse, now_ms: int) -> None:
        if resp.protocol_name is not None and resp.protocol_name != self._protocol_name:
            self._sync_problem(
                f"SyncGroup protocol {resp.protocol_name!r} != {self._protocol_name!r}", now_ms
            )
            return
        try:
            decoded = decode_assignment(resp.assignment)
        except DecodeError as exc:
            self._sync_problem(f"malformed assignment: {exc}", now_ms)
            return
        assigned = frozenset(decoded.assigned_partitions)
        user_data = decoded.user_data or b""
        foreign = sorted({tp.topic for tp in assigned} - set(self._topics))
        if foreign:
            self._sync_problem(f"assignment names topics we do not subscribe to: {foreign}", now_ms)
            return
        self._hb_last_ok_ms = now_ms
        revoked = self._owned - assigned
        if revoked:  # KIP-429 3c: commit, revoke, then rejoin
            self._goto(S.REVOKING, "SyncGroup ok: commit before revoking")
            self._start_gate(Purpose.SYNC, revoked, now_ms, assignment=assigned, user_data=user_data)
            return
        self._goto(S.STABLE, "SyncGroup ok: assignment applied")
        self._apply(assigned, frozenset(), now_ms, user_data)

    def _apply(
        self,
        assigned: frozenset[TopicPartition],
        revoked: frozenset[TopicPartition],
        now_ms: int,
        user_data: bytes,
    ) -> None:
        """KIP-429 listener order: revoked (if any) → assignment → assigned (always).
        ``user_data``: the assignment's user data, carried by the AssignmentChanged."""
        added = assigned - self._owned
        if revoked:
            self._listener(ListenerKind.REVOKED, revoked, now_ms)
        self._user_data = user_data
        self._set_owned(assigned, self._generation)
        self._previous, self._previous_generation = sorted_tps(assigned), self._generation
        self._listener(ListenerKind.ASSIGNED, added, now_ms)
        self._needs_join_prepare = True
        self._metrics.rebalance_completed(now_ms)
        if revoked:
            self._request_rejoin("partitions revoked: follow-up rebalance")
        if self._is_leader and self._followup_needed and not self._followup_forced:
            # KIP-429: the member that revokes the withheld partitions starts the follow-up;
            # if none has started one heartbeat interval from now (that member was replaced
            # without a rebalance, or had nothing left to revoke), the leader does. Never twice
            # in a row: if its own follow-up withheld again, the claimant is a member that does
            # not rejoin (a dead static member); its session timeout decides, not a storm.
            self._followup_due_ms = now_ms + self._config.heartbeat_interval_ms
        self._followup_forced = False
        if self._is_leader and self._metadata_changed():
            self._request_rejoin("leader saw a partition count change")
        if revoked:
            self._maybe_join(now_ms)

    # ------------------------------------------------------------------ commit before revoking

    def _start_gate(
        self,
        purpose: Purpose,
        partitions: frozenset[TopicPartition],
        now_ms: int,
        assignment: frozenset[TopicPartition] = frozenset(),
        user_data: bytes = b"",
    ) -> None:
        self._gate = Gate(
            purpose=purpose,
            partitions=partitions,
            deadline_ms=now_ms + self._config.rebalance_timeout_ms,
            retry_at_ms=now_ms,
            assignment=assignment,
            user_data=user_data,
        )
        self._maybe_commit(now_ms)

    def _maybe_followup(self, now_ms: int) -> None:
        due = self._followup_due_ms
        if due is None or now_ms < due or self._state is not S.STABLE:
            return
        self._followup_due_ms = None
        self._followup_forced = True
        self._request_rejoin("leader withheld partitions and no follow-up rebalance started")

    def _maybe_commit(self, now_ms: int) -> None:
        gate = self._gate
        if gate is None or gate.commit_id is not None or not self._coordinator_known:
            return
        if now_ms < gate.retry_at_ms:
            return
        if not gate.partitions:
            self._finish_gate(now_ms)
            return
        rid = self._issue(Api.OFFSET_COMMIT, now_ms + self._config.request_timeout_ms)
        gate.commit_id = rid
        self._out.append(
            CommitOffsets(
                request_id=rid,
                group_id=self._config.group_id,
                member_id=self._member_id,
                generation_id=self._generation,
                group_instance_id=self._config.group_instance_id,
                partitions=sorted_tps(gate.partitions),
            )
        )

    def _on_commit(self, resp: OffsetCommitResponse, now_ms: int) -> None:
        gate = self._gate
        if gate is None:
            return
        gate.commit_id = None
        codes = sorted({code for _, code in resp.errors if code is not KafkaErrorCode.NONE})
        if not codes:
            self._finish_gate(now_ms)
            return
        # the most severe reaction among the partitions' errors decides
        act, code = min(
            ((reaction(Api.OFFSET_COMMIT, c), c) for c in codes),
            key=lambda ac: _SEVERITY.get(ac[0], len(_SEVERITY)),
        )
        if act is Reaction.FATAL:
            self._fail(now_ms, f"OffsetCommit failed with {code.name}", code)
        elif act in (Reaction.RESET_MEMBER, Reaction.RESET_GENERATION):  # 1d
            self._reset(now_ms, member_id=act is Reaction.RESET_MEMBER, trigger="fenced: partitions lost")
            self._maybe_join(now_ms)
        elif act is Reaction.COORDINATOR:
            self._coordinator_lost(now_ms, f"OffsetCommit answered {code.name}")
        elif act is Reaction.RETRY:
            gate.retry_at_ms = now_ms + self._config.retry_backoff_ms
        else:
            self._report(f"offset commit failed with {[c.name for c in codes]}; revoking anyway", code)
            self._finish_gate(now_ms)

    def _finish_gate(self, now_ms: int) -> None:
        gate = self._gate
        assert gate is not None
        self._gate = None
        if gate.commit_id is not None:
            self._inflight.pop(gate.commit_id, None)
        if gate.purpose is Purpose.SYNC:
            self._goto(S.STABLE, "commit done: revoked, assignment applied")
            self._apply(gate.assignment, gate.partitions & self._owned, now_ms, gate.user_data)
            return
        revoked = gate.partitions & self._owned
        if revoked:
            self._listener(ListenerKind.REVOKED, revoked, now_ms)
            self._set_owned(self._owned - revoked, self._owned_generation)
        if gate.purpose is Purpose.LEAVE:
            self._send_leave("the application left", now_ms)
            self._close("commit done: revoked, left")
            return
        self._needs_join_prepare = False
        self._goto(S.JOINING, "commit done: revoked, JoinGroup sent")
        self._send_join(now_ms)

    # ------------------------------------------------------------------ heartbeat

    def _maybe_heartbeat(self, now_ms: int) -> None:
        if self._state not in HAS_GENERATION or self._generation < 0 or not self._member_id:
            return
        if self._heartbeat_in_flight() or now_ms < self._hb_next_ms:
            return
        request = HeartbeatRequest(
            group_id=self._config.group_id,
            generation_id=self._generation,
            member_id=self._member_id,
            group_instance_id=self._config.group_instance_id,
        )
        self._send(Api.HEARTBEAT, request, now_ms)
        self._hb_next_ms = now_ms + self._config.heartbeat_interval_ms

    def _on_heartbeat(self, resp: HeartbeatResponse, sent_generation: int, now_ms: int) -> None:
        act = reaction(Api.HEARTBEAT, resp.error)
        if act is Reaction.PROCEED:
            self._hb_last_ok_ms = now_ms
            return
        current = sent_generation == self._generation and self._state in HAS_GENERATION
        if act is Reaction.FATAL:
            self._fail(now_ms, f"Heartbeat failed with {resp.error.name}", resp.error)
        elif act is Reaction.REJOIN:  # 1c
            self._hb_last_ok_ms = now_ms
            if self._state is S.STABLE:
                self._request_rejoin("the group is rebalancing")
        elif act in (Reaction.RESET_MEMBER, Reaction.RESET_GENERATION):  # 1d
            if current:
                self._reset(now_ms, member_id=act is Reaction.RESET_MEMBER, trigger="fenced: partitions lost")
        elif act is Reaction.COORDINATOR:
            self._coordinator_lost(now_ms, f"Heartbeat answered {resp.error.name}")
        else:
            self._hb_next_ms = now_ms + self._config.retry_backoff_ms
            if act is Reaction.REPORT:
                self._report(f"Heartbeat failed with {resp.error.name}", resp.error)
