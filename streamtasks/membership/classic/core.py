"""The state and bookkeeping every part of the classic member shares.

:class:`MemberCore` holds the member's state and the small operations on it (issuing request
ids, emitting actions, resetting, failing, forgetting the coordinator);
:class:`~streamtasks.membership.classic.steps.RebalanceSteps` adds the protocol steps and
:class:`~streamtasks.membership.classic.machine.ClassicMember` the public entry points.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from streamtasks.errors import LocalProtocolError
from streamtasks.membership.classic.actions import (
    Action,
    AssignmentChanged,
    ErrorReported,
    InvokeListener,
    ListenerKind,
    Request,
    SendRequest,
)
from streamtasks.membership.classic.config import MemberConfig
from streamtasks.membership.classic.metrics import RebalanceMetrics
from streamtasks.membership.classic.reactions import Api
from streamtasks.membership.classic.states import MemberState as S
from streamtasks.membership.classic.transitions import check_transition
from streamtasks.protocol.classic_group import (
    UNKNOWN_GENERATION,
    UNKNOWN_MEMBER_ID,
    LeaveGroupRequest,
)
from streamtasks.protocol.errors import KafkaErrorCode
from topology.ids import TopicPartition

__all__ = ["HAS_GENERATION", "REBALANCING", "Gate", "InFlight", "MemberCore", "Purpose", "sorted_tps"]

_MAX_OPEN_INVOCATIONS = 256
HAS_GENERATION = (S.SYNCING, S.STABLE, S.PREPARING, S.REVOKING, S.LEAVING)
REBALANCING = (S.PREPARING, S.JOINING, S.SYNCING, S.REVOKING)


class Purpose(enum.Enum):
    """Why offsets are being committed before a revocation."""

    JOIN = "join prepare"
    SYNC = "revocation after SyncGroup"
    LEAVE = "leave"


@dataclass(slots=True)
class InFlight:
    api: Api | None  # None: FindCoordinator
    deadline_ms: int
    generation: int


@dataclass(slots=True)
class Gate:
    """Offsets of ``partitions`` are committed before they are revoked."""

    purpose: Purpose
    partitions: frozenset[TopicPartition]
    deadline_ms: int
    retry_at_ms: int
    commit_id: int | None = None
    assignment: frozenset[TopicPartition] = frozenset()  # Purpose.SYNC: what to own afterwards
    user_data: bytes = b""  # Purpose.SYNC: the user data of that assignment


def sorted_tps(partitions: frozenset[TopicPartition] | set[TopicPartition]) -> tuple[TopicPartition, ...]:
    return tuple(sorted(partitions))


class MemberCore:
    """State of one classic member and the operations every protocol step uses."""

    def __init__(self, config: MemberConfig, now_ms: int = 0) -> None:
        self._config = config
        self._protocol = config.protocol
        self._topics = config.topics
        self._state = S.UNJOINED if config.topics else S.CLOSED
        self._member_id = UNKNOWN_MEMBER_ID
        self._generation = UNKNOWN_GENERATION
        self._protocol_name: str | None = None
        self._leader_id = UNKNOWN_MEMBER_ID
        self._is_leader = False
        self._group_topics: tuple[str, ...] = ()
        self._snapshot: Mapping[str, int | None] = MappingProxyType({})
        self._snapshot_lazy = False  # KIP-814: counts unknown at SkipAssignment are learnt, not compared
        self._metadata: Mapping[str, int] | None = None
        self._owned: frozenset[TopicPartition] = frozenset()
        self._owned_generation = UNKNOWN_GENERATION
        self._previous: tuple[TopicPartition, ...] = ()  # sticky userdata memory (KIP-341)
        self._previous_generation = UNKNOWN_GENERATION
        #: User data of the SyncGroup assignment applied now (b"": none); see AssignmentChanged.
        self._user_data = b""
        self._rejoin_needed = False
        self._rejoin_reason = ""
        self._needs_join_prepare = True
        self._coordinator_known = False
        self._find_retry_ms = now_ms
        self._join_retry_ms = now_ms
        self._join_sent = False
        self._hb_next_ms = now_ms
        self._hb_last_ok_ms = now_ms
        self._gate: Gate | None = None
        #: Leader: its assignment withheld partitions (KIP-429 follow-up needed).
        self._followup_needed = False
        #: Leader, STABLE: rejoin at this time unless a rebalance started (None: not armed).
        self._followup_due_ms: int | None = None
        #: Leader: the rebalance in flight is one it forced for a follow-up (at most one in a row).
        self._followup_forced = False
        self._next_id = 0
        self._inflight: dict[int, InFlight] = {}
        self._invocations: dict[int, tuple[ListenerKind, int]] = {}
        self._next_invocation = 0
        self._metrics = RebalanceMetrics(created_ms=now_ms)
        self._out: list[Action] = []

    # ------------------------------------------------------------------ bookkeeping

    def _flush(self) -> list[Action]:
        out, self._out = self._out, []
        return out

    def _goto(self, state: S, trigger: str) -> None:
        check_transition(self._state, state, trigger)
        self._state = state

    def _issue(self, api: Api | None, deadline_ms: int) -> int:
        self._next_id += 1
        self._inflight[self._next_id] = InFlight(
            api=api, deadline_ms=deadline_ms, generation=self._generation
        )
        return self._next_id

    def _send(self, api: Api, request: Request, now_ms: int) -> int:
        timeout = self._config.request_timeout_ms
        if api is Api.JOIN_GROUP:
            timeout = max(timeout, self._config.rebalance_timeout_ms + 5_000)
        rid = self._issue(api, now_ms + timeout)
        self._out.append(SendRequest(request_id=rid, request=request))
        return rid

    def _find_in_flight(self) -> bool:
        return any(f.api is None for f in self._inflight.values())

    def _heartbeat_in_flight(self) -> bool:
        return any(f.api is Api.HEARTBEAT for f in self._inflight.values())

    def _drop_inflight(self, keep_find: bool = True) -> None:
        self._inflight = {r: f for r, f in self._inflight.items() if keep_find and f.api is None}
        if self._gate is not None:
            self._gate.commit_id = None

    def _report(self, reason: str, code: KafkaErrorCode | None, *, fatal: bool = False) -> None:
        self._metrics.error_reported()
        self._out.append(ErrorReported(reason=reason, code=code, fatal=fatal))

    def _listener(self, kind: ListenerKind, partitions: frozenset[TopicPartition], now_ms: int) -> None:
        self._next_invocation += 1
        self._invocations[self._next_invocation] = (kind, now_ms)
        if len(self._invocations) > _MAX_OPEN_INVOCATIONS:  # the driver need not report them all
            del self._invocations[min(self._invocations)]
        self._out.append(
            InvokeListener(
                invocation_id=self._next_invocation,
                kind=kind,
                partitions=sorted_tps(partitions),
                generation=self._generation,
            )
        )

    def _set_owned(self, owned: frozenset[TopicPartition], generation: int) -> None:
        added, removed = owned - self._owned, self._owned - owned
        self._owned = owned
        self._owned_generation = generation
        self._out.append(
            AssignmentChanged(
                generation=generation,
                owned=sorted_tps(owned),
                added=sorted_tps(added),
                removed=sorted_tps(removed),
                user_data=self._user_data,
            )
        )

    def _request_rejoin(self, reason: str) -> None:
        if not self._rejoin_needed:
            self._rejoin_needed = True
            self._rejoin_reason = reason

    def _lose_all(self, now_ms: int) -> None:
        """KIP-429 1d: the member fell out of the group; every owned partition is lost."""
        self._user_data = b""  # no assignment any more
        if self._owned:
            self._listener(ListenerKind.LOST, self._owned, now_ms)
            self._set_owned(frozenset(), UNKNOWN_GENERATION)

    def _reset(self, now_ms: int, *, member_id: bool, trigger: str) -> None:
        """Reset generation (and member id): partitions lost, rejoin from scratch."""
        self._lose_all(now_ms)
        self._generation = UNKNOWN_GENERATION
        if member_id:
            self._member_id = UNKNOWN_MEMBER_ID
        self._is_leader = False
        self._gate = None
        self._drop_inflight()
        self._join_sent = False
        self._needs_join_prepare = True
        self._followup_due_ms = None
        self._followup_forced = False
        if self._state is S.LEAVING:
            # ILLEGAL_GENERATION keeps the member id: the coordinator still counts this member,
            # so tell it we are gone instead of leaving it to the session timeout.
            self._send_leave("the application left", now_ms)
            self._close(trigger)
        else:
            self._goto(S.UNJOINED, trigger)

    def _fail(self, now_ms: int, reason: str, code: KafkaErrorCode | None) -> None:
        self._lose_all(now_ms)
        self._report(reason, code, fatal=True)
        self._gate = None
        self._drop_inflight(keep_find=False)
        self._metrics.rebalance_abandoned()
        self._is_leader = False
        self._followup_due_ms = None
        self._followup_forced = False
        self._goto(S.FAILED, "fatal error")

    def _close(self, trigger: str) -> None:
        self._gate = None
        self._inflight = {r: f for r, f in self._inflight.items() if f.api is Api.LEAVE_GROUP}
        self._member_id = UNKNOWN_MEMBER_ID
        self._generation = UNKNOWN_GENERATION
        self._is_leader = False
        self._rejoin_needed = False
        self._join_sent = False
        self._needs_join_prepare = True
        self._followup_due_ms = None
        self._followup_forced = False
        self._metrics.rebalance_abandoned()
        self._goto(S.CLOSED, trigger)

    def _coordinator_lost(self, now_ms: int, reason: str) -> None:
        """Kafka's ``markCoordinatorUnknown``: every request in flight fails; membership and
        owned partitions are kept; a SyncGroup in flight means the rebalance must restart."""
        self._coordinator_known = False
        self._find_retry_ms = now_ms + self._config.retry_backoff_ms
        self._join_retry_ms = now_ms + self._config.retry_backoff_ms
        self._drop_inflight(keep_find=False)
        if self._gate is not None:
            self._gate.retry_at_ms = now_ms
        if self._state is S.JOINING:
            self._join_sent = False
            self._metrics.rebalance_failed(now_ms)
        elif self._state is S.SYNCING:
            self._join_sent = False
            self._metrics.rebalance_failed(now_ms)
            self._goto(S.JOINING, "SyncGroup failed: rejoin")
        if reason:
            self._report(f"coordinator unknown: {reason}", None)

    # ------------------------------------------------------------------ shared helpers

    def _send_leave(self, reason: str, now_ms: int) -> None:
        """KIP-345: static members do not send LeaveGroup (their session timeout decides)."""
        if self._config.is_static or not self._member_id or not self._coordinator_known:
            return
        request = LeaveGroupRequest(group_id=self._config.group_id, member_id=self._member_id, reason=reason)
        self._send(Api.LEAVE_GROUP, request, now_ms)

    def _metadata_changed(self) -> bool:
        """Leader: has a partition count of a group topic changed since the assignment?"""
        current = self._metadata or {}
        if self._snapshot_lazy:
            learnt = {t: current[t] for t, n in self._snapshot.items() if n is None and t in current}
            if learnt:
                self._snapshot = MappingProxyType({**self._snapshot, **learnt})
        return any(current.get(t) != self._snapshot.get(t) for t in self._group_topics)

    def _take_snapshot(self, *, lazy: bool = False) -> None:
        self._snapshot_lazy = lazy
        current = self._metadata or {}
        self._snapshot = MappingProxyType({t: current.get(t) for t in self._group_topics})

    def _check_issued(self, request_id: int) -> None:
        if not 0 < request_id <= self._next_id:
            raise LocalProtocolError(f"no request {request_id} was ever issued by this member")
