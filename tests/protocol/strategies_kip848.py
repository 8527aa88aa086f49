"""Hypothesis strategies for the KIP-848 messages (heartbeat, describe, prepare, install)."""

from __future__ import annotations

import uuid

from hypothesis import strategies as st

from streamtasks.protocol.assignment_rpc import (
    ConsumerGroupInstallAssignmentRequest,
    ConsumerGroupInstallAssignmentResponse,
    ConsumerGroupPrepareAssignmentRequest,
    ConsumerGroupPrepareAssignmentResponse,
    InstalledMember,
    PreparedAssignor,
    PreparedMember,
    PreparedTopic,
)
from streamtasks.protocol.consumer_group import (
    ClientAssignor,
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    DescribedAssignment,
    DescribedGroup,
    DescribedMember,
    DescribedTopicPartitions,
    HeartbeatAssignment,
    TopicIdPartitions,
)
from streamtasks.protocol.errors import KafkaErrorCode

i8 = st.integers(-128, 127)
i16 = st.integers(-(1 << 15), (1 << 15) - 1)
i32 = st.integers(-(1 << 31), (1 << 31) - 1)
text = st.text(max_size=8)
opt_text = st.none() | text
uuids = st.uuids().map(lambda u: uuid.UUID(int=u.int))
small_bytes = st.binary(max_size=12)
errors = st.sampled_from(list(KafkaErrorCode))
partitions = st.lists(st.integers(0, 1 << 20), max_size=4).map(tuple)

topic_id_partitions = st.lists(
    st.builds(TopicIdPartitions, topic_id=uuids, partitions=partitions), max_size=3
).map(tuple)

client_assignors = st.lists(
    st.builds(
        ClientAssignor,
        name=text,
        minimum_version=i16,
        maximum_version=i16,
        reason=i8,
        metadata_version=i16,
        metadata_bytes=small_bytes,
    ),
    max_size=3,
).map(tuple)


def heartbeat_requests(
    version: int, *, extensions: bool = True
) -> st.SearchStrategy[ConsumerGroupHeartbeatRequest]:
    return st.builds(
        ConsumerGroupHeartbeatRequest,
        group_id=text,
        member_id=text,
        member_epoch=i32,
        instance_id=opt_text,
        rack_id=opt_text,
        rebalance_timeout_ms=st.integers(-1, 10**9),
        subscribed_topic_names=st.none() | st.lists(text, max_size=3).map(tuple),
        subscribed_topic_regex=opt_text if version >= 1 else st.none(),
        server_assignor=opt_text,
        topic_partitions=st.none() | topic_id_partitions,
        client_assignors=(st.none() | client_assignors) if extensions else st.none(),
    )


def heartbeat_responses(*, extensions: bool = True) -> st.SearchStrategy[ConsumerGroupHeartbeatResponse]:
    if extensions:
        assignment = st.builds(
            HeartbeatAssignment,
            topic_partitions=topic_id_partitions,
            pending_topic_partitions=topic_id_partitions,
            error=i8,
            metadata_version=i16,
            metadata_bytes=small_bytes,
        )
    else:
        assignment = st.builds(HeartbeatAssignment, topic_partitions=topic_id_partitions)
    return st.builds(
        ConsumerGroupHeartbeatResponse,
        error=errors,
        member_epoch=i32,
        heartbeat_interval_ms=st.integers(0, 10**9),
        error_message=opt_text,
        member_id=opt_text,
        assignment=st.none() | assignment,
        should_compute_assignment=st.booleans() if extensions else st.just(False),
        throttle_time_ms=st.integers(0, 10**6),
    )


describe_requests = st.builds(
    ConsumerGroupDescribeRequest,
    group_ids=st.lists(text, max_size=3).map(tuple),
    include_authorized_operations=st.booleans(),
)


def described_assignments(extensions: bool) -> st.SearchStrategy[DescribedAssignment]:
    tps = st.lists(
        st.builds(DescribedTopicPartitions, topic_id=uuids, topic_name=text, partitions=partitions),
        max_size=2,
    ).map(tuple)
    if not extensions:
        return st.builds(DescribedAssignment, topic_partitions=tps)
    return st.builds(
        DescribedAssignment, topic_partitions=tps, error=i8, metadata_version=i16, metadata_bytes=small_bytes
    )


def describe_responses(
    version: int, *, extensions: bool = True
) -> st.SearchStrategy[ConsumerGroupDescribeResponse]:
    member = st.builds(
        DescribedMember,
        member_id=text,
        member_epoch=i32,
        client_id=text,
        client_host=text,
        assignment=described_assignments(extensions),
        target_assignment=described_assignments(extensions),
        instance_id=opt_text,
        rack_id=opt_text,
        subscribed_topic_names=st.lists(text, max_size=2).map(tuple),
        subscribed_topic_regex=opt_text,
        member_type=i8 if version >= 1 else st.just(-1),
    )
    group = st.builds(
        DescribedGroup,
        error=errors,
        group_id=text,
        group_state=text,
        group_epoch=i32,
        assignment_epoch=i32,
        assignor_name=text,
        members=st.lists(member, max_size=2).map(tuple),
        error_message=opt_text,
        authorized_operations=i32,
    )
    return st.builds(
        ConsumerGroupDescribeResponse, groups=st.lists(group, max_size=2).map(tuple), throttle_time_ms=i32
    )


prepare_requests = st.builds(
    ConsumerGroupPrepareAssignmentRequest, group_id=text, member_id=text, member_epoch=i32
)
prepare_responses = st.builds(
    ConsumerGroupPrepareAssignmentResponse,
    error=errors,
    group_epoch=i32,
    assignor_name=text,
    members=st.lists(
        st.builds(
            PreparedMember,
            member_id=text,
            member_epoch=i32,
            subscribed_topic_ids=st.lists(uuids, max_size=2).map(tuple),
            assignor=st.builds(
                PreparedAssignor,
                reason=i8,
                minimum_version=i16,
                maximum_version=i16,
                metadata_version=i16,
                metadata_bytes=small_bytes,
            ),
            topic_partitions=topic_id_partitions,
            instance_id=opt_text,
            rack_id=opt_text,
        ),
        max_size=3,
    ).map(tuple),
    topics=st.lists(
        st.builds(PreparedTopic, topic_id=uuids, topic_name=text, num_partitions=i32), max_size=3
    ).map(tuple),
    error_message=opt_text,
    throttle_time_ms=i32,
)
install_requests = st.builds(
    ConsumerGroupInstallAssignmentRequest,
    group_id=text,
    member_id=text,
    member_epoch=i32,
    group_epoch=i32,
    error=i8,
    members=st.lists(
        st.builds(
            InstalledMember,
            member_id=text,
            topic_partitions=topic_id_partitions,
            metadata_version=i16,
            metadata_bytes=small_bytes,
        ),
        max_size=3,
    ).map(tuple),
)
install_responses = st.builds(
    ConsumerGroupInstallAssignmentResponse, error=errors, error_message=opt_text, throttle_time_ms=i32
)
