"""Bytes of StreamsGroupHeartbeat (88) and StreamsGroupDescribe (89) bodies, v0 and v1, exactly
as Apache Kafka 4.4's generated ``StreamsGroup*Data`` classes write them (the tests compare
bytes with kafka-clients 4.4.0 through ``java/codec``).

A field a version does not carry is written as Kafka's writer does: an ignorable one
(``AcceptableRecoveryLag`` and ``AssignorName`` at v0) is dropped, any other one that is not at
its default is a :class:`~streamtasks.errors.LocalProtocolError`. Bodies only: the request
header (v2) and response header (v1) are the framing's business. Decoders raise
:class:`~streamtasks.errors.DecodeError` on anything malformed, including trailing bytes.
"""

from __future__ import annotations

from streamtasks.errors import LocalProtocolError
from streamtasks.protocol import _flex as F
from streamtasks.protocol import _streams_structs as S
from streamtasks.protocol._buf import Reader, Writer
from streamtasks.protocol.errors import KafkaErrorCode
from streamtasks.protocol.streams_group import (
    STREAMS_GROUP_HEARTBEAT_VERSIONS,
    CopartitionGroup,
    EndpointToPartitions,
    StreamsGroupHeartbeatRequest,
    StreamsGroupHeartbeatResponse,
    StreamsStatus,
    Subtopology,
    TopicPartitions,
    Topology,
)

__all__ = [
    "decode_streams_heartbeat_request",
    "decode_streams_heartbeat_response",
    "encode_streams_heartbeat_request",
    "encode_streams_heartbeat_response",
]

_WHAT = "StreamsGroupHeartbeat"


def _version(version: int, *, decoding: bool) -> None:
    F.check_version(version, STREAMS_GROUP_HEARTBEAT_VERSIONS, _WHAT, decoding=decoding)


# -- the topology ---------------------------------------------------------------------------------


def _write_copartition_group(w: Writer, g: CopartitionGroup) -> None:
    S.write_int16s(w, g.source_topics, "CopartitionGroups.SourceTopics")
    S.write_int16s(w, g.source_topic_regex, "CopartitionGroups.SourceTopicRegex")
    S.write_int16s(w, g.repartition_source_topics, "CopartitionGroups.RepartitionSourceTopics")
    S.write_struct_end(w)


def _read_copartition_group(r: Reader) -> CopartitionGroup:
    topics = S.read_int16s(r, "CopartitionGroups.SourceTopics")
    regex = S.read_int16s(r, "CopartitionGroups.SourceTopicRegex")
    repartition = S.read_int16s(r, "CopartitionGroups.RepartitionSourceTopics")
    S.read_struct_end(r, "CopartitionGroup")
    return CopartitionGroup(
        source_topics=topics, source_topic_regex=regex, repartition_source_topics=repartition
    )


def _write_subtopology(w: Writer, s: Subtopology) -> None:
    F.write_compact_string(w, s.subtopology_id, "Subtopology.SubtopologyId")
    S.write_strings(w, s.source_topics, "Subtopology.SourceTopics")
    S.write_strings(w, s.source_topic_regex, "Subtopology.SourceTopicRegex")
    S.write_topic_infos(w, s.state_changelog_topics, "Subtopology.StateChangelogTopics")
    S.write_strings(w, s.repartition_sink_topics, "Subtopology.RepartitionSinkTopics")
    S.write_topic_infos(w, s.repartition_source_topics, "Subtopology.RepartitionSourceTopics")
    S.write_array(w, s.copartition_groups, "Subtopology.CopartitionGroups", _write_copartition_group)
    S.write_struct_end(w)


def _read_subtopology(r: Reader) -> Subtopology:
    subtopology_id = F.read_compact_string(r, "Subtopology.SubtopologyId")
    source_topics = S.read_strings(r, "Subtopology.SourceTopics")
    regex = S.read_strings(r, "Subtopology.SourceTopicRegex")
    changelogs = S.read_topic_infos(r, "Subtopology.StateChangelogTopics")
    sinks = S.read_strings(r, "Subtopology.RepartitionSinkTopics")
    sources = S.read_topic_infos(r, "Subtopology.RepartitionSourceTopics")
    groups = S.read_array(r, "Subtopology.CopartitionGroups", _read_copartition_group, 4)
    S.read_struct_end(r, "Subtopology")
    return Subtopology(
        subtopology_id=subtopology_id,
        source_topics=source_topics,
        source_topic_regex=regex,
        state_changelog_topics=changelogs,
        repartition_sink_topics=sinks,
        repartition_source_topics=sources,
        copartition_groups=groups,
    )


def _write_topology(w: Writer, t: Topology | None) -> None:
    if t is None:
        w.int8(-1)
        return
    w.int8(1)
    w.int32(t.epoch, "Topology.Epoch")
    S.write_array(w, t.subtopologies, "Topology.Subtopologies", _write_subtopology)
    S.write_struct_end(w)


def _read_topology(r: Reader) -> Topology | None:
    if not F.read_nullable_struct_marker(r, "Topology"):
        return None
    epoch = r.int32()
    subtopologies = S.read_array(r, "Topology.Subtopologies", _read_subtopology, 8)
    S.read_struct_end(r, "Topology")
    return Topology(epoch=epoch, subtopologies=subtopologies)


# -- request --------------------------------------------------------------------------------------


def encode_streams_heartbeat_request(request: StreamsGroupHeartbeatRequest, version: int = 1) -> bytes:
    """v0 and v1 are the same bytes (v1 only lets the broker answer with response v1)."""
    _version(version, decoding=False)
    w = Writer()
    F.write_compact_string(w, request.group_id, "GroupId")
    F.write_compact_string(w, request.member_id, "MemberId")
    w.int32(request.member_epoch, "MemberEpoch")
    w.int32(request.endpoint_information_epoch, "EndpointInformationEpoch")
    F.write_compact_nullable_string(w, request.instance_id, "InstanceId")
    F.write_compact_nullable_string(w, request.rack_id, "RackId")
    w.int32(request.rebalance_timeout_ms, "RebalanceTimeoutMs")
    _write_topology(w, request.topology)
    S.write_task_ids(w, request.active_tasks, "ActiveTasks")
    S.write_task_ids(w, request.standby_tasks, "StandbyTasks")
    S.write_task_ids(w, request.warmup_tasks, "WarmupTasks")
    F.write_compact_nullable_string(w, request.process_id, "ProcessId")
    if request.user_endpoint is None:
        w.int8(-1)
    else:
        w.int8(1)
        S.write_endpoint(w, request.user_endpoint)
    S.write_key_values(w, request.client_tags, "ClientTags")
    S.write_task_offsets(w, request.task_offsets, "TaskOffsets")
    S.write_task_offsets(w, request.task_end_offsets, "TaskEndOffsets")
    F.write_bool(w, request.shutdown_application)
    S.write_struct_end(w)
    return w.getvalue()


def decode_streams_heartbeat_request(data: bytes, version: int = 1) -> StreamsGroupHeartbeatRequest:
    _version(version, decoding=True)
    r = Reader(data, f"StreamsGroupHeartbeatRequest v{version}")
    group_id = F.read_compact_string(r, "GroupId")
    member_id = F.read_compact_string(r, "MemberId")
    member_epoch, endpoint_epoch = r.int32(), r.int32()
    instance_id = F.read_compact_nullable_string(r, "InstanceId")
    rack_id = F.read_compact_nullable_string(r, "RackId")
    rebalance_timeout_ms = r.int32()
    topology = _read_topology(r)
    active = S.read_task_ids(r, "ActiveTasks", nullable=True)
    standby = S.read_task_ids(r, "StandbyTasks", nullable=True)
    warmup = S.read_task_ids(r, "WarmupTasks", nullable=True)
    process_id = F.read_compact_nullable_string(r, "ProcessId")
    endpoint = S.read_endpoint(r) if F.read_nullable_struct_marker(r, "UserEndpoint") else None
    tags = S.read_key_values(r, "ClientTags", nullable=True)
    offsets = S.read_task_offsets(r, "TaskOffsets", nullable=True)
    end_offsets = S.read_task_offsets(r, "TaskEndOffsets", nullable=True)
    shutdown = F.read_bool(r, "ShutdownApplication")
    S.read_struct_end(r, "StreamsGroupHeartbeatRequest")
    F.finish(r)
    return StreamsGroupHeartbeatRequest(
        group_id=group_id,
        member_id=member_id,
        member_epoch=member_epoch,
        endpoint_information_epoch=endpoint_epoch,
        instance_id=instance_id,
        rack_id=rack_id,
        rebalance_timeout_ms=rebalance_timeout_ms,
        topology=topology,
        active_tasks=active,
        standby_tasks=standby,
        warmup_tasks=warmup,
        process_id=process_id,
        user_endpoint=endpoint,
        client_tags=tags,
        task_offsets=offsets,
        task_end_offsets=end_offsets,
        shutdown_application=shutdown,
    )


# -- response -------------------------------------------------------------------------------------


def _write_status(w: Writer, s: StreamsStatus) -> None:
    w.int8(s.status_code, "Status.StatusCode")
    F.write_compact_string(w, s.status_detail, "Status.StatusDetail")
    S.write_struct_end(w)


def _read_status(r: Reader) -> StreamsStatus:
    code = r.int8()
    detail = F.read_compact_string(r, "Status.StatusDetail")
    S.read_struct_end(r, "Status")
    return StreamsStatus(status_code=code, status_detail=detail)


def _write_topic_partitions(w: Writer, tp: TopicPartitions) -> None:
    F.write_compact_string(w, tp.topic, "TopicPartition.Topic")
    F.write_compact_int32s(w, tp.partitions, "TopicPartition.Partitions")
    S.write_struct_end(w)


def _read_topic_partitions(r: Reader) -> TopicPartitions:
    topic = F.read_compact_string(r, "TopicPartition.Topic")
    partitions = F.read_compact_int32s(r, "TopicPartition.Partitions")
    S.read_struct_end(r, "TopicPartition")
    return TopicPartitions(topic=topic, partitions=partitions)


def _write_endpoint_partitions(w: Writer, e: EndpointToPartitions) -> None:
    S.write_endpoint(w, e.user_endpoint)
    S.write_array(w, e.active_partitions, "ActivePartitions", _write_topic_partitions)
    S.write_array(w, e.standby_partitions, "StandbyPartitions", _write_topic_partitions)
    S.write_struct_end(w)


def _read_endpoint_partitions(r: Reader) -> EndpointToPartitions:
    endpoint = S.read_endpoint(r)
    active = S.read_array(r, "ActivePartitions", _read_topic_partitions, 3)
    standby = S.read_array(r, "StandbyPartitions", _read_topic_partitions, 3)
    S.read_struct_end(r, "EndpointToPartitions")
    return EndpointToPartitions(user_endpoint=endpoint, active_partitions=active, standby_partitions=standby)


def encode_streams_heartbeat_response(response: StreamsGroupHeartbeatResponse, version: int = 1) -> bytes:
    _version(version, decoding=False)
    w = Writer()
    w.int32(response.throttle_time_ms, "ThrottleTimeMs")
    w.int16(int(response.error), "ErrorCode")
    F.write_compact_nullable_string(w, response.error_message, "ErrorMessage")
    F.write_compact_string(w, response.member_id, "MemberId")
    w.int32(response.member_epoch, "MemberEpoch")
    w.int32(response.heartbeat_interval_ms, "HeartbeatIntervalMs")
    if version == 0:
        w.int32(response.acceptable_recovery_lag_legacy, "AcceptableRecoveryLagLegacy")
    elif response.acceptable_recovery_lag_legacy != 0:
        raise LocalProtocolError(f"AcceptableRecoveryLagLegacy exists only in {_WHAT} v0")
    w.int32(response.task_offset_interval_ms, "TaskOffsetIntervalMs")
    if version >= 1:
        w.int64(response.acceptable_recovery_lag, "AcceptableRecoveryLag")
    S.write_nullable_array(w, response.status, "Status", _write_status)
    S.write_task_ids(w, response.active_tasks, "ActiveTasks")
    S.write_task_ids(w, response.standby_tasks, "StandbyTasks")
    S.write_task_ids(w, response.warmup_tasks, "WarmupTasks")
    if version >= 1:
        F.write_bool(w, response.topology_description_required)
    elif response.topology_description_required:
        raise LocalProtocolError(f"TopologyDescriptionRequired needs {_WHAT} v1")
    w.int32(response.endpoint_information_epoch, "EndpointInformationEpoch")
    S.write_nullable_array(
        w, response.partitions_by_user_endpoint, "PartitionsByUserEndpoint", _write_endpoint_partitions
    )
    S.write_struct_end(w)
    return w.getvalue()


def decode_streams_heartbeat_response(data: bytes, version: int = 1) -> StreamsGroupHeartbeatResponse:
    _version(version, decoding=True)
    r = Reader(data, f"StreamsGroupHeartbeatResponse v{version}")
    throttle = r.int32()
    error = KafkaErrorCode.of(r.int16())
    message = F.read_compact_nullable_string(r, "ErrorMessage")
    member_id = F.read_compact_string(r, "MemberId")
    member_epoch, interval = r.int32(), r.int32()
    legacy_lag = r.int32() if version == 0 else 0
    offset_interval = r.int32()
    lag = r.int64() if version >= 1 else -1
    status = S.read_nullable_array(r, "Status", _read_status, 3)
    active = S.read_task_ids(r, "ActiveTasks", nullable=True)
    standby = S.read_task_ids(r, "StandbyTasks", nullable=True)
    warmup = S.read_task_ids(r, "WarmupTasks", nullable=True)
    description_required = F.read_bool(r, "TopologyDescriptionRequired") if version >= 1 else False
    endpoint_epoch = r.int32()
    endpoints = S.read_nullable_array(r, "PartitionsByUserEndpoint", _read_endpoint_partitions, 6)
    S.read_struct_end(r, "StreamsGroupHeartbeatResponse")
    F.finish(r)
    return StreamsGroupHeartbeatResponse(
        throttle_time_ms=throttle,
        error=error,
        error_message=message,
        member_id=member_id,
        member_epoch=member_epoch,
        heartbeat_interval_ms=interval,
        acceptable_recovery_lag_legacy=legacy_lag,
        task_offset_interval_ms=offset_interval,
        acceptable_recovery_lag=lag,
        status=status,
        active_tasks=active,
        standby_tasks=standby,
        warmup_tasks=warmup,
        topology_description_required=description_required,
        endpoint_information_epoch=endpoint_epoch,
        partitions_by_user_endpoint=endpoints,
    )
