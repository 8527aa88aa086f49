"""A KIP-848 member advertises what its client-side assignor writes itself (the same
``subscription_user_data`` hook a classic member calls for JoinGroup), and the assignment's
metadata bytes reach the same assignor's ``on_assignment``."""

from __future__ import annotations

import uuid

from assignors.partition.hooks import MemberAssignment, on_assignment
from assignors.partition.sticky import StickyAssignor
from assignors.partition.sticky_user_data import StickyUserData, decode_sticky_userdata
from assignors.task.high_availability import HighAvailabilityTaskAssignor
from assignors.types import AssignmentConfigs
from streamtasks.membership.consumer import metadata_from_hook
from streamtasks.protocol.userdata import AssignmentInfo, decode_subscription_info, encode_assignment_info
from streamtasks.streams import StreamsPartitionAssignor
from topology import TaskId, TopicPartition, TopologyBuilder


def test_metadata_carries_the_bytes_the_assignor_writes() -> None:
    previous = (TopicPartition("t", 2),)
    metadata = metadata_from_hook(StickyAssignor(), topics=("t",), previous=previous, epoch=5)
    assert decode_sticky_userdata(metadata.metadata_bytes) == StickyUserData(
        partitions=previous, generation=5
    )
    assert (metadata.minimum_version, metadata.maximum_version) == (0, StickyAssignor.version)


def test_the_streams_assignor_writes_and_reads_through_the_hooks() -> None:
    builder = TopologyBuilder("app")
    builder.stream("foo").store("counts")
    process = uuid.uuid5(uuid.NAMESPACE_OID, "a")
    assignor = StreamsPartitionAssignor(
        builder.build(),
        task_assignor=HighAvailabilityTaskAssignor(),
        configs=AssignmentConfigs(),
        end_offsets=dict,
        now_ms=lambda: 0,
        process_id=lambda: process,
        task_offset_sums=lambda: {TaskId(0, 1): 4},
    )
    metadata = metadata_from_hook(assignor, topics=("foo",))
    info = decode_subscription_info(metadata.metadata_bytes)
    assert (info.process_id, dict(info.task_offset_sums)) == (process, {TaskId(0, 1): 4})
    named = AssignmentInfo(standby_tasks=frozenset({TaskId(0, 0)}))
    got = on_assignment(assignor, MemberAssignment(user_data=encode_assignment_info(named), generation=3))
    assert got == named
