"""Bytes of StreamsGroupDescribe (API key 89) bodies, v0 and v1, as Apache Kafka 4.4's
``StreamsGroupDescribe{Request,Response}Data`` write them; the rules of
:mod:`streamtasks.protocol.streams_group_codec` apply (``AssignorName`` is ignorable and dropped
at v0; a non-default ``IncludeTopologyDescription``, ``TopologyDescription`` or
``TopologyDescriptionStatus`` at v0 is a :class:`~streamtasks.errors.LocalProtocolError`)."""

from __future__ import annotations

from streamtasks.errors import LocalProtocolError
from streamtasks.protocol import _flex as F
from streamtasks.protocol import _streams_structs as S
from streamtasks.protocol._buf import Reader, Writer
from streamtasks.protocol.errors import KafkaErrorCode
from streamtasks.protocol.streams_group import (
    STREAMS_GROUP_DESCRIBE_VERSIONS,
    DescribedStreamsGroup,
    DescribedStreamsMember,
    DescribedSubtopology,
    DescribedTopology,
    StreamsGroupDescribeRequest,
    StreamsGroupDescribeResponse,
    TaskAssignment,
    TopologyDescription,
    TopologyDescriptionGlobalStore,
    TopologyDescriptionNode,
    TopologyDescriptionSubtopology,
)

__all__ = [
    "decode_streams_describe_request",
    "decode_streams_describe_response",
    "encode_streams_describe_request",
    "encode_streams_describe_response",
]

_WHAT = "StreamsGroupDescribe"


def _version(version: int, *, decoding: bool) -> None:
    F.check_version(version, STREAMS_GROUP_DESCRIBE_VERSIONS, _WHAT, decoding=decoding)


def _needs_v1(field: str) -> LocalProtocolError:
    return LocalProtocolError(f"{field} needs {_WHAT} v1")


# -- request --------------------------------------------------------------------------------------


def encode_streams_describe_request(request: StreamsGroupDescribeRequest, version: int = 1) -> bytes:
    _version(version, decoding=False)
    w = Writer()
    S.write_strings(w, request.group_ids, "GroupIds")
    F.write_bool(w, request.include_authorized_operations)
    if version >= 1:
        F.write_bool(w, request.include_topology_description)
    elif request.include_topology_description:
        raise _needs_v1("IncludeTopologyDescription")
    S.write_struct_end(w)
    return w.getvalue()


def decode_streams_describe_request(data: bytes, version: int = 1) -> StreamsGroupDescribeRequest:
    _version(version, decoding=True)
    r = Reader(data, f"StreamsGroupDescribeRequest v{version}")
    group_ids = S.read_strings(r, "GroupIds")
    include_operations = F.read_bool(r, "IncludeAuthorizedOperations")
    include_description = F.read_bool(r, "IncludeTopologyDescription") if version >= 1 else False
    S.read_struct_end(r, "StreamsGroupDescribeRequest")
    F.finish(r)
    return StreamsGroupDescribeRequest(
        group_ids=group_ids,
        include_authorized_operations=include_operations,
        include_topology_description=include_description,
    )


# -- the configured topology ----------------------------------------------------------------------


def _write_subtopology(w: Writer, s: DescribedSubtopology) -> None:
    F.write_compact_string(w, s.subtopology_id, "Subtopology.SubtopologyId")
    S.write_strings(w, s.source_topics, "Subtopology.SourceTopics")
    S.write_strings(w, s.repartition_sink_topics, "Subtopology.RepartitionSinkTopics")
    S.write_topic_infos(w, s.state_changelog_topics, "Subtopology.StateChangelogTopics")
    S.write_topic_infos(w, s.repartition_source_topics, "Subtopology.RepartitionSourceTopics")
    S.write_struct_end(w)


def _read_subtopology(r: Reader) -> DescribedSubtopology:
    subtopology_id = F.read_compact_string(r, "Subtopology.SubtopologyId")
    sources = S.read_strings(r, "Subtopology.SourceTopics")
    sinks = S.read_strings(r, "Subtopology.RepartitionSinkTopics")
    changelogs = S.read_topic_infos(r, "Subtopology.StateChangelogTopics")
    repartition = S.read_topic_infos(r, "Subtopology.RepartitionSourceTopics")
    S.read_struct_end(r, "Subtopology")
    return DescribedSubtopology(
        subtopology_id=subtopology_id,
        source_topics=sources,
        repartition_sink_topics=sinks,
        state_changelog_topics=changelogs,
        repartition_source_topics=repartition,
    )


def _write_topology(w: Writer, t: DescribedTopology | None) -> None:
    if t is None:
        w.int8(-1)
        return
    w.int8(1)
    w.int32(t.epoch, "Topology.Epoch")
    S.write_nullable_array(w, t.subtopologies, "Topology.Subtopologies", _write_subtopology)
    S.write_struct_end(w)


def _read_topology(r: Reader) -> DescribedTopology | None:
    if not F.read_nullable_struct_marker(r, "Topology"):
        return None
    epoch = r.int32()
    subtopologies = S.read_nullable_array(r, "Topology.Subtopologies", _read_subtopology, 6)
    S.read_struct_end(r, "Topology")
    return DescribedTopology(epoch=epoch, subtopologies=subtopologies)


# -- the topology description (v1, KIP-1331) ------------------------------------------------------


def _write_node(w: Writer, n: TopologyDescriptionNode) -> None:
    F.write_compact_string(w, n.name, "Node.Name")
    w.int8(n.node_type, "Node.NodeType")
    S.write_strings(w, n.source_topics, "Node.SourceTopics")
    F.write_compact_nullable_string(w, n.sink_topic, "Node.SinkTopic")
    S.write_strings(w, n.stores, "Node.Stores")
    S.write_strings(w, n.successors, "Node.Successors")
    S.write_struct_end(w)


def _read_node(r: Reader) -> TopologyDescriptionNode:
    name = F.read_compact_string(r, "Node.Name")
    node_type = r.int8()
    sources = S.read_strings(r, "Node.SourceTopics")
    sink = F.read_compact_nullable_string(r, "Node.SinkTopic")
    stores = S.read_strings(r, "Node.Stores")
    successors = S.read_strings(r, "Node.Successors")
    S.read_struct_end(r, "TopologyDescriptionNode")
    return TopologyDescriptionNode(
        name=name,
        node_type=node_type,
        source_topics=sources,
        sink_topic=sink,
        stores=stores,
        successors=successors,
    )


def _write_description_subtopology(w: Writer, s: TopologyDescriptionSubtopology) -> None:
    F.write_compact_string(w, s.subtopology_id, "TopologyDescriptionSubtopology.SubtopologyId")
    S.write_array(w, s.nodes, "TopologyDescriptionSubtopology.Nodes", _write_node)
    S.write_struct_end(w)


def _read_description_subtopology(r: Reader) -> TopologyDescriptionSubtopology:
    subtopology_id = F.read_compact_string(r, "TopologyDescriptionSubtopology.SubtopologyId")
    nodes = S.read_array(r, "TopologyDescriptionSubtopology.Nodes", _read_node, 7)
    S.read_struct_end(r, "TopologyDescriptionSubtopology")
    return TopologyDescriptionSubtopology(subtopology_id=subtopology_id, nodes=nodes)


def _write_global_store(w: Writer, g: TopologyDescriptionGlobalStore) -> None:
    _write_node(w, g.source)
    _write_node(w, g.processor)
    S.write_struct_end(w)


def _read_global_store(r: Reader) -> TopologyDescriptionGlobalStore:
    source, processor = _read_node(r), _read_node(r)
    S.read_struct_end(r, "TopologyDescriptionGlobalStore")
    return TopologyDescriptionGlobalStore(source=source, processor=processor)


def _write_description(w: Writer, d: TopologyDescription) -> None:
    S.write_array(w, d.subtopologies, "TopologyDescription.Subtopologies", _write_description_subtopology)
    S.write_array(w, d.global_stores, "TopologyDescription.GlobalStores", _write_global_store)
    S.write_struct_end(w)


def _read_description(r: Reader) -> TopologyDescription:
    subtopologies = S.read_array(r, "TopologyDescription.Subtopologies", _read_description_subtopology, 3)
    stores = S.read_array(r, "TopologyDescription.GlobalStores", _read_global_store, 15)
    S.read_struct_end(r, "TopologyDescription")
    return TopologyDescription(subtopologies=subtopologies, global_stores=stores)


# -- members --------------------------------------------------------------------------------------


def _write_assignment(w: Writer, a: TaskAssignment) -> None:
    S.write_task_ids(w, a.active_tasks, "Assignment.ActiveTasks")
    S.write_task_ids(w, a.standby_tasks, "Assignment.StandbyTasks")
    S.write_task_ids(w, a.warmup_tasks, "Assignment.WarmupTasks")
    S.write_struct_end(w)


def _read_assignment(r: Reader) -> TaskAssignment:
    active = S.read_task_ids(r, "Assignment.ActiveTasks") or ()
    standby = S.read_task_ids(r, "Assignment.StandbyTasks") or ()
    warmup = S.read_task_ids(r, "Assignment.WarmupTasks") or ()
    S.read_struct_end(r, "Assignment")
    return TaskAssignment(active_tasks=active, standby_tasks=standby, warmup_tasks=warmup)


def _write_member(w: Writer, m: DescribedStreamsMember) -> None:
    F.write_compact_string(w, m.member_id, "Member.MemberId")
    w.int32(m.member_epoch, "Member.MemberEpoch")
    F.write_compact_nullable_string(w, m.instance_id, "Member.InstanceId")
    F.write_compact_nullable_string(w, m.rack_id, "Member.RackId")
    F.write_compact_string(w, m.client_id, "Member.ClientId")
    F.write_compact_string(w, m.client_host, "Member.ClientHost")
    w.int32(m.topology_epoch, "Member.TopologyEpoch")
    F.write_compact_string(w, m.process_id, "Member.ProcessId")
    if m.user_endpoint is None:
        w.int8(-1)
    else:
        w.int8(1)
        S.write_endpoint(w, m.user_endpoint)
    S.write_key_values(w, m.client_tags, "Member.ClientTags")
    S.write_task_offsets(w, m.task_offsets, "Member.TaskOffsets")
    S.write_task_offsets(w, m.task_end_offsets, "Member.TaskEndOffsets")
    _write_assignment(w, m.assignment)
    _write_assignment(w, m.target_assignment)
    F.write_bool(w, m.is_classic)
    S.write_struct_end(w)


def _read_member(r: Reader) -> DescribedStreamsMember:
    member_id = F.read_compact_string(r, "Member.MemberId")
    epoch = r.int32()
    instance_id = F.read_compact_nullable_string(r, "Member.InstanceId")
    rack_id = F.read_compact_nullable_string(r, "Member.RackId")
    client_id = F.read_compact_string(r, "Member.ClientId")
    client_host = F.read_compact_string(r, "Member.ClientHost")
    topology_epoch = r.int32()
    process_id = F.read_compact_string(r, "Member.ProcessId")
    endpoint = S.read_endpoint(r) if F.read_nullable_struct_marker(r, "Member.UserEndpoint") else None
    tags = S.read_key_values(r, "Member.ClientTags") or ()
    offsets = S.read_task_offsets(r, "Member.TaskOffsets") or ()
    end_offsets = S.read_task_offsets(r, "Member.TaskEndOffsets") or ()
    assignment, target = _read_assignment(r), _read_assignment(r)
    is_classic = F.read_bool(r, "Member.IsClassic")
    S.read_struct_end(r, "Member")
    return DescribedStreamsMember(
        member_id=member_id,
        member_epoch=epoch,
        instance_id=instance_id,
        rack_id=rack_id,
        client_id=client_id,
        client_host=client_host,
        topology_epoch=topology_epoch,
        process_id=process_id,
        user_endpoint=endpoint,
        client_tags=tags,
        task_offsets=offsets,
        task_end_offsets=end_offsets,
        assignment=assignment,
        target_assignment=target,
        is_classic=is_classic,
    )


# -- response -------------------------------------------------------------------------------------


def _write_group(w: Writer, g: DescribedStreamsGroup, version: int) -> None:
    w.int16(int(g.error), "ErrorCode")
    F.write_compact_nullable_string(w, g.error_message, "ErrorMessage")
    F.write_compact_string(w, g.group_id, "GroupId")
    F.write_compact_string(w, g.group_state, "GroupState")
    w.int32(g.group_epoch, "GroupEpoch")
    w.int32(g.assignment_epoch, "AssignmentEpoch")
    _write_topology(w, g.topology)
    S.write_array(w, g.members, "Members", _write_member)
    w.int32(g.authorized_operations, "AuthorizedOperations")
    if version >= 1:
        if g.topology_description is None:
            w.int8(-1)
        else:
            w.int8(1)
            _write_description(w, g.topology_description)
        w.int8(g.topology_description_status, "TopologyDescriptionStatus")
        F.write_compact_nullable_string(w, g.assignor_name, "AssignorName")
    elif g.topology_description is not None:
        raise _needs_v1("TopologyDescription")
    elif g.topology_description_status != 0:
        raise _needs_v1("TopologyDescriptionStatus")
    S.write_struct_end(w)


def _read_group(r: Reader, version: int) -> DescribedStreamsGroup:
    error = KafkaErrorCode.of(r.int16())
    message = F.read_compact_nullable_string(r, "ErrorMessage")
    group_id = F.read_compact_string(r, "GroupId")
    state = F.read_compact_string(r, "GroupState")
    group_epoch, assignment_epoch = r.int32(), r.int32()
    topology = _read_topology(r)
    members = S.read_array(r, "Members", _read_member, 28)
    operations = r.int32()
    description, status, assignor = None, 0, None
    if version >= 1:
        if F.read_nullable_struct_marker(r, "TopologyDescription"):
            description = _read_description(r)
        status = r.int8()
        assignor = F.read_compact_nullable_string(r, "AssignorName")
    S.read_struct_end(r, "DescribedGroup")
    return DescribedStreamsGroup(
        error=error,
        error_message=message,
        group_id=group_id,
        group_state=state,
        group_epoch=group_epoch,
        assignment_epoch=assignment_epoch,
        topology=topology,
        members=members,
        authorized_operations=operations,
        topology_description=description,
        topology_description_status=status,
        assignor_name=assignor,
    )


def encode_streams_describe_response(response: StreamsGroupDescribeResponse, version: int = 1) -> bytes:
    _version(version, decoding=False)
    w = Writer()
    w.int32(response.throttle_time_ms, "ThrottleTimeMs")
    S.write_array(w, response.groups, "Groups", lambda x, g: _write_group(x, g, version))
    S.write_struct_end(w)
    return w.getvalue()


def decode_streams_describe_response(data: bytes, version: int = 1) -> StreamsGroupDescribeResponse:
    _version(version, decoding=True)
    r = Reader(data, f"StreamsGroupDescribeResponse v{version}")
    throttle = r.int32()
    groups = S.read_array(r, "Groups", lambda x: _read_group(x, version), 19)
    S.read_struct_end(r, "StreamsGroupDescribeResponse")
    F.finish(r)
    return StreamsGroupDescribeResponse(groups=groups, throttle_time_ms=throttle)
