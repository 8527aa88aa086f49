"""The state every part of the KIP-848 member shares, and the small operations on it.

:class:`MemberCore` holds the member's fields (one owner: only the member's own modules change
them) and the bookkeeping: request ids, emitting actions, ownership, fencing, failing, the
coordinator connection, and building heartbeats that carry only what changed.
:class:`~streamtasks.membership.consumer.machine.ConsumerMember` adds the protocol steps.
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass

from streamtasks.membership.consumer.actions import (
    Action,
    AssignmentChanged,
    ErrorReported,
    InvokeListener,
    ListenerKind,
    Request,
    SendRequest,
)
from streamtasks.membership.consumer.config import ConsumerMemberConfig
from streamtasks.membership.consumer.events import AssignorMetadata
from streamtasks.membership.consumer.states import MemberState as S
from streamtasks.membership.consumer.transitions import check_transition
from streamtasks.protocol.consumer_group import (
    ClientAssignor,
    ConsumerGroupHeartbeatRequest,
    TopicIdPartitions,
)
from streamtasks.protocol.errors import KafkaErrorCode
from topology.ids import TopicPartition

__all__ = ["Api", "Gate", "InFlight", "Job", "MemberCore", "Purpose", "Sent", "Target", "sorted_tps"]


class Api(enum.Enum):
    """The coordinator APIs the member calls."""

    HEARTBEAT = "ConsumerGroupHeartbeat"
    PREPARE = "ConsumerGroupPrepareAssignment"
    INSTALL = "ConsumerGroupInstallAssignment"
    OFFSET_COMMIT = "OffsetCommit"


class Purpose(enum.Enum):
    """Why offsets are being committed before a revocation."""

    RECONCILE = "reconciliation"
    LEAVE = "leave"


@dataclass(slots=True)
class InFlight:
    api: Api | None  # None: FindCoordinator
    deadline_ms: int
    epoch: int


@dataclass(slots=True)
class Gate:
    """Offsets of ``partitions`` are committed before they are revoked."""

    purpose: Purpose
    partitions: frozenset[TopicPartition]
    deadline_ms: int
    retry_at_ms: int
    commit_id: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Target:
    """An assignment the coordinator sent: what to own at ``epoch`` (topic ids, as received)."""

    epoch: int
    partitions: tuple[TopicIdPartitions, ...]
    error: int = 0
    metadata_version: int = 0
    metadata_bytes: bytes = b""


@dataclass(slots=True)
class Job:
    """The client-side assignment this member computes: ``prepare`` or ``install`` in flight."""

    phase: Api
    request_id: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Sent:
    """What the coordinator has from this member (the fields sent since the last full heartbeat)."""

    topics: tuple[str, ...]
    assignors: tuple[ClientAssignor, ...]
    owned: frozenset[TopicPartition]


def sorted_tps(partitions: frozenset[TopicPartition] | set[TopicPartition]) -> tuple[TopicPartition, ...]:
    return tuple(sorted(partitions))


_MAX_OPEN_INVOCATIONS = 256


class MemberCore:
    """State of one KIP-848 member and the operations every protocol step uses."""

    def __init__(self, config: ConsumerMemberConfig, now_ms: int = 0) -> None:
        self._config = config
        self._topics = config.topics
        self._state = S.JOINING if config.topics else S.UNSUBSCRIBED
        self._epoch = 0
        self._owned: frozenset[TopicPartition] = frozenset()
        self._owned_epoch = 0
        self._user_data = b""
        self._assignment_error = 0
        self._assignment_version = 0
        #: The latest assignment received and not yet applied; the last one applied.
        self._pending: Target | None = None
        self._last_target: Target | None = None
        self._revoked_this_round = False
        self._gate: Gate | None = None
        self._job: Job | None = None
        self._ack_rid: int | None = None  # the acknowledging heartbeat (sent or due when 0)
        self._counts: dict[str, int] = {}
        self._ids: dict[str, uuid.UUID] = {}
        self._names: dict[uuid.UUID, str] = {}
        self._assignor_metadata: dict[str, AssignorMetadata] = dict(config.assignor_metadata)
        self._reasons: dict[str, int] = {a.name: 0 for a in config.client_assignors}
        self._sent: Sent | None = None
        self._in_group = False  # the coordinator may know this member (a heartbeat went out)
        self._coordinator_known = False
        self._find_retry_ms = now_ms
        self._interval_ms = config.heartbeat_interval_ms
        self._hb_next_ms = now_ms
        self._hb_last_ok_ms = now_ms
        self._next_id = 0
        self._inflight: dict[int, InFlight] = {}
        self._next_invocation = 0
        self._open_invocations: set[int] = set()
        self._installed = 0
        self._out: list[Action] = []

    # ------------------------------------------------------------------ bookkeeping

    def _flush(self) -> list[Action]:
        out, self._out = self._out, []
        return out

    def _goto(self, state: S, trigger: str) -> None:
        check_transition(self._state, state, trigger)
        self._state = state

    def _issue(self, api: Api | None, now_ms: int) -> int:
        self._next_id += 1
        self._inflight[self._next_id] = InFlight(
            api=api, deadline_ms=now_ms + self._config.request_timeout_ms, epoch=self._epoch
        )
        return self._next_id

    def _send(self, api: Api, request: Request, now_ms: int) -> int:
        rid = self._issue(api, now_ms)
        self._out.append(SendRequest(request_id=rid, request=request))
        return rid

    def _in_flight(self, api: Api | None) -> bool:
        return any(f.api is api for f in self._inflight.values())

    def _drop_inflight(self, keep_find: bool = True) -> None:
        self._inflight = {r: f for r, f in self._inflight.items() if keep_find and f.api is None}
        if self._gate is not None:
            self._gate.commit_id = None
        self._job = None
        if self._ack_rid is not None:
            self._ack_rid = 0

    def _report(self, reason: str, code: KafkaErrorCode | None, *, fatal: bool = False) -> None:
        self._out.append(ErrorReported(reason=reason, code=code, fatal=fatal))

    def _listener(self, kind: ListenerKind, partitions: frozenset[TopicPartition]) -> None:
        self._next_invocation += 1
        self._open_invocations.add(self._next_invocation)
        if len(self._open_invocations) > _MAX_OPEN_INVOCATIONS:  # the driver need not report them
            self._open_invocations.discard(min(self._open_invocations))
        self._out.append(
            InvokeListener(
                invocation_id=self._next_invocation,
                kind=kind,
                partitions=sorted_tps(partitions),
                generation=self._epoch,
            )
        )

    def _set_owned(
        self, owned: frozenset[TopicPartition], epoch: int, *, lost: frozenset[TopicPartition] = frozenset()
    ) -> None:
        """``lost``: partitions given up without a revocation (``AssignmentChanged.lost``)."""
        added, removed = owned - self._owned, self._owned - owned
        self._owned = owned
        self._owned_epoch = epoch
        self._out.append(
            AssignmentChanged(
                generation=epoch,
                owned=sorted_tps(owned),
                added=sorted_tps(added),
                removed=sorted_tps(removed),
                user_data=self._user_data,
                lost=sorted_tps(lost & removed),
            )
        )

    def _lose_all(self) -> None:
        """Everything owned is lost (no commit, no revocation): fenced, stale, failed."""
        self._user_data = b""
        self._assignment_error = self._assignment_version = 0
        if self._owned:
            self._listener(ListenerKind.LOST, self._owned)
            self._set_owned(frozenset(), 0, lost=self._owned)

    def _forget_membership(self) -> None:
        """Back to epoch 0 with nothing in progress (the member id is kept)."""
        self._epoch = 0
        self._gate = None
        self._pending = self._last_target = None
        self._revoked_this_round = False
        self._ack_rid = None
        self._sent = None
        self._drop_inflight()

    def _fence(self, now_ms: int, reason: str, code: KafkaErrorCode | None) -> None:
        """Fenced: partitions lost; :meth:`poll` rejoins at epoch 0 with the same member id."""
        self._report(f"fenced: {reason}; partitions lost, rejoining", code)
        self._lose_all()
        self._forget_membership()
        self._in_group = False
        self._hb_next_ms = now_ms
        self._goto(S.FENCED, "fenced: partitions lost")

    def _fail(self, reason: str, code: KafkaErrorCode | None) -> None:
        self._lose_all()
        self._report(reason, code, fatal=True)
        self._forget_membership()
        self._drop_inflight(keep_find=False)
        self._in_group = False
        self._goto(S.FATAL, "fatal error")

    def _start_joining(self, now_ms: int, trigger: str) -> None:
        self._forget_membership()
        self._hb_next_ms = now_ms
        self._hb_last_ok_ms = now_ms
        self._goto(S.JOINING, trigger)

    def _coordinator_lost(self, now_ms: int, reason: str) -> None:
        """Every request in flight fails; membership and owned partitions are kept."""
        self._coordinator_known = False
        self._find_retry_ms = now_ms + self._config.retry_backoff_ms
        self._drop_inflight(keep_find=False)
        self._sent = None
        self._hb_next_ms = now_ms
        if self._gate is not None:
            self._gate.retry_at_ms = now_ms
        if reason:
            self._report(f"coordinator unknown: {reason}", None)

    # ------------------------------------------------------------------ heartbeats

    def _client_assignors(self) -> tuple[ClientAssignor, ...]:
        out = []
        for assignor in self._config.client_assignors:
            m = self._assignor_metadata[assignor.name]
            out.append(
                ClientAssignor(
                    name=assignor.name,
                    minimum_version=m.minimum_version,
                    maximum_version=m.maximum_version,
                    reason=self._reasons[assignor.name],
                    metadata_version=m.metadata_version,
                    metadata_bytes=m.metadata_bytes,
                )
            )
        return tuple(out)

    def _owned_wire(self, owned: frozenset[TopicPartition]) -> tuple[TopicIdPartitions, ...]:
        by_topic: dict[uuid.UUID, list[int]] = {}
        for tp in owned:
            topic_id = self._ids.get(tp.topic)
            if topic_id is not None:
                by_topic.setdefault(topic_id, []).append(tp.partition)
        return tuple(
            TopicIdPartitions(topic_id=t, partitions=tuple(sorted(p))) for t, p in sorted(by_topic.items())
        )

    def _heartbeat_request(self) -> ConsumerGroupHeartbeatRequest:
        """Epoch 0: a full join. Otherwise only what changed since the coordinator last heard
        it (everything after a failed heartbeat: it may have missed the last one)."""
        config, sent = self._config, self._sent
        joining = self._epoch == 0
        full = joining or sent is None
        assignors = self._client_assignors()
        topics = self._topics
        owned = frozenset() if joining else self._owned
        request = ConsumerGroupHeartbeatRequest(
            group_id=config.group_id,
            member_id=config.member_id,
            member_epoch=self._epoch,
            instance_id=config.group_instance_id,
            rack_id=config.rack if full else None,
            rebalance_timeout_ms=config.rebalance_timeout_ms if full else -1,
            subscribed_topic_names=topics if full or sent is None or sent.topics != topics else None,
            server_assignor=config.server_assignor if full else None,
            client_assignors=(
                assignors if assignors and (full or sent is None or sent.assignors != assignors) else None
            ),
            topic_partitions=(
                self._owned_wire(owned) if full or sent is None or sent.owned != owned else None
            ),
        )
        self._sent = Sent(topics=topics, assignors=assignors, owned=owned)
        return request
