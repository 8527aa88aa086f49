"""KIP-1071's streams-group RPCs, decoded: StreamsGroupHeartbeat (API key 88, v0-v1) and
StreamsGroupDescribe (89, v0-v1) as Apache Kafka 4.4 ships them
(``clients/src/main/resources/common/message/StreamsGroup*.json``).

Field names are the snake_case of Kafka's (``TaskOffsetIntervalMs`` is
``task_offset_interval_ms``), every field of every version is here, and a field a version does
not carry holds Kafka's default. The byte codecs are in
:mod:`streamtasks.protocol.streams_group_codec`; ``docs/streams-groups.md`` has the layouts and
what the broker needs.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from streamtasks.protocol.errors import KafkaErrorCode

__all__ = [
    "STREAMS_GROUP_DESCRIBE_API_KEY",
    "STREAMS_GROUP_DESCRIBE_VERSIONS",
    "STREAMS_GROUP_HEARTBEAT_API_KEY",
    "STREAMS_GROUP_HEARTBEAT_VERSIONS",
    "CopartitionGroup",
    "DescribedStreamsGroup",
    "DescribedStreamsMember",
    "DescribedSubtopology",
    "DescribedTopology",
    "Endpoint",
    "EndpointToPartitions",
    "KeyValue",
    "StreamsGroupDescribeRequest",
    "StreamsGroupDescribeResponse",
    "StreamsGroupHeartbeatRequest",
    "StreamsGroupHeartbeatResponse",
    "StreamsGroupStatus",
    "StreamsStatus",
    "Subtopology",
    "TaskAssignment",
    "TaskIds",
    "TaskOffset",
    "TopicInfo",
    "TopicPartitions",
    "Topology",
    "TopologyDescription",
    "TopologyDescriptionGlobalStore",
    "TopologyDescriptionNode",
    "TopologyDescriptionStatus",
    "TopologyDescriptionSubtopology",
]

STREAMS_GROUP_HEARTBEAT_API_KEY = 88
STREAMS_GROUP_DESCRIBE_API_KEY = 89
#: (lowest, highest) version streamtasks encodes and decodes.
STREAMS_GROUP_HEARTBEAT_VERSIONS = (0, 1)
STREAMS_GROUP_DESCRIBE_VERSIONS = (0, 1)


class StreamsGroupStatus(enum.IntEnum):
    """The heartbeat response's status codes (``Status.StatusCode``, int8)."""

    STALE_TOPOLOGY = 0
    MISSING_SOURCE_TOPICS = 1
    INCORRECTLY_PARTITIONED_TOPICS = 2
    MISSING_INTERNAL_TOPICS = 3
    SHUTDOWN_APPLICATION = 4
    ASSIGNMENT_DELAYED = 5
    #: Sent only to members that heartbeat with v1 (KAFKA-20744).
    MISSING_CLIENT_TAGS = 6


class TopologyDescriptionStatus(enum.IntEnum):
    """StreamsGroupDescribe v1's ``TopologyDescriptionStatus`` (KIP-1331)."""

    NOT_REQUESTED = 0
    NOT_STORED = 1
    ERROR = 2
    AVAILABLE = 3


# -- shared structs -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class KeyValue:
    key: str
    value: str


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicInfo:
    """An internal topic: ``partitions`` 0 means "not enforced" (always 0 for changelogs),
    ``replication_factor`` 0 the broker's default."""

    name: str
    partitions: int = 0
    replication_factor: int = 0
    topic_configs: tuple[KeyValue, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Endpoint:
    """A user endpoint for interactive queries; ``port`` is a uint16."""

    host: str
    port: int


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskOffset:
    """A task's cumulative changelog offset (or end offset): the sum over its changelogs."""

    subtopology_id: str
    partition: int
    offset: int


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskIds:
    """The tasks of one subtopology: one task per partition number."""

    subtopology_id: str
    partitions: tuple[int, ...]


# -- StreamsGroupHeartbeat ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class CopartitionGroup:
    """Indexes into the subtopology's ``source_topics``, ``source_topic_regex`` and
    ``repartition_source_topics`` (int16 each)."""

    source_topics: tuple[int, ...] = ()
    source_topic_regex: tuple[int, ...] = ()
    repartition_source_topics: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Subtopology:
    subtopology_id: str
    source_topics: tuple[str, ...] = ()
    source_topic_regex: tuple[str, ...] = ()
    state_changelog_topics: tuple[TopicInfo, ...] = ()
    repartition_sink_topics: tuple[str, ...] = ()
    repartition_source_topics: tuple[TopicInfo, ...] = ()
    copartition_groups: tuple[CopartitionGroup, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Topology:
    """The topology a member declares when it joins (member epoch 0)."""

    epoch: int
    subtopologies: tuple[Subtopology, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsGroupHeartbeatRequest:
    """StreamsGroupHeartbeat request (v0 and v1 carry the same fields). ``None`` means "not
    provided / unchanged since the last heartbeat" for every nullable field, as on the wire."""

    group_id: str
    member_id: str
    member_epoch: int
    endpoint_information_epoch: int = 0
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    topology: Topology | None = None
    active_tasks: tuple[TaskIds, ...] | None = None
    standby_tasks: tuple[TaskIds, ...] | None = None
    warmup_tasks: tuple[TaskIds, ...] | None = None
    process_id: str | None = None
    user_endpoint: Endpoint | None = None
    client_tags: tuple[KeyValue, ...] | None = None
    task_offsets: tuple[TaskOffset, ...] | None = None
    task_end_offsets: tuple[TaskOffset, ...] | None = None
    shutdown_application: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsStatus:
    """One status of the group (``status_code``: a :class:`StreamsGroupStatus` value, or a
    code this version of streamtasks does not know)."""

    status_code: int
    status_detail: str


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicPartitions:
    topic: str
    partitions: tuple[int, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class EndpointToPartitions:
    """Which source partitions (repartition sources included) one member hosts; several
    entries share an endpoint when a client runs several threads."""

    user_endpoint: Endpoint
    active_partitions: tuple[TopicPartitions, ...] = ()
    standby_partitions: tuple[TopicPartitions, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsGroupHeartbeatResponse:
    """StreamsGroupHeartbeat response. Task lists and ``partitions_by_user_endpoint`` are
    ``None`` when unchanged. ``acceptable_recovery_lag_legacy`` (int32) exists only in v0,
    ``acceptable_recovery_lag`` (int64, -1: unsupported) and ``topology_description_required``
    only from v1."""

    error: KafkaErrorCode
    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int
    throttle_time_ms: int = 0
    error_message: str | None = None
    acceptable_recovery_lag_legacy: int = 0
    task_offset_interval_ms: int = 0
    acceptable_recovery_lag: int = -1
    status: tuple[StreamsStatus, ...] | None = ()
    active_tasks: tuple[TaskIds, ...] | None = None
    standby_tasks: tuple[TaskIds, ...] | None = None
    warmup_tasks: tuple[TaskIds, ...] | None = None
    topology_description_required: bool = False
    endpoint_information_epoch: int = 0
    partitions_by_user_endpoint: tuple[EndpointToPartitions, ...] | None = None


# -- StreamsGroupDescribe -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsGroupDescribeRequest:
    """``include_topology_description`` exists from v1."""

    group_ids: tuple[str, ...]
    include_authorized_operations: bool = False
    include_topology_description: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribedSubtopology:
    """A subtopology as the broker configured it (partition counts set, regexes resolved)."""

    subtopology_id: str
    source_topics: tuple[str, ...] = ()
    repartition_sink_topics: tuple[str, ...] = ()
    state_changelog_topics: tuple[TopicInfo, ...] = ()
    repartition_source_topics: tuple[TopicInfo, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribedTopology:
    """``subtopologies`` is None while the group is not configured (missing or badly
    partitioned source topics)."""

    epoch: int
    subtopologies: tuple[DescribedSubtopology, ...] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskAssignment:
    """A member's current or target tasks."""

    active_tasks: tuple[TaskIds, ...] = ()
    standby_tasks: tuple[TaskIds, ...] = ()
    warmup_tasks: tuple[TaskIds, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribedStreamsMember:
    member_id: str
    member_epoch: int
    client_id: str
    client_host: str
    topology_epoch: int
    process_id: str
    assignment: TaskAssignment
    target_assignment: TaskAssignment
    instance_id: str | None = None
    rack_id: str | None = None
    user_endpoint: Endpoint | None = None
    client_tags: tuple[KeyValue, ...] = ()
    task_offsets: tuple[TaskOffset, ...] = ()
    task_end_offsets: tuple[TaskOffset, ...] = ()
    is_classic: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class TopologyDescriptionNode:
    """``node_type``: 1 source, 2 processor, 3 sink (KIP-1331)."""

    name: str
    node_type: int
    source_topics: tuple[str, ...] = ()
    sink_topic: str | None = None
    stores: tuple[str, ...] = ()
    successors: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class TopologyDescriptionSubtopology:
    subtopology_id: str
    nodes: tuple[TopologyDescriptionNode, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class TopologyDescriptionGlobalStore:
    source: TopologyDescriptionNode
    processor: TopologyDescriptionNode


@dataclass(frozen=True, slots=True, kw_only=True)
class TopologyDescription:
    subtopologies: tuple[TopologyDescriptionSubtopology, ...] = ()
    global_stores: tuple[TopologyDescriptionGlobalStore, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribedStreamsGroup:
    """One group of a StreamsGroupDescribe response. From v1: ``topology_description`` (set
    iff the status is AVAILABLE), its status and ``assignor_name`` (dropped silently at v0, as
    Kafka's ignorable field)."""

    error: KafkaErrorCode
    group_id: str
    group_state: str = ""
    group_epoch: int = 0
    assignment_epoch: int = 0
    topology: DescribedTopology | None = None
    members: tuple[DescribedStreamsMember, ...] = ()
    error_message: str | None = None
    authorized_operations: int = -(1 << 31)
    topology_description: TopologyDescription | None = None
    topology_description_status: int = TopologyDescriptionStatus.NOT_REQUESTED
    assignor_name: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsGroupDescribeResponse:
    groups: tuple[DescribedStreamsGroup, ...]
    throttle_time_ms: int = 0
