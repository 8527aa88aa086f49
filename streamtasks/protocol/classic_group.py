"""The classic group protocol's requests and responses, decoded.

These are the values the classic membership state machine emits (requests) and consumes
(responses); the runtime maps them to wire messages (JoinGroup v9, SyncGroup v5,
Heartbeat v4, LeaveGroup v5, OffsetCommit v8) and the simulator's coordinator model answers
them directly. Error codes are :class:`KafkaErrorCode`.
"""

from __future__ import annotations

from dataclasses import dataclass

from streamtasks.protocol.errors import KafkaErrorCode
from topology.ids import TopicPartition

__all__ = [
    "UNKNOWN_GENERATION",
    "UNKNOWN_MEMBER_ID",
    "CommittedOffset",
    "DescribeGroupRequest",
    "DescribeGroupResponse",
    "DescribedMember",
    "HeartbeatRequest",
    "HeartbeatResponse",
    "JoinGroupMember",
    "JoinGroupRequest",
    "JoinGroupResponse",
    "LeaveGroupRequest",
    "LeaveGroupResponse",
    "OffsetCommitRequest",
    "OffsetCommitResponse",
    "OffsetFetchRequest",
    "OffsetFetchResponse",
    "ProtocolMetadata",
    "SyncGroupAssignment",
    "SyncGroupRequest",
    "SyncGroupResponse",
]

UNKNOWN_MEMBER_ID = ""
UNKNOWN_GENERATION = -1


@dataclass(frozen=True, slots=True, kw_only=True)
class ProtocolMetadata:
    """One (assignor name, subscription bytes) pair a member offers in JoinGroup."""

    name: str
    metadata: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class JoinGroupRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[ProtocolMetadata, ...]
    reason: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class JoinGroupMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class JoinGroupResponse:
    error: KafkaErrorCode
    generation_id: int = UNKNOWN_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = UNKNOWN_MEMBER_ID
    #: KIP-814: a static leader that rejoined must not compute a new assignment.
    skip_assignment: bool = False
    member_id: str = UNKNOWN_MEMBER_ID
    #: Non-empty only for the leader.
    members: tuple[JoinGroupMember, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class SyncGroupAssignment:
    member_id: str
    assignment: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class SyncGroupRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None
    protocol_type: str | None
    protocol_name: str | None
    assignments: tuple[SyncGroupAssignment, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class SyncGroupResponse:
    error: KafkaErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(frozen=True, slots=True, kw_only=True)
class HeartbeatRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class HeartbeatResponse:
    error: KafkaErrorCode


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaveGroupRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None = None
    reason: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaveGroupResponse:
    error: KafkaErrorCode


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeGroupRequest:
    """DescribeGroups for one group: the member only ever asks about its own."""

    group_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribedMember:
    member_id: str
    group_instance_id: str | None = None
    #: The member's current assignment (consumer protocol bytes); empty unless the group is
    #: Stable (Kafka describes members without metadata and assignment in other states).
    assignment: bytes = b""
    client_id: str = ""
    client_host: str = ""
    #: The member's subscription for the selected protocol (consumer protocol bytes).
    metadata: bytes = b""


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeGroupResponse:
    error: KafkaErrorCode
    group_state: str = ""
    protocol_type: str = ""
    protocol_name: str = ""
    members: tuple[DescribedMember, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class CommittedOffset:
    partition: TopicPartition
    offset: int
    metadata: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetCommitRequest:
    """Carries member id and generation so the coordinator rejects a fenced member's commit."""

    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None
    offsets: tuple[CommittedOffset, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetCommitResponse:
    errors: tuple[tuple[TopicPartition, KafkaErrorCode], ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetFetchRequest:
    """Committed offsets of ``partitions`` (``require_stable``: wait out pending transactions)."""

    group_id: str
    partitions: tuple[TopicPartition, ...]
    require_stable: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetFetchResponse:
    """``offsets``: (partition, committed offset or -1 when none, per-partition error);
    ``metadata``: (partition, the committed offset's metadata string) where it is not empty."""

    error: KafkaErrorCode
    offsets: tuple[tuple[TopicPartition, int, KafkaErrorCode], ...] = ()
    metadata: tuple[tuple[TopicPartition, str], ...] = ()
