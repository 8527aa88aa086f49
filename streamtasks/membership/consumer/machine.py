"""The KIP-848 consumer group member: a sans-IO state machine (ConsumerGroupHeartbeat,
reconciliation, and the seed KIP's client-side assignment through PrepareAssignment /
InstallAssignment).

No IO and no clock: the driver passes ``now_ms`` to every call, executes the returned actions in
order (the classic member's action vocabulary and listener rule) and feeds back what happened as
events. States and transitions are in :mod:`~streamtasks.membership.consumer.transitions`;
``docs/membership.md`` ("The KIP-848 member") tells the whole story.
"""

from __future__ import annotations

from collections.abc import Mapping

from streamtasks.errors import LocalProtocolError
from streamtasks.membership.consumer.actions import Action, FindCoordinator, ListenerKind
from streamtasks.membership.consumer.config import ConsumerMemberConfig
from streamtasks.membership.consumer.core import Api, Gate, Purpose
from streamtasks.membership.consumer.events import (
    ApplicationPolled,
    AssignorMetadataChanged,
    CoordinatorDiscovered,
    CoordinatorLost,
    EnforceRebalance,
    Event,
    Leave,
    ListenerCompleted,
    MetadataUpdated,
    PollTimerExpired,
    RequestFailed,
    ResponseReceived,
    Subscribe,
)
from streamtasks.membership.consumer.states import MemberState as S
from streamtasks.membership.consumer.steps import MemberSteps
from streamtasks.membership.consumer.transitions import IN_GROUP, check_event
from streamtasks.protocol.assignment_rpc import (
    ConsumerGroupInstallAssignmentResponse,
    ConsumerGroupPrepareAssignmentResponse,
)
from streamtasks.protocol.classic_group import OffsetCommitResponse
from streamtasks.protocol.consumer_group import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from topology.ids import TopicPartition

__all__ = ["ConsumerMember"]

_EXPECTS: dict[Api, type] = {
    Api.HEARTBEAT: ConsumerGroupHeartbeatResponse,
    Api.PREPARE: ConsumerGroupPrepareAssignmentResponse,
    Api.INSTALL: ConsumerGroupInstallAssignmentResponse,
    Api.OFFSET_COMMIT: OffsetCommitResponse,
}

#: The assignor ``Reason`` is an int8; enforce_rebalance steps it through 1..127.
_MAX_REASON = 127


class ConsumerMember(MemberSteps):
    """One member of a KIP-848 consumer group.

    ``handle(event, now_ms)`` and ``poll(now_ms)`` return the actions to execute, in order;
    ``next_deadline_ms()`` says when ``poll`` has something to do. An event that is illegal in
    the current state raises :class:`~streamtasks.errors.LocalProtocolError`; anything wrong on
    the coordinator's side is reported as ``ErrorReported`` and never raises.
    """

    # ------------------------------------------------------------------ read-only view

    @property
    def config(self) -> ConsumerMemberConfig:
        return self._config

    @property
    def state(self) -> S:
        return self._state

    @property
    def member_id(self) -> str:
        return self._config.member_id

    @property
    def member_epoch(self) -> int:
        """The epoch the coordinator last gave this member (0: joining / not a member)."""
        return self._epoch

    @property
    def owned_partitions(self) -> frozenset[TopicPartition]:
        return self._owned

    @property
    def owned_epoch(self) -> int:
        """The member epoch of the assignment ``owned_partitions`` were last reconciled to."""
        return self._owned_epoch

    @property
    def assignment_user_data(self) -> bytes:
        """The client-side assignor's metadata bytes for this member (``b""``: none)."""
        return self._user_data

    @property
    def subscription(self) -> tuple[str, ...]:
        return self._topics

    @property
    def coordinator_known(self) -> bool:
        return self._coordinator_known

    @property
    def computing_assignment(self) -> bool:
        """A PrepareAssignment or InstallAssignment of this member is in flight."""
        return self._job is not None

    @property
    def assignments_installed(self) -> int:
        """How many client-side assignments this member computed and got installed."""
        return self._installed

    @property
    def reasons(self) -> Mapping[str, int]:
        """The ``Reason`` sent for each client-side assignor."""
        return dict(self._reasons)

    # ------------------------------------------------------------------ entry points

    def handle(self, event: Event, now_ms: int) -> list[Action]:
        """Feed one event; returns the actions to execute, in order."""
        check_event(self._state, event)
        self._out = []
        if isinstance(event, ResponseReceived):
            self._on_response(event, now_ms)
        elif isinstance(event, RequestFailed):
            self._on_failed(event, now_ms)
        elif isinstance(event, CoordinatorDiscovered):
            self._on_discovered(event, now_ms)
        elif isinstance(event, CoordinatorLost):
            self._coordinator_lost(now_ms, event.reason or "coordinator lost")
        elif isinstance(event, Subscribe):
            self._on_subscribe(event, now_ms)
        elif isinstance(event, EnforceRebalance):
            self.enforce_rebalance(event.reason, now_ms)
        elif isinstance(event, Leave):
            self._on_leave(now_ms)
        elif isinstance(event, MetadataUpdated):
            self._on_metadata(event, now_ms)
        elif isinstance(event, AssignorMetadataChanged):
            self._on_assignor_metadata(event, now_ms)
        elif isinstance(event, PollTimerExpired):
            self._on_poll_timer(event, now_ms)
        elif isinstance(event, ApplicationPolled):
            if self._state is S.STALE:
                self._start_joining(now_ms, "application polled: rejoin at epoch 0")
        else:
            self._on_listener_completed(event)
        return self._flush()

    def poll(self, now_ms: int) -> list[Action]:
        """Run whatever is due: request timeouts, the commit deadline, the session check,
        coordinator lookup, the rejoin after a fence, commits and heartbeats."""
        self._out = []
        if self._state in (S.UNSUBSCRIBED, S.FATAL, S.STALE) and not self._inflight:
            return self._flush()
        expired = sorted(rid for rid, f in self._inflight.items() if f.deadline_ms <= now_ms)
        for rid in expired:
            if rid in self._inflight:
                self._on_failed(RequestFailed(request_id=rid), now_ms)
        if self._state in (S.UNSUBSCRIBED, S.FATAL, S.STALE):
            return self._flush()
        gate = self._gate
        if gate is not None and now_ms >= gate.deadline_ms:
            self._report("offset commit before revocation timed out; revoking anyway", None)
            self._finish_gate(now_ms)
        if (
            self._state in IN_GROUP
            and (self._epoch > 0 or self._owned)
            and now_ms - self._hb_last_ok_ms > self._config.session_timeout_ms
        ):
            self._fence(now_ms, "no heartbeat answer within the session timeout", None)
        if not self._coordinator_known:
            if not self._in_flight(None) and now_ms >= self._find_retry_ms:
                rid = self._issue(None, now_ms)
                self._out.append(FindCoordinator(request_id=rid, group_id=self._config.group_id))
            return self._flush()
        if self._state is S.FENCED:
            self._start_joining(now_ms, "rejoin at epoch 0")
        self._maybe_commit(now_ms)
        self._maybe_heartbeat(now_ms)
        return self._flush()

    def next_deadline_ms(self) -> int | None:
        """When ``poll`` next has something to do (possibly already past: poll now);
        ``None`` when only an event can move the member."""
        times = [f.deadline_ms for f in self._inflight.values()]
        if self._state in (S.UNSUBSCRIBED, S.FATAL, S.STALE):
            return min(times) if times else None
        if self._gate is not None:
            times.append(self._gate.deadline_ms)
        if self._state in IN_GROUP and (self._epoch > 0 or self._owned):
            times.append(self._hb_last_ok_ms + self._config.session_timeout_ms + 1)
        if not self._coordinator_known:
            if not self._in_flight(None):
                times.append(self._find_retry_ms)
            return min(times) if times else None
        if self._state is S.FENCED:
            times.append(self._hb_next_ms)
        if self._gate is not None and self._gate.commit_id is None:
            times.append(self._gate.retry_at_ms)
        if self._state in IN_GROUP and not self._in_flight(Api.HEARTBEAT):
            times.append(self._hb_next_ms if self._ack_rid != 0 else min(self._hb_next_ms, 0))
        return min(times) if times else None

    def enforce_rebalance(self, reason: str = "", now_ms: int | None = None) -> bool:
        """KIP-848 has no rebalance request: a member forces a new assignment by changing its
        client-side assignors' ``Reason`` (which bumps the group epoch). Returns ``True`` when
        that was done, ``False`` for a member with a server-side assignor (a no-op, as Apache
        Kafka's ``enforceRebalance`` under the consumer protocol). ``reason`` is not sent (the
        field is an int8). Raises ``LocalProtocolError`` when the member is not subscribed."""
        check_event(self._state, EnforceRebalance(reason=reason))
        if not self._config.client_side:
            return False
        for name, value in self._reasons.items():
            self._reasons[name] = value % _MAX_REASON + 1
        if now_ms is not None:
            self._hb_next_ms = min(self._hb_next_ms, now_ms)
        return True

    # ------------------------------------------------------------------ coordinator

    def _on_discovered(self, event: CoordinatorDiscovered, now_ms: int) -> None:
        if event.request_id is not None:
            found = self._inflight.get(event.request_id)
            if found is None or found.api is not None:
                self._check_issued(event.request_id)
                return
        self._inflight = {r: f for r, f in self._inflight.items() if f.api is not None}
        if self._coordinator_known or self._state in (S.UNSUBSCRIBED, S.FATAL):
            return
        self._coordinator_known = True
        self._hb_next_ms = now_ms
        if self._state is S.PREPARE_LEAVING and self._gate is None:
            self._send_leave(now_ms)

    # ------------------------------------------------------------------ application events

    def _on_subscribe(self, event: Subscribe, now_ms: int) -> None:
        if not event.topics:
            raise LocalProtocolError("Subscribe needs at least one topic; use Leave to unsubscribe")
        changed = event.topics != self._topics
        self._topics = event.topics
        if self._state is S.UNSUBSCRIBED:
            self._start_joining(now_ms, "subscribe: join at epoch 0")
        elif changed:
            self._hb_next_ms = min(self._hb_next_ms, now_ms)

    def _on_leave(self, now_ms: int) -> None:
        if self._state in (S.FATAL, S.UNSUBSCRIBED):
            return
        if self._state is S.STALE:
            self._goto(S.UNSUBSCRIBED, "leave")
            return
        self._drop_inflight()
        self._pending = None
        self._goto(S.PREPARE_LEAVING, "leave: revoke first")
        if self._owned and self._in_group:
            self._gate = Gate(
                purpose=Purpose.LEAVE,
                partitions=self._owned,
                deadline_ms=now_ms + self._config.rebalance_timeout_ms // 2,
                retry_at_ms=now_ms,
            )
            self._maybe_commit(now_ms)
            return
        self._gate = None
        self._lose_all()
        if self._coordinator_known or not self._in_group:
            self._send_leave(now_ms)

    def _on_poll_timer(self, event: PollTimerExpired, now_ms: int) -> None:
        self._report(
            f"poll timer expired ({event.reason or 'the application stopped polling'}); leaving", None
        )
        self._lose_all()
        in_group = self._in_group and self._coordinator_known
        self._forget_membership()
        if in_group:
            self._send_leave_from_stale(now_ms)
        self._in_group = False
        self._goto(S.STALE, "poll timer expired: partitions lost, left")

    def _send_leave_from_stale(self, now_ms: int) -> None:
        config = self._config
        self._send(
            Api.HEARTBEAT,
            ConsumerGroupHeartbeatRequest(
                group_id=config.group_id,
                member_id=config.member_id,
                member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH
                if config.is_static
                else LEAVE_GROUP_MEMBER_EPOCH,
                instance_id=config.group_instance_id,
            ),
            now_ms,
        )

    def _on_assignor_metadata(self, event: AssignorMetadataChanged, now_ms: int) -> None:
        if event.name not in self._assignor_metadata:
            raise LocalProtocolError(f"no client-side assignor named {event.name!r}")
        m = event.metadata
        if not (
            -1 <= m.minimum_version <= m.metadata_version <= m.maximum_version and m.maximum_version >= 0
        ):
            raise LocalProtocolError(f"assignor {event.name!r}: invalid metadata versions {m}")
        if self._assignor_metadata[event.name] != m:
            self._assignor_metadata[event.name] = m
            self._hb_next_ms = min(self._hb_next_ms, now_ms)

    def _on_metadata(self, event: MetadataUpdated, now_ms: int) -> None:
        self._counts = dict(event.partitions_per_topic)
        self._ids = dict(event.topic_ids)
        self._names = {topic_id: name for name, topic_id in self._ids.items()}
        if self._state in (S.UNSUBSCRIBED, S.FATAL):
            return
        gone = frozenset(tp for tp in self._owned if tp.partition >= self._counts.get(tp.topic, 0))
        if gone:  # owned partitions that no longer exist are lost
            self._listener(ListenerKind.LOST, gone)
            self._set_owned(self._owned - gone, self._owned_epoch, lost=gone)
            if self._gate is not None:
                self._gate.partitions -= gone
        last = self._last_target
        if self._pending is None and last is not None and self._resolve(last)[0] - self._owned:
            self._pending = last  # partitions of topics that were unknown until now
        self._reconcile(now_ms)

    def _on_listener_completed(self, event: ListenerCompleted) -> None:
        if not 0 < event.invocation_id <= self._next_invocation:
            raise LocalProtocolError(f"ListenerCompleted for unknown invocation {event.invocation_id}")
        if event.invocation_id in self._open_invocations:
            self._open_invocations.discard(event.invocation_id)
            if event.failed:
                self._report("rebalance listener raised; the assignment change stands", None)

    # ------------------------------------------------------------------ responses

    def _check_issued(self, request_id: int) -> None:
        if not 0 < request_id <= self._next_id:
            raise LocalProtocolError(f"no request {request_id} was ever issued by this member")

    def _on_response(self, event: ResponseReceived, now_ms: int) -> None:
        self._check_issued(event.request_id)
        pending = self._inflight.get(event.request_id)
        if pending is None:  # duplicate, or abandoned after a timeout / reset
            return
        expected = _EXPECTS.get(pending.api) if pending.api is not None else None
        if expected is None or not isinstance(event.response, expected):
            raise LocalProtocolError(
                f"request {event.request_id} was {pending.api.value if pending.api else 'FindCoordinator'}, "
                f"got {type(event.response).__name__}"
            )
        del self._inflight[event.request_id]
        resp = event.response
        if isinstance(resp, ConsumerGroupHeartbeatResponse):
            self._on_heartbeat(resp, event.request_id, pending, now_ms)
        elif isinstance(resp, ConsumerGroupPrepareAssignmentResponse):
            self._on_prepare(resp, now_ms)
        elif isinstance(resp, ConsumerGroupInstallAssignmentResponse):
            self._on_install(resp, now_ms)
        else:
            self._on_commit(resp, now_ms)

    def _on_failed(self, event: RequestFailed, now_ms: int) -> None:
        self._check_issued(event.request_id)
        pending = self._inflight.pop(event.request_id, None)
        if pending is None:
            return
        if pending.api is None:
            self._find_retry_ms = now_ms + self._config.retry_backoff_ms
            return
        if self._state is S.LEAVING and pending.api is Api.HEARTBEAT:
            self._goto(S.UNSUBSCRIBED, "left")
            return
        if self._state in (S.UNSUBSCRIBED, S.STALE, S.FATAL):
            return
        self._coordinator_lost(now_ms, f"{pending.api.value} failed: {event.error.name}")
