"""The records that persist a streams group (KIP-1071), one type per thing, each with a
tombstone (the same key, no value). Replaying them is the only change to a streams group's
state, and loading a group is replaying its records; every record is an upsert of its key
(:func:`record_key`), so the compacted log rebuilds the same group.

After Apache Kafka's ``Streams*Record`` types (group metadata, topology, member metadata,
target assignment metadata and members, current member assignment), with two differences:
the task offsets a member reports are part of its member record (Kafka keeps them in memory
only), and the group record carries the member that asked the application to shut down.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from streamtasks.membership.streams.records import Task
from streamtasks.protocol.streams_group import Endpoint, KeyValue, TaskOffset, Topology

__all__ = [
    "NO_TASKS",
    "StreamsCurrentAssignmentRecord",
    "StreamsCurrentAssignmentTombstone",
    "StreamsGroupRecord",
    "StreamsGroupTombstone",
    "StreamsMemberRecord",
    "StreamsMemberState",
    "StreamsMemberTombstone",
    "StreamsRecord",
    "StreamsTargetMemberRecord",
    "StreamsTargetMemberTombstone",
    "StreamsTargetMetadataRecord",
    "StreamsTargetMetadataTombstone",
    "StreamsTopologyRecord",
    "StreamsTopologyTombstone",
    "TaskSet",
    "record_key",
]

#: A set of tasks, each (subtopology id, partition).
TaskSet = frozenset[Task]
NO_TASKS: TaskSet = frozenset()


class StreamsMemberState(enum.Enum):
    """Where a member is in its reconciliation (Kafka's ``MemberState``)."""

    STABLE = "stable"
    #: It still owns active tasks it must give up before it moves to the target epoch.
    UNREVOKED_TASKS = "unrevoked_tasks"
    #: It is at the target epoch but some of its active tasks are not released by their
    #: previous owner yet.
    UNRELEASED_TASKS = "unreleased_tasks"


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsGroupRecord:
    """``StreamsGroupMetadata``: the group exists at ``epoch``. ``metadata``: the topics its
    topology reads or writes, (name, partition count or -1 when absent), as last seen; a change
    bumps the epoch. ``shutdown_requested_by``: a member asked the application to shut down."""

    group_id: str
    epoch: int
    metadata: tuple[tuple[str, int], ...] = ()
    shutdown_requested_by: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsGroupTombstone:
    group_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsTopologyRecord:
    """``StreamsGroupTopology``: the topology the members declared (the highest epoch)."""

    group_id: str
    topology: Topology


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsTopologyTombstone:
    group_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsMemberRecord:
    """``StreamsGroupMemberMetadata``: what the member told the coordinator."""

    group_id: str
    member_id: str
    process_id: str
    rebalance_timeout_ms: int
    topology_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    user_endpoint: Endpoint | None = None
    client_tags: tuple[KeyValue, ...] = ()
    task_offsets: tuple[TaskOffset, ...] = ()
    task_end_offsets: tuple[TaskOffset, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsMemberTombstone:
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsTargetMetadataRecord:
    """``StreamsGroupTargetAssignmentMetadata``: the epoch the target was computed for, by
    which assignor, (a probing rebalance the assignor asked for) when to compute again, and
    when it was computed (Kafka's ``AssignmentTimestamp``; 0 when no assignment interval is
    configured, which never needs it)."""

    group_id: str
    assignment_epoch: int
    assignor_name: str = ""
    followup_ms: int | None = None
    assignment_timestamp_ms: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsTargetMetadataTombstone:
    group_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsTargetMemberRecord:
    """``StreamsGroupTargetAssignmentMember``: one member's target tasks."""

    group_id: str
    member_id: str
    active: TaskSet = NO_TASKS
    standby: TaskSet = NO_TASKS
    warmup: TaskSet = NO_TASKS


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsTargetMemberTombstone:
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsCurrentAssignmentRecord:
    """``StreamsGroupCurrentMemberAssignment``: the member's epoch and the tasks it may own now;
    ``pending_revocation``: active tasks it still owns and must give up first."""

    group_id: str
    member_id: str
    member_epoch: int
    previous_member_epoch: int
    state: StreamsMemberState = StreamsMemberState.STABLE
    active: TaskSet = NO_TASKS
    standby: TaskSet = NO_TASKS
    warmup: TaskSet = NO_TASKS
    pending_revocation: TaskSet = NO_TASKS


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsCurrentAssignmentTombstone:
    group_id: str
    member_id: str


StreamsRecord = (
    StreamsGroupRecord
    | StreamsGroupTombstone
    | StreamsTopologyRecord
    | StreamsTopologyTombstone
    | StreamsMemberRecord
    | StreamsMemberTombstone
    | StreamsTargetMetadataRecord
    | StreamsTargetMetadataTombstone
    | StreamsTargetMemberRecord
    | StreamsTargetMemberTombstone
    | StreamsCurrentAssignmentRecord
    | StreamsCurrentAssignmentTombstone
)

_KINDS: dict[type[object], str] = {
    StreamsGroupRecord: "streams-group",
    StreamsGroupTombstone: "streams-group",
    StreamsTopologyRecord: "streams-topology",
    StreamsTopologyTombstone: "streams-topology",
    StreamsMemberRecord: "streams-member",
    StreamsMemberTombstone: "streams-member",
    StreamsTargetMetadataRecord: "streams-target",
    StreamsTargetMetadataTombstone: "streams-target",
    StreamsTargetMemberRecord: "streams-target-member",
    StreamsTargetMemberTombstone: "streams-target-member",
    StreamsCurrentAssignmentRecord: "streams-current-member",
    StreamsCurrentAssignmentTombstone: "streams-current-member",
}


def record_key(record: StreamsRecord) -> tuple[str, ...]:
    """The compaction key: (record kind, group id[, member id]); a tombstone shares its record's."""
    kind = _KINDS[type(record)]
    member_id = getattr(record, "member_id", None)
    if member_id is not None:
        return (kind, record.group_id, member_id)
    return (kind, record.group_id)
