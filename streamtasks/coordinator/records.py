"""The records that persist a consumer group (KIP-848 "Record types", plus two of streamtasks').

Every write of the coordinator returns records; replaying them is the only way group state
changes, and loading a group is replaying its records. Each record type has a tombstone form
(the same key, no value), which is what a compacted topic keeps when the thing is deleted.
Every record is an upsert of its key (:func:`record_key`), so replaying the *compacted* log
(last record per key, in log order) rebuilds the same group.

KIP-848's types: group epoch (``ConsumerGroupMetadata``), the subscribed topics' metadata
(``ConsumerGroupPartitionMetadata``), member metadata, target assignment metadata and members,
current member assignment. streamtasks adds, for client-side assignment, who was asked to
compute the assignment (:class:`ClientAssignmentRequestRecord`) and what that member was given
by PrepareAssignment (:class:`PreparedAssignmentRecord`), so an InstallAssignment is validated
against the epoch it was computed for even after a fail-over.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from streamtasks.coordinator.types import EMPTY_PARTITIONS, MemberState, TopicMetadata, TopicPartitionSet
from streamtasks.protocol.consumer_group import ClientAssignmentErrorCode, ClientAssignor

__all__ = [
    "ClassicMemberMetadata",
    "ClientAssignmentRequestRecord",
    "ClientAssignmentRequestTombstone",
    "CurrentMemberAssignmentRecord",
    "CurrentMemberAssignmentTombstone",
    "GroupEpochRecord",
    "GroupEpochTombstone",
    "MemberMetadataRecord",
    "MemberMetadataTombstone",
    "PartitionMetadataRecord",
    "PartitionMetadataTombstone",
    "PreparedAssignmentRecord",
    "PreparedAssignmentTombstone",
    "PreparedMemberSpec",
    "Record",
    "TargetAssignmentMemberRecord",
    "TargetAssignmentMemberTombstone",
    "TargetAssignmentMetadataRecord",
    "TargetAssignmentMetadataTombstone",
    "record_key",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupEpochRecord:
    """``ConsumerGroupMetadata``: the group exists, at ``epoch``."""

    group_id: str
    epoch: int


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupEpochTombstone:
    """The group is deleted (it was empty): its state becomes Dead."""

    group_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionMetadataRecord:
    """``ConsumerGroupPartitionMetadata``: the topics the members subscribe to, as last seen.
    A change (a partition added, a topic created or re-created) bumps the group epoch."""

    group_id: str
    topics: tuple[TopicMetadata, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionMetadataTombstone:
    group_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ClassicMemberMetadata:
    """A member that speaks the classic protocol (JoinGroup/SyncGroup/Heartbeat/LeaveGroup),
    Kafka's ``ClassicMemberMetadata`` (4.1): its session timeout and the (name, subscription
    bytes) protocols of its last JoinGroup, in its order of preference (the first is the one
    the group uses for it)."""

    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]

    @property
    def protocol_name(self) -> str:
        return self.protocols[0][0] if self.protocols else ""

    @property
    def protocol_names(self) -> frozenset[str]:
        return frozenset(name for name, _ in self.protocols)


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberMetadataRecord:
    """``ConsumerGroupMemberMetadata``: what the member told the coordinator. ``classic`` is
    set for a member that joined with the classic protocol (online migration)."""

    group_id: str
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    server_assignor: str | None = None
    client_assignors: tuple[ClientAssignor, ...] = ()
    rebalance_timeout_ms: int = 0
    classic: ClassicMemberMetadata | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberMetadataTombstone:
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class TargetAssignmentMetadataRecord:
    """``ConsumerGroupTargetAssignmentMetadata``: the group epoch the target was computed for
    (and, a streamtasks addition, by which assignor: ConsumerGroupDescribe's AssignorName)."""

    group_id: str
    assignment_epoch: int
    assignor_name: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class TargetAssignmentMetadataTombstone:
    group_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class TargetAssignmentMemberRecord:
    """``ConsumerGroupTargetAssignmentMember``: one member's target partitions and, from a
    client-side assignor, its assignment error and metadata (in that member's version)."""

    group_id: str
    member_id: str
    partitions: TopicPartitionSet = EMPTY_PARTITIONS
    error: int = ClientAssignmentErrorCode.NONE
    metadata_version: int = 0
    metadata_bytes: bytes = b""


@dataclass(frozen=True, slots=True, kw_only=True)
class TargetAssignmentMemberTombstone:
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class CurrentMemberAssignmentRecord:
    """``ConsumerGroupCurrentMemberAssignment``: the member's epoch and what it may own now.

    ``pending_revocation``: partitions it still owns but must give up before it can move to
    the next epoch. The error and metadata are those of the target it last moved to."""

    group_id: str
    member_id: str
    member_epoch: int
    previous_member_epoch: int
    state: MemberState = MemberState.STABLE
    assigned: TopicPartitionSet = EMPTY_PARTITIONS
    pending_revocation: TopicPartitionSet = EMPTY_PARTITIONS
    error: int = ClientAssignmentErrorCode.NONE
    metadata_version: int = 0
    metadata_bytes: bytes = b""


@dataclass(frozen=True, slots=True, kw_only=True)
class CurrentMemberAssignmentTombstone:
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientAssignmentRequestRecord:
    """streamtasks: ``member_id`` is asked (ShouldComputeAssignment) to compute the target for
    the group, which was at ``group_epoch`` when it was asked."""

    group_id: str
    member_id: str
    group_epoch: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientAssignmentRequestTombstone:
    group_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class PreparedMemberSpec:
    """What InstallAssignment is validated against, per member of the prepared epoch."""

    member_id: str
    subscribed_topic_ids: frozenset[uuid.UUID]
    minimum_version: int
    maximum_version: int


@dataclass(frozen=True, slots=True, kw_only=True)
class PreparedAssignmentRecord:
    """streamtasks: PrepareAssignment answered ``member_id`` with the group at ``group_epoch``;
    the members and topics it saw, so that the installed result is checked against them."""

    group_id: str
    member_id: str
    group_epoch: int
    assignor_name: str
    members: tuple[PreparedMemberSpec, ...]
    topics: tuple[TopicMetadata, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class PreparedAssignmentTombstone:
    group_id: str


Record = (
    GroupEpochRecord
    | GroupEpochTombstone
    | PartitionMetadataRecord
    | PartitionMetadataTombstone
    | MemberMetadataRecord
    | MemberMetadataTombstone
    | TargetAssignmentMetadataRecord
    | TargetAssignmentMetadataTombstone
    | TargetAssignmentMemberRecord
    | TargetAssignmentMemberTombstone
    | CurrentMemberAssignmentRecord
    | CurrentMemberAssignmentTombstone
    | ClientAssignmentRequestRecord
    | ClientAssignmentRequestTombstone
    | PreparedAssignmentRecord
    | PreparedAssignmentTombstone
)

_KINDS: dict[type[object], str] = {
    GroupEpochRecord: "group",
    GroupEpochTombstone: "group",
    PartitionMetadataRecord: "partition-metadata",
    PartitionMetadataTombstone: "partition-metadata",
    MemberMetadataRecord: "member",
    MemberMetadataTombstone: "member",
    TargetAssignmentMetadataRecord: "target",
    TargetAssignmentMetadataTombstone: "target",
    TargetAssignmentMemberRecord: "target-member",
    TargetAssignmentMemberTombstone: "target-member",
    CurrentMemberAssignmentRecord: "current-member",
    CurrentMemberAssignmentTombstone: "current-member",
    ClientAssignmentRequestRecord: "client-request",
    ClientAssignmentRequestTombstone: "client-request",
    PreparedAssignmentRecord: "prepared",
    PreparedAssignmentTombstone: "prepared",
}


def record_key(record: Record) -> tuple[str, ...]:
    """The compaction key: (record kind, group id[, member id]); a tombstone shares its record's."""
    kind = _KINDS[type(record)]
    member_id = getattr(record, "member_id", None)
    if kind in ("member", "target-member", "current-member"):
        assert member_id is not None
        return (kind, record.group_id, member_id)
    return (kind, record.group_id)
