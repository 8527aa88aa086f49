"""Events a :class:`~streamtasks.membership.classic.ClassicMember` consumes.

The driver (the runtime or the simulator) feeds every event through
``ClassicMember.handle(event, now_ms)``: decoded broker responses, transport failures, and the
application's calls. The transport's news and the application's calls are every member's
(:mod:`streamtasks.membership.common.events`); defined here: the classic group's responses and
its metadata. Events are values: frozen, slotted, keyword-only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from streamtasks.membership.common.events import (
    CoordinatorDiscovered,
    CoordinatorLost,
    EnforceRebalance,
    Leave,
    ListenerCompleted,
    RequestFailed,
    Subscribe,
)
from streamtasks.protocol.classic_group import (
    DescribeGroupResponse,
    HeartbeatResponse,
    JoinGroupResponse,
    LeaveGroupResponse,
    OffsetCommitResponse,
    SyncGroupResponse,
)

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
