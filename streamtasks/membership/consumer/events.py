"""Events a :class:`~streamtasks.membership.consumer.ConsumerMember` consumes.

The application's calls and the transport's news are every member's events
(:mod:`streamtasks.membership.common.events`): ``Subscribe``, ``EnforceRebalance``, ``Leave``,
``ListenerCompleted``, ``RequestFailed``, ``CoordinatorDiscovered``, ``CoordinatorLost``.
Defined here: the responses of the KIP-848 RPCs, metadata with topic ids (KIP-848 names
partitions by topic id), the client-side assignor's metadata, and the poll timer (Apache
Kafka's ``max.poll.interval.ms``).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from streamtasks.errors import ConfigError
from streamtasks.membership.common.events import (
    CoordinatorDiscovered,
    CoordinatorLost,
    EnforceRebalance,
    Leave,
    ListenerCompleted,
    RequestFailed,
    Subscribe,
)
from streamtasks.protocol.assignment_rpc import (
    ConsumerGroupInstallAssignmentResponse,
    ConsumerGroupPrepareAssignmentResponse,
)
from streamtasks.protocol.classic_group import OffsetCommitResponse
from streamtasks.protocol.consumer_group import ConsumerGroupHeartbeatResponse

__all__ = [
    "ApplicationPolled",
    "AssignorMetadata",
    "AssignorMetadataChanged",
    "CoordinatorDiscovered",
    "CoordinatorLost",
    "EnforceRebalance",
    "Event",
    "Leave",
    "ListenerCompleted",
    "MetadataUpdated",
    "PollTimerExpired",
    "RequestFailed",
    "Response",
    "ResponseReceived",
    "SessionTimeoutKnown",
    "Subscribe",
]

#: Every response the member can be handed.
Response = (
    ConsumerGroupHeartbeatResponse
    | ConsumerGroupPrepareAssignmentResponse
    | ConsumerGroupInstallAssignmentResponse
    | OffsetCommitResponse
)


@dataclass(frozen=True, slots=True, kw_only=True)
class ResponseReceived:
    """The coordinator answered the request the member emitted as ``request_id``.

    A response to a request the member no longer waits for (a duplicate, one abandoned after
    a timeout or a reset) is ignored; one for an id it never issued, or of the wrong type, is
    a driver bug and raises :class:`~streamtasks.errors.LocalProtocolError`."""

    request_id: int
    response: Response


@dataclass(frozen=True, slots=True, kw_only=True)
class MetadataUpdated:
    """The cluster's topics: partition count and topic id per name. KIP-848 messages name
    topics by id, so the member resolves its assignment through the latest ids it was told;
    owned partitions that no longer exist are lost."""

    partitions_per_topic: Mapping[str, int]
    topic_ids: Mapping[str, uuid.UUID]

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "partitions_per_topic", MappingProxyType(dict(sorted(self.partitions_per_topic.items())))
        )
        object.__setattr__(self, "topic_ids", MappingProxyType(dict(sorted(self.topic_ids.items()))))


@dataclass(frozen=True, slots=True, kw_only=True)
class AssignorMetadata:
    """What a member advertises for one client-side assignor (seed KIP-848 ``ClientAssignors``):
    the versions it reads, the version its bytes are written in, and the bytes."""

    minimum_version: int
    maximum_version: int
    metadata_version: int
    metadata_bytes: bytes = b""


@dataclass(frozen=True, slots=True, kw_only=True)
class AssignorMetadataChanged:
    """The application's metadata for the client-side assignor ``name`` changed (e.g. a
    streams member's task offset sums): sent with the next heartbeat, it bumps the group epoch
    and so asks for a new assignment."""

    name: str
    metadata: AssignorMetadata


@dataclass(frozen=True, slots=True, kw_only=True)
class PollTimerExpired:
    """The application did not poll within its ``max.poll.interval.ms``: the member gives up
    its partitions (``LOST``), leaves the group and waits in ``STALE`` for the application."""

    reason: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ApplicationPolled:
    """The application polls again: a ``STALE`` member rejoins (otherwise nothing happens)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionTimeoutKnown:
    """The coordinator's session timeout for this group, as the runtime read it at start (the
    group's effective ``consumer.session.timeout.ms``): the member gives its partitions up
    when no heartbeat sent within that long before now was answered (it replaces
    ``ConsumerMemberConfig.session_timeout_ms``). ``source``: where it was read, for the log."""

    session_timeout_ms: int
    source: str = ""

    def __post_init__(self) -> None:
        if self.session_timeout_ms <= 0:
            raise ConfigError(f"session_timeout_ms must be positive, got {self.session_timeout_ms}")


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
    | AssignorMetadataChanged
    | PollTimerExpired
    | ApplicationPolled
    | SessionTimeoutKnown
)
