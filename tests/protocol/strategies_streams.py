"""Hypothesis strategies for the streams-group messages (StreamsGroupHeartbeat / Describe), per
version: a field a version does not carry holds Kafka's default, so every message round-trips."""

from __future__ import annotations

from typing import TypeVar

from hypothesis import strategies as st

from streamtasks.protocol.errors import KafkaErrorCode
from streamtasks.protocol.streams_group import (
    CopartitionGroup,
    DescribedStreamsGroup,
    DescribedStreamsMember,
    DescribedSubtopology,
    DescribedTopology,
    Endpoint,
    EndpointToPartitions,
    KeyValue,
    StreamsGroupDescribeRequest,
    StreamsGroupDescribeResponse,
    StreamsGroupHeartbeatRequest,
    StreamsGroupHeartbeatResponse,
    StreamsStatus,
    Subtopology,
    TaskAssignment,
    TaskIds,
    TaskOffset,
    TopicInfo,
    TopicPartitions,
    Topology,
    TopologyDescription,
    TopologyDescriptionGlobalStore,
    TopologyDescriptionNode,
    TopologyDescriptionSubtopology,
)

__all__ = [
    "describe_requests",
    "describe_responses",
    "heartbeat_requests",
    "heartbeat_responses",
]

T = TypeVar("T")

i8 = st.integers(-128, 127)
i16 = st.integers(-(1 << 15), (1 << 15) - 1)
i32 = st.integers(-(1 << 31), (1 << 31) - 1)
i64 = st.integers(-(1 << 63), (1 << 63) - 1)
text = st.text(max_size=6)
opt_text = st.none() | text
errors = st.sampled_from(list(KafkaErrorCode))


def few(s: st.SearchStrategy[T], n: int = 2) -> st.SearchStrategy[tuple[T, ...]]:
    return st.lists(s, max_size=n).map(tuple)


def maybe(s: st.SearchStrategy[T]) -> st.SearchStrategy[T | None]:
    return st.none() | s


key_values = few(st.builds(KeyValue, key=text, value=text))
topic_infos = few(
    st.builds(TopicInfo, name=text, partitions=i32, replication_factor=i16, topic_configs=key_values)
)
endpoints = st.builds(Endpoint, host=text, port=st.integers(0, 0xFFFF))
task_ids = few(st.builds(TaskIds, subtopology_id=text, partitions=few(i32, 3)), 3)
task_offsets = few(st.builds(TaskOffset, subtopology_id=text, partition=i32, offset=i64))

subtopologies = st.builds(
    Subtopology,
    subtopology_id=text,
    source_topics=few(text),
    source_topic_regex=few(text),
    state_changelog_topics=topic_infos,
    repartition_sink_topics=few(text),
    repartition_source_topics=topic_infos,
    copartition_groups=few(
        st.builds(
            CopartitionGroup,
            source_topics=few(i16),
            source_topic_regex=few(i16),
            repartition_source_topics=few(i16),
        )
    ),
)
topologies = st.builds(Topology, epoch=i32, subtopologies=few(subtopologies))


def heartbeat_requests(version: int = 1) -> st.SearchStrategy[StreamsGroupHeartbeatRequest]:
    del version  # v0 and v1 carry the same fields
    return st.builds(
        StreamsGroupHeartbeatRequest,
        group_id=text,
        member_id=text,
        member_epoch=i32,
        endpoint_information_epoch=i32,
        instance_id=opt_text,
        rack_id=opt_text,
        rebalance_timeout_ms=i32,
        topology=maybe(topologies),
        active_tasks=maybe(task_ids),
        standby_tasks=maybe(task_ids),
        warmup_tasks=maybe(task_ids),
        process_id=opt_text,
        user_endpoint=maybe(endpoints),
        client_tags=maybe(key_values),
        task_offsets=maybe(task_offsets),
        task_end_offsets=maybe(task_offsets),
        shutdown_application=st.booleans(),
    )


def heartbeat_responses(version: int = 1) -> st.SearchStrategy[StreamsGroupHeartbeatResponse]:
    topic_partitions = few(st.builds(TopicPartitions, topic=text, partitions=few(i32, 3)))
    return st.builds(
        StreamsGroupHeartbeatResponse,
        error=errors,
        member_id=text,
        member_epoch=i32,
        heartbeat_interval_ms=i32,
        throttle_time_ms=i32,
        error_message=opt_text,
        acceptable_recovery_lag_legacy=i32 if version == 0 else st.just(0),
        task_offset_interval_ms=i32,
        acceptable_recovery_lag=i64 if version >= 1 else st.just(-1),
        status=maybe(few(st.builds(StreamsStatus, status_code=i8, status_detail=text))),
        active_tasks=maybe(task_ids),
        standby_tasks=maybe(task_ids),
        warmup_tasks=maybe(task_ids),
        topology_description_required=st.booleans() if version >= 1 else st.just(False),
        endpoint_information_epoch=i32,
        partitions_by_user_endpoint=maybe(
            few(
                st.builds(
                    EndpointToPartitions,
                    user_endpoint=endpoints,
                    active_partitions=topic_partitions,
                    standby_partitions=topic_partitions,
                )
            )
        ),
    )


def describe_requests(version: int = 1) -> st.SearchStrategy[StreamsGroupDescribeRequest]:
    return st.builds(
        StreamsGroupDescribeRequest,
        group_ids=few(text, 3),
        include_authorized_operations=st.booleans(),
        include_topology_description=st.booleans() if version >= 1 else st.just(False),
    )


nodes = st.builds(
    TopologyDescriptionNode,
    name=text,
    node_type=i8,
    source_topics=few(text),
    sink_topic=opt_text,
    stores=few(text),
    successors=few(text),
)
descriptions = st.builds(
    TopologyDescription,
    subtopologies=few(st.builds(TopologyDescriptionSubtopology, subtopology_id=text, nodes=few(nodes))),
    global_stores=few(st.builds(TopologyDescriptionGlobalStore, source=nodes, processor=nodes), 1),
)
assignments = st.builds(TaskAssignment, active_tasks=task_ids, standby_tasks=task_ids, warmup_tasks=task_ids)
members = st.builds(
    DescribedStreamsMember,
    member_id=text,
    member_epoch=i32,
    client_id=text,
    client_host=text,
    topology_epoch=i32,
    process_id=text,
    assignment=assignments,
    target_assignment=assignments,
    instance_id=opt_text,
    rack_id=opt_text,
    user_endpoint=maybe(endpoints),
    client_tags=key_values,
    task_offsets=task_offsets,
    task_end_offsets=task_offsets,
    is_classic=st.booleans(),
)
described_topologies = st.builds(
    DescribedTopology,
    epoch=i32,
    subtopologies=maybe(
        few(
            st.builds(
                DescribedSubtopology,
                subtopology_id=text,
                source_topics=few(text),
                repartition_sink_topics=few(text),
                state_changelog_topics=topic_infos,
                repartition_source_topics=topic_infos,
            )
        )
    ),
)


def describe_responses(version: int = 1) -> st.SearchStrategy[StreamsGroupDescribeResponse]:
    v1 = version >= 1
    groups = st.builds(
        DescribedStreamsGroup,
        error=errors,
        group_id=text,
        group_state=text,
        group_epoch=i32,
        assignment_epoch=i32,
        topology=maybe(described_topologies),
        members=few(members),
        error_message=opt_text,
        authorized_operations=i32,
        topology_description=maybe(descriptions) if v1 else st.none(),
        topology_description_status=i8 if v1 else st.just(0),
        assignor_name=opt_text if v1 else st.none(),
    )
    return st.builds(StreamsGroupDescribeResponse, groups=few(groups), throttle_time_ms=i32)
