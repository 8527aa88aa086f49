"""The protocol steps of the KIP-848 member: heartbeat answers, reconciliation (revoke, commit,
acknowledge, then take new partitions), the commit before a revocation, leaving, and the
client-side assignment (PrepareAssignment, the assignor, InstallAssignment)."""

from __future__ import annotations

from streamtasks.membership.consumer.actions import CommitOffsets, ListenerKind
from streamtasks.membership.consumer.client_assignment import AssignmentProblem, compute_assignment
from streamtasks.membership.consumer.core import (
    Api,
    Gate,
    InFlight,
    Job,
    MemberCore,
    Purpose,
    Target,
    sorted_tps,
)
from streamtasks.membership.consumer.states import MemberState as S
from streamtasks.membership.consumer.transitions import IN_GROUP
from streamtasks.protocol.assignment_rpc import (
    ConsumerGroupInstallAssignmentRequest,
    ConsumerGroupInstallAssignmentResponse,
    ConsumerGroupPrepareAssignmentRequest,
    ConsumerGroupPrepareAssignmentResponse,
)
from streamtasks.protocol.classic_group import OffsetCommitResponse
from streamtasks.protocol.consumer_group import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from streamtasks.protocol.errors import KafkaErrorCode as E
from topology.ids import TopicPartition

__all__ = ["FATAL_CODES", "MemberSteps"]

#: Heartbeat errors the member cannot go on after (Apache Kafka's consumer treats them as fatal).
FATAL_CODES = frozenset(
    {
        E.UNRELEASED_INSTANCE_ID,
        E.GROUP_MAX_SIZE_REACHED,
        E.INVALID_REQUEST,
        E.UNSUPPORTED_ASSIGNOR,
        E.GROUP_AUTHORIZATION_FAILED,
        E.UNSUPPORTED_VERSION,
        E.FENCED_INSTANCE_ID,
    }
)
_FENCING = (E.FENCED_MEMBER_EPOCH, E.UNKNOWN_MEMBER_ID)
_COORDINATOR = (E.COORDINATOR_NOT_AVAILABLE, E.NOT_COORDINATOR)


class MemberSteps(MemberCore):
    """Heartbeats, reconciliation, leaving and the client-side assignment."""

    # ------------------------------------------------------------------ heartbeats

    def _maybe_heartbeat(self, now_ms: int) -> None:
        if self._state not in IN_GROUP or not self._coordinator_known or self._in_flight(Api.HEARTBEAT):
            return
        if now_ms < self._hb_next_ms and self._ack_rid != 0:
            return
        rid = self._send(Api.HEARTBEAT, self._heartbeat_request(), now_ms)
        self._in_group = True
        if self._ack_rid == 0:
            self._ack_rid = rid
        self._hb_next_ms = now_ms + self._interval_ms

    def _on_heartbeat(
        self, resp: ConsumerGroupHeartbeatResponse, rid: int, sent: InFlight, now_ms: int
    ) -> None:
        if self._state is S.LEAVING:
            self._goto(S.UNSUBSCRIBED, "left")
            return
        if self._state not in IN_GROUP or sent.epoch != self._epoch:
            return  # answers a heartbeat of an earlier membership (before a fence or a leave)
        code = resp.error
        if code is E.NONE:
            self._heartbeat_ok(resp, rid, now_ms)
            return
        self._sent = None  # the coordinator may not have taken what that heartbeat said
        if code in _FENCING:
            self._fence(now_ms, f"heartbeat answered {code.name}", code)
        elif code in FATAL_CODES:
            self._fail(f"heartbeat failed with {code.name}: {resp.error_message or ''}".rstrip(": "), code)
        elif code in _COORDINATOR:
            self._coordinator_lost(now_ms, f"heartbeat answered {code.name}")
        else:
            if not code.retriable:
                self._report(f"heartbeat failed with {code.name}", code)
            self._hb_next_ms = now_ms + self._config.retry_backoff_ms

    def _heartbeat_ok(self, resp: ConsumerGroupHeartbeatResponse, rid: int, now_ms: int) -> None:
        self._hb_last_ok_ms = now_ms
        if resp.heartbeat_interval_ms > 0:
            self._interval_ms = resp.heartbeat_interval_ms
            self._hb_next_ms = min(self._hb_next_ms, now_ms + self._interval_ms)
        self._epoch = resp.member_epoch
        assignment = resp.assignment
        if self._state is S.JOINING and self._epoch == 0:
            pass  # no epoch yet (a client-side group without a first target): keep joining
        elif assignment is not None:
            self._pending = Target(
                epoch=self._epoch,
                partitions=assignment.topic_partitions,
                error=assignment.error,
                metadata_version=assignment.metadata_version,
                metadata_bytes=assignment.metadata_bytes,
            )
        elif self._state is S.JOINING:
            self._pending = Target(epoch=self._epoch, partitions=())
        self._reconcile(now_ms)
        if (
            self._state is S.ACKNOWLEDGING
            and self._pending is None
            and self._ack_rid is not None
            and 0 < self._ack_rid <= rid
        ):
            self._ack_rid = None
            self._goto(S.STABLE, "acknowledged")
        if resp.should_compute_assignment:
            self._start_assignment(now_ms)

    # ------------------------------------------------------------------ reconciliation

    def _resolve(self, target: Target) -> tuple[frozenset[TopicPartition], int]:
        """The target's partitions by name, and how many could not be resolved (unknown topic id)."""
        out: set[TopicPartition] = set()
        unresolved = 0
        for item in target.partitions:
            name = self._names.get(item.topic_id)
            if name is None:
                unresolved += len(item.partitions)
            else:
                out.update(TopicPartition(name, p) for p in item.partitions)
        return frozenset(out), unresolved

    def _reconcile(self, now_ms: int) -> None:
        """Apply the pending assignment: revoke first (commit, then the listener), then take
        the new partitions and acknowledge. Never both revoked and new partitions unacknowledged:
        the coordinator gives nothing new while the member still owns what it must give up."""
        target = self._pending
        if target is None or self._gate is not None or self._state not in IN_GROUP:
            return
        assigned, unresolved = self._resolve(target)
        if unresolved:
            self._report(
                f"assignment names {unresolved} partition(s) of topics not in the metadata yet", None
            )
        revoked = self._owned - assigned
        if revoked:
            self._enter_reconciling()
            self._gate = Gate(
                purpose=Purpose.RECONCILE,
                partitions=revoked,
                deadline_ms=now_ms + self._config.rebalance_timeout_ms // 2,
                retry_at_ms=now_ms,
            )
            self._maybe_commit(now_ms)
            return
        self._pending = None
        self._last_target = target
        added = assigned - self._owned
        news = (
            target.metadata_bytes != self._user_data
            or target.error != self._assignment_error
            or target.metadata_version != self._assignment_version
        )
        self._user_data = target.metadata_bytes
        self._assignment_error = target.error
        self._assignment_version = target.metadata_version
        if target.error:
            self._report(f"the assignment carries assignor error {target.error}", None)
        if added or self._revoked_this_round or self._state is S.JOINING:
            self._enter_reconciling()
            self._revoked_this_round = False
            self._set_owned(assigned, target.epoch)
            self._listener(ListenerKind.ASSIGNED, added)
            self._goto(S.ACKNOWLEDGING, "reconciled: acknowledge")
            self._ack_rid = 0
            self._hb_next_ms = now_ms
        elif news or target.epoch != self._owned_epoch:
            self._set_owned(assigned, target.epoch)

    def _enter_reconciling(self) -> None:
        if self._state is S.JOINING:
            self._goto(S.RECONCILING, "heartbeat ok: first assignment")
        elif self._state is not S.RECONCILING:
            self._goto(S.RECONCILING, "heartbeat ok: new assignment")

    # ------------------------------------------------------------------ commit before revoking

    def _maybe_commit(self, now_ms: int) -> None:
        gate = self._gate
        if gate is None or gate.commit_id is not None or not self._coordinator_known:
            return
        if now_ms < gate.retry_at_ms:
            return
        if not gate.partitions & self._owned:
            self._finish_gate(now_ms)
            return
        rid = self._issue(Api.OFFSET_COMMIT, now_ms)
        gate.commit_id = rid
        self._out.append(
            CommitOffsets(
                request_id=rid,
                group_id=self._config.group_id,
                member_id=self._config.member_id,
                generation_id=self._epoch,
                group_instance_id=self._config.group_instance_id,
                partitions=sorted_tps(gate.partitions & self._owned),
            )
        )

    def _on_commit(self, resp: OffsetCommitResponse, now_ms: int) -> None:
        gate = self._gate
        if gate is None:
            return
        gate.commit_id = None
        codes = sorted({code for _, code in resp.errors if code is not E.NONE})
        if not codes:
            self._finish_gate(now_ms)
        elif E.UNKNOWN_MEMBER_ID in codes:
            if gate.purpose is Purpose.LEAVE:
                self._gate = None
                self._lose_all()
                self._in_group = False
                self._goto(S.UNSUBSCRIBED, "left without a leave heartbeat")
            else:
                self._fence(now_ms, "offset commit answered UNKNOWN_MEMBER_ID", E.UNKNOWN_MEMBER_ID)
        elif any(c in _COORDINATOR for c in codes):
            self._coordinator_lost(now_ms, f"offset commit answered {[c.name for c in codes]}")
        elif all(c.retriable for c in codes):
            gate.retry_at_ms = now_ms + self._config.retry_backoff_ms
        else:
            self._report(f"offset commit failed with {[c.name for c in codes]}; revoking anyway", codes[0])
            self._finish_gate(now_ms)

    def _finish_gate(self, now_ms: int) -> None:
        gate = self._gate
        assert gate is not None
        self._gate = None
        if gate.commit_id is not None:
            self._inflight.pop(gate.commit_id, None)
        revoked = gate.partitions & self._owned
        if revoked:
            self._listener(ListenerKind.REVOKED, revoked)
            self._set_owned(self._owned - revoked, self._owned_epoch)
        if gate.purpose is Purpose.LEAVE:
            self._send_leave(now_ms)
            return
        self._revoked_this_round = True
        self._reconcile(now_ms)

    # ------------------------------------------------------------------ leaving

    def _send_leave(self, now_ms: int) -> None:
        """The leave heartbeat: epoch -1, or -2 for a static member (it will come back)."""
        if not self._in_group or not self._coordinator_known:
            self._in_group = False
            self._goto(S.UNSUBSCRIBED, "left without a leave heartbeat")
            return
        config = self._config
        epoch = LEAVE_GROUP_STATIC_MEMBER_EPOCH if config.is_static else LEAVE_GROUP_MEMBER_EPOCH
        request = ConsumerGroupHeartbeatRequest(
            group_id=config.group_id,
            member_id=config.member_id,
            member_epoch=epoch,
            instance_id=config.group_instance_id,
        )
        self._forget_membership()
        self._in_group = False
        if self._state is S.PREPARE_LEAVING:
            self._goto(S.LEAVING, "revoked: leave heartbeat sent")
        self._send(Api.HEARTBEAT, request, now_ms)

    # ------------------------------------------------------------------ client-side assignment

    def _start_assignment(self, now_ms: int) -> None:
        """ShouldComputeAssignment: PrepareAssignment, unless a computation is under way."""
        if self._job is not None or not self._config.client_side or self._state not in IN_GROUP:
            return
        request = ConsumerGroupPrepareAssignmentRequest(
            group_id=self._config.group_id, member_id=self._config.member_id, member_epoch=self._epoch
        )
        self._job = Job(phase=Api.PREPARE, request_id=self._send(Api.PREPARE, request, now_ms))

    def _job_failed(self, api: Api, code: E, message: str | None, now_ms: int) -> None:
        self._job = None
        if code in _COORDINATOR:
            self._coordinator_lost(now_ms, f"{api.value} answered {code.name}")
        elif code is E.STALE_MEMBER_EPOCH:
            pass  # retried when the next heartbeat answer asks again
        elif code is not E.UNKNOWN_MEMBER_ID:  # no longer the member asked: nothing to do
            self._report(f"{api.value} failed with {code.name}: {message or ''}".rstrip(": "), code)

    def _on_prepare(self, resp: ConsumerGroupPrepareAssignmentResponse, now_ms: int) -> None:
        if self._job is None or self._job.phase is not Api.PREPARE:
            return
        if resp.error is not E.NONE:
            self._job_failed(Api.PREPARE, resp.error, resp.error_message, now_ms)
            return
        assignor = next((a for a in self._config.client_assignors if a.name == resp.assignor_name), None)
        if assignor is None:
            self._job = None
            self._report(
                f"asked to run assignor {resp.assignor_name!r}, which this member does not have", None
            )
            return
        try:
            members = compute_assignment(resp, assignor)
        except AssignmentProblem as exc:
            self._job = None
            self._report(f"client-side assignment not installed: {exc}", None)
            return
        request = ConsumerGroupInstallAssignmentRequest(
            group_id=self._config.group_id,
            member_id=self._config.member_id,
            member_epoch=self._epoch,
            group_epoch=resp.group_epoch,
            members=members,
        )
        self._job = Job(phase=Api.INSTALL, request_id=self._send(Api.INSTALL, request, now_ms))

    def _on_install(self, resp: ConsumerGroupInstallAssignmentResponse, now_ms: int) -> None:
        if self._job is None or self._job.phase is not Api.INSTALL:
            return
        if resp.error is not E.NONE:
            self._job_failed(Api.INSTALL, resp.error, resp.error_message, now_ms)
            return
        self._job = None
        self._installed += 1
