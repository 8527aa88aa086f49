"""The KIP-848 consumer-group coordinator, sans-IO, with client-side assignment.

Written as Kafka's own group coordinator is: a write (heartbeat, prepare, install, timer,
metadata update) returns ``Result(records, response)`` and does not mutate; ``replay(record)``
is the only change to group state, and loading a group is replaying its records. Timers are
keyed writes; time is handed in as ``now_ms``. ``docs/membership.md`` ("The KIP-848
coordinator") tells the story.
"""

from streamtasks.coordinator.client_assignment import INVALID_ASSIGNMENT
from streamtasks.coordinator.coordinator import GroupCoordinator, default_assignors
from streamtasks.coordinator.group import ConsumerGroup
from streamtasks.coordinator.records import (
    ClientAssignmentRequestRecord,
    ClientAssignmentRequestTombstone,
    CurrentMemberAssignmentRecord,
    CurrentMemberAssignmentTombstone,
    GroupEpochRecord,
    GroupEpochTombstone,
    MemberMetadataRecord,
    MemberMetadataTombstone,
    PartitionMetadataRecord,
    PartitionMetadataTombstone,
    PreparedAssignmentRecord,
    PreparedAssignmentTombstone,
    PreparedMemberSpec,
    Record,
    TargetAssignmentMemberRecord,
    TargetAssignmentMemberTombstone,
    TargetAssignmentMetadataRecord,
    TargetAssignmentMetadataTombstone,
    record_key,
)
from streamtasks.coordinator.result import Result
from streamtasks.coordinator.timers import CancelTimer, ScheduleTimer, TimerKey, TimerKind, TimerOp
from streamtasks.coordinator.types import (
    EMPTY_PARTITIONS,
    CoordinatorConfig,
    GroupState,
    MemberState,
    MetadataImage,
    TopicMetadata,
    TopicPartitionSet,
)

__all__ = [
    "EMPTY_PARTITIONS",
    "INVALID_ASSIGNMENT",
    "CancelTimer",
    "ClientAssignmentRequestRecord",
    "ClientAssignmentRequestTombstone",
    "ConsumerGroup",
    "CoordinatorConfig",
    "CurrentMemberAssignmentRecord",
    "CurrentMemberAssignmentTombstone",
    "GroupCoordinator",
    "GroupEpochRecord",
    "GroupEpochTombstone",
    "GroupState",
    "MemberMetadataRecord",
    "MemberMetadataTombstone",
    "MemberState",
    "MetadataImage",
    "PartitionMetadataRecord",
    "PartitionMetadataTombstone",
    "PreparedAssignmentRecord",
    "PreparedAssignmentTombstone",
    "PreparedMemberSpec",
    "Record",
    "Result",
    "ScheduleTimer",
    "TargetAssignmentMemberRecord",
    "TargetAssignmentMemberTombstone",
    "TargetAssignmentMetadataRecord",
    "TargetAssignmentMetadataTombstone",
    "TimerKey",
    "TimerKind",
    "TimerOp",
    "TopicMetadata",
    "TopicPartitionSet",
    "default_assignors",
    "record_key",
]
