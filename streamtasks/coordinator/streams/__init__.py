"""The streams-group coordinator (KIP-1071), sans-IO, with streamtasks' task assignors.

Written as the consumer-group coordinator (:mod:`streamtasks.coordinator`) is, and sharing its
timers and metadata image: a write (heartbeat, timer) returns ``StreamsResult(records,
response, timers)`` and does not mutate; ``replay(record)`` is the only change, and loading a
group is replaying its records. The target assignment comes from a task assignor of
``assignors/task`` (``sticky`` as Apache Kafka's broker places tasks, ``high_availability``
with KIP-441 warm-ups and the lag-triggered hand-over, or any plug-in of the registry).
``docs/streams-groups.md`` ("The coordinator") tells the story.
"""

from streamtasks.coordinator.streams.configured import ConfiguredTopology, configure
from streamtasks.coordinator.streams.coordinator import StreamsGroupCoordinator
from streamtasks.coordinator.streams.group import StreamsGroup, StreamsGroupState
from streamtasks.coordinator.streams.records import (
    StreamsCurrentAssignmentRecord,
    StreamsCurrentAssignmentTombstone,
    StreamsGroupRecord,
    StreamsGroupTombstone,
    StreamsMemberRecord,
    StreamsMemberState,
    StreamsMemberTombstone,
    StreamsRecord,
    StreamsTargetMemberRecord,
    StreamsTargetMemberTombstone,
    StreamsTargetMetadataRecord,
    StreamsTargetMetadataTombstone,
    StreamsTopologyRecord,
    StreamsTopologyTombstone,
    record_key,
)
from streamtasks.coordinator.streams.write import StreamsCoordinatorConfig, StreamsResult

__all__ = [
    "ConfiguredTopology",
    "StreamsCoordinatorConfig",
    "StreamsCurrentAssignmentRecord",
    "StreamsCurrentAssignmentTombstone",
    "StreamsGroup",
    "StreamsGroupCoordinator",
    "StreamsGroupRecord",
    "StreamsGroupState",
    "StreamsGroupTombstone",
    "StreamsMemberRecord",
    "StreamsMemberState",
    "StreamsMemberTombstone",
    "StreamsRecord",
    "StreamsResult",
    "StreamsTargetMemberRecord",
    "StreamsTargetMemberTombstone",
    "StreamsTargetMetadataRecord",
    "StreamsTargetMetadataTombstone",
    "StreamsTopologyRecord",
    "StreamsTopologyTombstone",
    "configure",
    "record_key",
]
