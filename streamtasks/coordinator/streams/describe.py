"""StreamsGroupDescribe's answer for one group, read from the group's state."""

from __future__ import annotations

from streamtasks.coordinator.streams.configured import configure
from streamtasks.coordinator.streams.group import StreamsGroup
from streamtasks.coordinator.streams.records import TaskSet
from streamtasks.coordinator.types import MetadataImage
from streamtasks.membership.streams.records import task_ids
from streamtasks.protocol.errors import KafkaErrorCode
from streamtasks.protocol.streams_group import (
    DescribedStreamsGroup,
    DescribedStreamsMember,
    DescribedSubtopology,
    DescribedTopology,
    TaskAssignment,
)

__all__ = ["describe_group"]


def _assignment(active: TaskSet, standby: TaskSet, warmup: TaskSet) -> TaskAssignment:
    return TaskAssignment(
        active_tasks=task_ids(active), standby_tasks=task_ids(standby), warmup_tasks=task_ids(warmup)
    )


def describe_group(
    group_id: str, group: StreamsGroup | None, image: MetadataImage, assignor_name: str
) -> DescribedStreamsGroup:
    if group is None or group.meta is None:
        return DescribedStreamsGroup(
            error=KafkaErrorCode.GROUP_ID_NOT_FOUND,
            group_id=group_id,
            error_message=f"Group {group_id} not found.",
            group_state="Dead",
        )
    topology = None
    if group.topology is not None:
        topology = DescribedTopology(
            epoch=group.topology.epoch,
            subtopologies=tuple(
                DescribedSubtopology(
                    subtopology_id=s.subtopology_id,
                    source_topics=s.source_topics,
                    repartition_sink_topics=s.repartition_sink_topics,
                    state_changelog_topics=s.state_changelog_topics,
                    repartition_source_topics=s.repartition_source_topics,
                )
                for s in group.topology.subtopologies
            ),
        )
    members = []
    for mid, m in sorted(group.members.items()):
        current, target = group.current(mid), group.target(mid)
        members.append(
            DescribedStreamsMember(
                member_id=mid,
                member_epoch=current.member_epoch if current else 0,
                client_id=m.client_id,
                client_host=m.client_host,
                topology_epoch=m.topology_epoch,
                process_id=m.process_id,
                instance_id=m.instance_id,
                rack_id=m.rack_id,
                user_endpoint=m.user_endpoint,
                client_tags=m.client_tags,
                task_offsets=m.task_offsets,
                task_end_offsets=m.task_end_offsets,
                assignment=_assignment(
                    (current.active | current.pending_revocation) if current else frozenset(),
                    current.standby if current else frozenset(),
                    current.warmup if current else frozenset(),
                ),
                target_assignment=_assignment(
                    target.active if target else frozenset(),
                    target.standby if target else frozenset(),
                    target.warmup if target else frozenset(),
                ),
            )
        )
    ready = configure(group.topology, image).ready
    return DescribedStreamsGroup(
        error=KafkaErrorCode.NONE,
        group_id=group_id,
        group_state=group.state(ready=ready).value,
        group_epoch=group.epoch,
        assignment_epoch=group.target_epoch,
        topology=topology,
        members=tuple(members),
        assignor_name=(group.target_meta.assignor_name if group.target_meta else "") or assignor_name,
    )
