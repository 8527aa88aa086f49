"""The events both members consume, whatever the protocol.

The driver (the runtime or the simulator) feeds every event through ``handle(event, now_ms)``:
transport failures, coordinator news and the application's calls are alike for every protocol
and defined here; each protocol adds its ``ResponseReceived`` (its responses) and its
``MetadataUpdated``. Events are values: frozen, slotted, keyword-only.
"""

from __future__ import annotations

from dataclasses import dataclass

from streamtasks.protocol.errors import KafkaErrorCode

__all__ = [
    "CoordinatorDiscovered",
    "CoordinatorLost",
    "EnforceRebalance",
    "Leave",
    "ListenerCompleted",
    "RequestFailed",
    "Subscribe",
]


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
class ListenerCompleted:
    """Optional: the driver ran the ``InvokeListener`` action ``invocation_id``.

    Only feeds the KIP-429 listener latency metrics (latency = this event's ``now_ms`` minus
    the ``now_ms`` of the call that emitted the action) and the failed-callback counter; the
    assignment change stands whether or not the callback raised (KIP-429).
    """

    invocation_id: int
    failed: bool = False
