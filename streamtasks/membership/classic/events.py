"""Events a :class:`~streamtasks.membership.classic.ClassicMember` consumes.

The driver (the runtime or the simulator) feeds every event through
``ClassicMember.handle(event, now_ms)``: decoded broker responses, transport failures, and the
application's calls. Events are values: frozen, slotted, keyword-only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from streamtasks.protocol.classic_group import (
    DescribeGroupResponse,
    HeartbeatResponse,
    JoinGroupResponse,
    LeaveGroupResponse,
    OffsetCommitResponse,
    SyncGroupResponse,
)
from streamtasks.protocol.errors import KafkaErrorCode

__all__ = [
    "CoordinatorDiscovered",
    "CoordinatorLost",
    "EnforceRebalance",
    "Event",
    "Leave",
    "ListenerCompleted",
    "MetadataUpdated",
    "RequestFailed",
    "Response",
    "ResponseReceived",
    "Subscribe",
]

#: Every response the member can be handed.
Response = (
    JoinGroupResponse
    | SyncGroupResponse
    | HeartbeatResponse
    | LeaveGroupResponse
    | OffsetCommitResponse
    | DescribeGroupResponse
)


@dataclass(frozen=True, slots=True, kw_only=True)
class ResponseReceived:
    """The broker answered the request the member emitted as ``request_id``
    (a ``SendRequest`` or a ``CommitOffsets`` action).

    A response to a request the member no longer waits for (a duplicate, or one it abandoned
    after a timeout or a reset) is ignored; one for an id it never issued is a driver bug and
    raises :class:`~streamtasks.errors.LocalProtocolError`.
    """

    request_id: int
    response: Response


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestFailed:
    """The request ``request_id`` got no answer: disconnect, timeout, or the coordinator could
    not be reached. Also answers a ``FindCoordinator`` action whose lookup failed."""

    request_id: int
    error: KafkaErrorCode = KafkaErrorCode.NETWORK_EXCEPTION


@dataclass(frozen=True, slots=True, kw_only=True)
class CoordinatorDiscovered:
    """The group coordinator is known (again). ``request_id`` names the ``FindCoordinator``
    action it answers, or is ``None`` when the driver learnt it unprompted."""

    request_id: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CoordinatorLost:
    """The driver noticed the coordinator connection is gone. Requests in flight are dropped;
    membership and owned partitions are kept (Kafka's ``markCoordinatorUnknown``)."""

    reason: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Subscribe:
    """The application changed its subscription (KIP-429 1a). An empty tuple unsubscribes
    without leaving: use :class:`Leave` to leave the group."""

    topics: tuple[str, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "topics", tuple(sorted(set(self.topics))))


@dataclass(frozen=True, slots=True, kw_only=True)
class EnforceRebalance:
    """KIP-568 ``enforce_rebalance(reason)``: rejoin on the next poll, keep owned partitions;
    a no-op while a rebalance is in flight. ``ClassicMember.enforce_rebalance`` returns whether
    it took effect; this event form returns no actions."""

    reason: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Leave:
    """The application closes / unsubscribes: commit and revoke owned partitions, then send
    LeaveGroup (dynamic members only; KIP-345 static members just stop)."""

    reason: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class MetadataUpdated:
    """Fresh partition counts from cluster metadata (KIP-429 1b).

    Every member gives up (``LOST``) owned partitions that no longer exist; only the leader
    rejoins when a topic subscribed by the group changed partition count.
    """

    partitions_per_topic: Mapping[str, int]

    def __post_init__(self) -> None:
        object.__setattr__(
            self,
            "partitions_per_topic",
            MappingProxyType(dict(sorted(self.partitions_per_topic.items()))),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ListenerCompleted:
    """Optional: the driver ran the ``InvokeListener`` action ``invocation_id``.

    Only feeds the KIP-429 listener latency metrics (latency = this event's ``now_ms`` minus
    the ``now_ms`` of the call that emitted the action) and the failed-callback counter; the
    assignment change stands whether or not the callback raised (KIP-429).
    """

    invocation_id: int
    failed: bool = False


#: Every event the member accepts.
Event = (
    ResponseReceived
    | RequestFailed
    | CoordinatorDiscovered
    | CoordinatorLost
    | Subscribe
    | EnforceRebalance
    | Leave
    | MetadataUpdated
    | ListenerCompleted
)
