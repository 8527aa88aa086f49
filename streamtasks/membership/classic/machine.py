"""The classic group member: a sans-IO state machine (KIP-429, KIP-341, KIP-568, KIP-814).

No IO and no clock: the driver passes ``now_ms`` to every call, executes the returned actions in
order and feeds back what happened as events. States and transitions are in
:mod:`~streamtasks.membership.classic.transitions`, error reactions in
:mod:`~streamtasks.membership.classic.reactions`, the leader's step in
:mod:`~streamtasks.membership.classic.leader`; ``docs/membership.md`` tells the whole story.
"""

from __future__ import annotations

from collections.abc import Mapping

from assignors.partition.types import RebalanceProtocol
from streamtasks.errors import LocalProtocolError
from streamtasks.membership.classic.actions import (
    Action,
    FindCoordinator,
    ListenerKind,
)
from streamtasks.membership.classic.config import MemberConfig
from streamtasks.membership.classic.core import (
    HAS_GENERATION,
    REBALANCING,
    Purpose,
)
from streamtasks.membership.classic.events import (
    CoordinatorDiscovered,
    CoordinatorLost,
    EnforceRebalance,
    Event,
    Leave,
    ListenerCompleted,
    MetadataUpdated,
    RequestFailed,
    ResponseReceived,
    Subscribe,
)
from streamtasks.membership.classic.reactions import Api
from streamtasks.membership.classic.states import MemberState as S
from streamtasks.membership.classic.steps import RebalanceSteps
from streamtasks.membership.classic.transitions import check_event
from streamtasks.protocol.classic_group import (
    HeartbeatResponse,
    JoinGroupResponse,
    LeaveGroupResponse,
    OffsetCommitResponse,
    SyncGroupResponse,
)
from topology.ids import TopicPartition

__all__ = ["ClassicMember"]

_EXPECTS: dict[Api, type] = {
    Api.JOIN_GROUP: JoinGroupResponse,
    Api.SYNC_GROUP: SyncGroupResponse,
    Api.HEARTBEAT: HeartbeatResponse,
    Api.LEAVE_GROUP: LeaveGroupResponse,
    Api.OFFSET_COMMIT: OffsetCommitResponse,
}


class ClassicMember(RebalanceSteps):
    """One member of a classic (JoinGroup/SyncGroup) consumer group.

    ``handle(event, now_ms)`` and ``poll(now_ms)`` return the actions to execute, in order;
    ``next_deadline_ms()`` says when ``poll`` has something to do. An event that is illegal in
    the current state raises :class:`~streamtasks.errors.LocalProtocolError`; anything wrong on
    the broker's or another member's side is reported as ``ErrorReported`` and never raises.
    """

    # ------------------------------------------------------------------ read-only view

    @property
    def config(self) -> MemberConfig:
        return self._config

    @property
    def state(self) -> S:
        return self._state

    @property
    def member_id(self) -> str:
        """The id the coordinator gave this member; ``""`` before the first JoinGroup."""
        return self._member_id

    @property
    def generation(self) -> int:
        """The generation of the last JoinGroup that succeeded; -1 when none / reset."""
        return self._generation

    @property
    def owned_generation(self) -> int:
        """The generation ``owned_partitions`` were assigned in (-1: none)."""
        return self._owned_generation

    @property
    def protocol(self) -> RebalanceProtocol | None:
        """The rebalance protocol this member follows; ``None`` once it left the group."""
        return None if self._state is S.CLOSED else self._protocol

    @property
    def protocol_name(self) -> str | None:
        """The assignor the coordinator selected at the last JoinGroup."""
        return self._protocol_name

    @property
    def owned_partitions(self) -> frozenset[TopicPartition]:
        return self._owned

    @property
    def assignment_user_data(self) -> bytes:
        """User data of the SyncGroup assignment applied now (``b""``: none); the value the
        last ``AssignmentChanged`` carried."""
        return self._user_data

    @property
    def is_leader(self) -> bool:
        return self._is_leader

    @property
    def leader_id(self) -> str:
        return self._leader_id

    @property
    def group_topics(self) -> tuple[str, ...]:
        """Leader only: every topic the group subscribes to (monitored for metadata changes)."""
        return self._group_topics

    @property
    def subscription(self) -> tuple[str, ...]:
        return self._topics

    @property
    def rejoin_needed(self) -> bool:
        return self._rejoin_needed

    @property
    def coordinator_known(self) -> bool:
        return self._coordinator_known

    def metrics(self, now_ms: int) -> Mapping[str, float]:
        """KIP-429's rebalance metrics by name (see :mod:`.metrics`)."""
        return self._metrics.snapshot(now_ms)

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
            self._on_subscribe(event)
        elif isinstance(event, EnforceRebalance):
            self.enforce_rebalance(event.reason)
        elif isinstance(event, Leave):
            self._on_leave(event, now_ms)
        elif isinstance(event, MetadataUpdated):
            self._on_metadata(event, now_ms)
        else:
            self._on_listener_completed(event, now_ms)
        return self._flush()

    def poll(self, now_ms: int) -> list[Action]:
        """Run whatever is due: request timeouts, coordinator lookup, join / rejoin,
        heartbeats, commit retries and the commit deadline."""
        self._out = []
        if self._state in (S.CLOSED, S.FAILED):
            return self._flush()
        expired = [rid for rid, f in self._inflight.items() if f.deadline_ms <= now_ms]
        if expired:
            self._coordinator_lost(now_ms, "request timed out")
        gate = self._gate
        if gate is not None and now_ms >= gate.deadline_ms:
            self._report("offset commit before revocation timed out; revoking anyway", None)
            self._finish_gate(now_ms)
        if not self._coordinator_known:
            if not self._find_in_flight() and now_ms >= self._find_retry_ms:
                rid = self._issue(None, now_ms + self._config.request_timeout_ms)
                self._out.append(FindCoordinator(request_id=rid, group_id=self._config.group_id))
            return self._flush()
        if (
            self._state in HAS_GENERATION
            and self._generation >= 0
            and now_ms - self._hb_last_ok_ms > self._config.session_timeout_ms
        ):
            self._coordinator_lost(now_ms, "no heartbeat answer within the session timeout")
            return self._flush()
        self._maybe_followup(now_ms)
        self._maybe_join(now_ms)
        self._maybe_commit(now_ms)
        self._maybe_heartbeat(now_ms)
        return self._flush()

    def next_deadline_ms(self) -> int | None:
        """When ``poll`` next has something to do (possibly already past: poll now);
        ``None`` when only an event can move the member."""
        if self._state in (S.CLOSED, S.FAILED):
            return None
        times = [f.deadline_ms for f in self._inflight.values()]
        if self._gate is not None:
            times.append(self._gate.deadline_ms)
        if not self._coordinator_known:
            if not self._find_in_flight():
                times.append(self._find_retry_ms)
            return min(times)
        if self._wants_join():
            times.append(self._join_retry_ms)
        if self._followup_due_ms is not None and self._state is S.STABLE:
            times.append(self._followup_due_ms)
        if self._gate is not None and self._gate.commit_id is None:
            times.append(self._gate.retry_at_ms)
        if self._state in HAS_GENERATION and self._generation >= 0:
            if not self._heartbeat_in_flight():
                times.append(self._hb_next_ms)
            times.append(self._hb_last_ok_ms + self._config.session_timeout_ms + 1)
        return min(times) if times else None

    def enforce_rebalance(self, reason: str = "") -> bool:
        """KIP-568: ask to rejoin on the next poll, keeping owned partitions.

        Returns ``True`` when this takes effect (the member is stable, or not in the group
        yet and about to join with current metadata) and ``False`` while a rebalance is in
        flight (no-op). Works for static members too. Raises ``LocalProtocolError`` when the
        member is not subscribed (closed, leaving, failed).
        """
        check_event(self._state, EnforceRebalance(reason=reason))
        if self._state in REBALANCING:
            return False
        if self._state is S.STABLE:
            self._request_rejoin(reason or "rebalance enforced by the application")
        return True

    # ------------------------------------------------------------------ coordinator

    def _on_discovered(self, event: CoordinatorDiscovered, now_ms: int) -> None:
        if event.request_id is not None:
            found = self._inflight.get(event.request_id)
            if found is None or found.api is not None:
                self._check_issued(event.request_id)
                return
        self._inflight = {r: f for r, f in self._inflight.items() if f.api is not None}
        if self._coordinator_known or self._state in (S.CLOSED, S.FAILED):
            return
        self._coordinator_known = True
        self._hb_last_ok_ms = now_ms
        self._hb_next_ms = now_ms

    # ------------------------------------------------------------------ application events

    def _on_subscribe(self, event: Subscribe) -> None:
        if not event.topics:
            raise LocalProtocolError("Subscribe needs at least one topic; use Leave to unsubscribe")
        if self._state is S.CLOSED:
            self._topics = event.topics
            self._goto(S.UNJOINED, "subscribe")
            return
        if event.topics == self._topics:
            return
        self._topics = event.topics
        if self._state is not S.UNJOINED:
            self._request_rejoin("subscription changed")

    def _on_leave(self, event: Leave, now_ms: int) -> None:
        if self._state is S.FAILED:
            self._close("leave")
            return
        self._drop_inflight()
        self._gate = None
        self._join_sent = False
        if self._owned and self._generation >= 0 and self._member_id:
            self._goto(S.LEAVING, "leave: commit before revoking")
            self._start_gate(Purpose.LEAVE, self._owned, now_ms)
            return
        self._lose_all(now_ms)
        self._send_leave(event.reason or "the application left", now_ms)
        self._close("leave")

    def _on_metadata(self, event: MetadataUpdated, now_ms: int) -> None:
        counts = event.partitions_per_topic
        self._metadata = counts
        if self._state in (S.CLOSED, S.FAILED):
            return
        gone = frozenset(tp for tp in self._owned if tp.partition >= counts.get(tp.topic, 0))
        if gone:  # KIP-429 1b: owned partitions that no longer exist are lost
            self._listener(ListenerKind.LOST, gone, now_ms)
            self._set_owned(self._owned - gone, self._owned_generation)
            if self._gate is not None:
                self._gate.partitions -= gone
                self._gate.assignment -= gone
        if self._is_leader and self._state is S.STABLE and self._metadata_changed():
            self._request_rejoin("leader saw a partition count change")

    def _on_listener_completed(self, event: ListenerCompleted, now_ms: int) -> None:
        if not 0 < event.invocation_id <= self._next_invocation:
            raise LocalProtocolError(f"ListenerCompleted for unknown invocation {event.invocation_id}")
        found = self._invocations.pop(event.invocation_id, None)
        if found is None:  # reported twice, or too old to remember
            return
        kind, started = found
        self._metrics.listener_completed(kind, now_ms - started)
        if event.failed:
            self._report(f"rebalance listener {kind.value} raised; the assignment change stands", None)

    # ------------------------------------------------------------------ responses

    def _on_response(self, event: ResponseReceived, now_ms: int) -> None:
        self._check_issued(event.request_id)
        pending = self._inflight.get(event.request_id)
        if pending is None:  # duplicate, or abandoned after a timeout / reset
            self._metrics.stale_response()
            return
        expected = _EXPECTS.get(pending.api) if pending.api is not None else None
        if expected is None or not isinstance(event.response, expected):
            raise LocalProtocolError(
                f"request {event.request_id} was {pending.api.value if pending.api else 'FindCoordinator'}, "
                f"got {type(event.response).__name__}"
            )
        del self._inflight[event.request_id]
        resp = event.response
        if isinstance(resp, JoinGroupResponse):
            self._on_join(resp, now_ms)
        elif isinstance(resp, SyncGroupResponse):
            self._on_sync(resp, now_ms)
        elif isinstance(resp, HeartbeatResponse):
            self._on_heartbeat(resp, pending.generation, now_ms)
        elif isinstance(resp, OffsetCommitResponse):
            self._on_commit(resp, now_ms)
        # LeaveGroupResponse: nothing to do, the member is gone either way

    def _on_failed(self, event: RequestFailed, now_ms: int) -> None:
        self._check_issued(event.request_id)
        pending = self._inflight.pop(event.request_id, None)
        if pending is None:
            self._metrics.stale_response()
            return
        if pending.api is None:
            self._find_retry_ms = now_ms + self._config.retry_backoff_ms
            return
        if pending.api is Api.LEAVE_GROUP:
            return
        self._coordinator_lost(now_ms, f"{pending.api.value} failed: {event.error.name}")
