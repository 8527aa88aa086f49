"""KIP-848's consumer-group RPCs, decoded: ConsumerGroupHeartbeat (API key 68, v0-v1) and
ConsumerGroupDescribe (69, v0-v1) as Apache Kafka ships them, plus the seed KIP's client-side
assignment fields that Apache dropped, carried as tagged fields an Apache broker or client skips.

The byte codecs are in :mod:`streamtasks.protocol.consumer_group_codec`, the private
PrepareAssignment / InstallAssignment RPCs in :mod:`streamtasks.protocol.assignment_rpc`.
``docs/protocol.md`` ("KIP-848 RPCs") has the byte layouts, the tag numbers and every
deviation from the seed KIP.
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass

from streamtasks.protocol.errors import KafkaErrorCode

__all__ = [
    "AUTHORIZED_OPERATIONS_OMITTED",
    "CONSUMER_GROUP_DESCRIBE_API_KEY",
    "CONSUMER_GROUP_DESCRIBE_VERSIONS",
    "CONSUMER_GROUP_HEARTBEAT_API_KEY",
    "CONSUMER_GROUP_HEARTBEAT_VERSIONS",
    "JOIN_GROUP_MEMBER_EPOCH",
    "LEAVE_GROUP_MEMBER_EPOCH",
    "LEAVE_GROUP_STATIC_MEMBER_EPOCH",
    "TAG_ASSIGNMENT_ERROR",
    "TAG_CLIENT_ASSIGNORS",
    "TAG_METADATA_BYTES",
    "TAG_METADATA_VERSION",
    "TAG_PENDING_TOPIC_PARTITIONS",
    "TAG_SHOULD_COMPUTE_ASSIGNMENT",
    "ClientAssignmentErrorCode",
    "ClientAssignor",
    "ConsumerGroupDescribeRequest",
    "ConsumerGroupDescribeResponse",
    "ConsumerGroupHeartbeatRequest",
    "ConsumerGroupHeartbeatResponse",
    "DescribedAssignment",
    "DescribedGroup",
    "DescribedMember",
    "DescribedTopicPartitions",
    "HeartbeatAssignment",
    "TopicIdPartitions",
]

CONSUMER_GROUP_HEARTBEAT_API_KEY = 68
CONSUMER_GROUP_DESCRIBE_API_KEY = 69
#: (lowest, highest) version streamtasks encodes and decodes.
CONSUMER_GROUP_HEARTBEAT_VERSIONS = (0, 1)
CONSUMER_GROUP_DESCRIBE_VERSIONS = (0, 1)

JOIN_GROUP_MEMBER_EPOCH = 0
LEAVE_GROUP_MEMBER_EPOCH = -1
#: A static member leaving temporarily (it will rejoin within the session timeout).
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2

#: ConsumerGroupDescribe's AuthorizedOperations when they were not asked for (Java's Integer.MIN_VALUE).
AUTHORIZED_OPERATIONS_OMITTED = -(1 << 31)

# Tagged fields streamtasks adds (the seed KIP's client-side assignment). Apache Kafka defines
# no tagged field in these messages; it numbers new ones from 0 upwards, so these sit far above.
#: Request, top level: ``ClientAssignors``.
TAG_CLIENT_ASSIGNORS = 84800
#: Heartbeat response, top level: ``ShouldComputeAssignment``.
TAG_SHOULD_COMPUTE_ASSIGNMENT = 84801
#: Inside the heartbeat response's ``Assignment`` (and Describe's ``Assignment``).
TAG_PENDING_TOPIC_PARTITIONS = 84802
TAG_ASSIGNMENT_ERROR = 84803
TAG_METADATA_VERSION = 84804
TAG_METADATA_BYTES = 84805


class ClientAssignmentErrorCode(enum.IntEnum):
    """The seed KIP's assignment-metadata error (an int8 set by the client-side assignor)."""

    NONE = 0
    SHUTDOWN = 1
    ASSIGNMENT_ERROR = 2
    INCONSISTENT_TOPOLOGY = 3


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicIdPartitions:
    """Partitions of one topic, named by topic id (KIP-516), as every KIP-848 message does."""

    topic_id: uuid.UUID
    partitions: tuple[int, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientAssignor:
    """One client-side assignor a member supports (seed KIP), in the member's preference order.

    ``metadata_version`` is the version ``metadata_bytes`` is written in, within
    [``minimum_version``, ``maximum_version``]; ``reason`` (int8) changes to force a new assignment."""

    name: str
    minimum_version: int
    maximum_version: int
    reason: int = 0
    metadata_version: int = 0
    metadata_bytes: bytes = b""


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupHeartbeatRequest:
    """ConsumerGroupHeartbeat request. ``None`` means "not provided / unchanged since the last
    heartbeat" for every nullable field, as on the wire.

    ``subscribed_topic_regex`` exists from v1; ``client_assignors`` is the streamtasks tagged
    field (``TAG_CLIENT_ASSIGNORS``), ignored by Apache Kafka."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    topic_partitions: tuple[TopicIdPartitions, ...] | None = None
    client_assignors: tuple[ClientAssignor, ...] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class HeartbeatAssignment:
    """The heartbeat response's ``Assignment``: ``topic_partitions`` the member may own now.

    The other fields are the seed KIP's, as tagged fields inside the struct: partitions assigned
    but not yet released by their previous owner, and the client-side assignor's error and
    metadata for this member (version 0 and empty bytes under a server-side assignor)."""

    topic_partitions: tuple[TopicIdPartitions, ...]
    pending_topic_partitions: tuple[TopicIdPartitions, ...] = ()
    error: int = ClientAssignmentErrorCode.NONE
    metadata_version: int = 0
    metadata_bytes: bytes = b""


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupHeartbeatResponse:
    """ConsumerGroupHeartbeat response. ``assignment`` is ``None`` when unchanged;
    ``should_compute_assignment`` is the streamtasks tagged field (the seed KIP's)."""

    error: KafkaErrorCode
    member_epoch: int
    heartbeat_interval_ms: int
    error_message: str | None = None
    member_id: str | None = None
    assignment: HeartbeatAssignment | None = None
    should_compute_assignment: bool = False
    throttle_time_ms: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupDescribeRequest:
    group_ids: tuple[str, ...]
    include_authorized_operations: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribedTopicPartitions:
    topic_id: uuid.UUID
    topic_name: str
    partitions: tuple[int, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribedAssignment:
    """A member's current or target assignment; error and metadata are streamtasks tagged fields."""

    topic_partitions: tuple[DescribedTopicPartitions, ...]
    error: int = ClientAssignmentErrorCode.NONE
    metadata_version: int = 0
    metadata_bytes: bytes = b""


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribedMember:
    """``member_type`` exists from v1 (KIP-1099): -1 unknown, 0 classic, 1 consumer."""

    member_id: str
    member_epoch: int
    client_id: str
    client_host: str
    assignment: DescribedAssignment
    target_assignment: DescribedAssignment
    instance_id: str | None = None
    rack_id: str | None = None
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    member_type: int = -1


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribedGroup:
    error: KafkaErrorCode
    group_id: str
    group_state: str = ""
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor_name: str = ""
    members: tuple[DescribedMember, ...] = ()
    error_message: str | None = None
    authorized_operations: int = AUTHORIZED_OPERATIONS_OMITTED


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupDescribeResponse:
    groups: tuple[DescribedGroup, ...]
    throttle_time_ms: int = 0
