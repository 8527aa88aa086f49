"""Bytes of ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69) bodies, v0 and v1.

Without the streamtasks tagged fields the bytes are exactly Apache Kafka's (the tests compare
them with kio's serializer and with vectors written by hand from the JSON schemas); with them,
Apache Kafka reads the same message and skips the tags. Bodies only: the request header (v2)
and response header (v1) are the framing's business. Decoders raise
:class:`~streamtasks.errors.DecodeError` on anything malformed, including trailing bytes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from streamtasks.errors import LocalProtocolError
from streamtasks.protocol import _flex as F
from streamtasks.protocol._buf import Reader, Writer
from streamtasks.protocol.consumer_group import (
    CONSUMER_GROUP_DESCRIBE_VERSIONS,
    CONSUMER_GROUP_HEARTBEAT_VERSIONS,
    TAG_ASSIGNMENT_ERROR,
    TAG_CLIENT_ASSIGNORS,
    TAG_METADATA_BYTES,
    TAG_METADATA_VERSION,
    TAG_PENDING_TOPIC_PARTITIONS,
    TAG_SHOULD_COMPUTE_ASSIGNMENT,
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

__all__ = [
    "decode_describe_request",
    "decode_describe_response",
    "decode_heartbeat_request",
    "decode_heartbeat_response",
    "encode_describe_request",
    "encode_describe_response",
    "encode_heartbeat_request",
    "encode_heartbeat_response",
    "read_topic_id_partitions",
    "write_topic_id_partitions",
]

T = TypeVar("T")


def _encoded(write: Callable[[Writer], None]) -> bytes:
    w = Writer()
    write(w)
    return w.getvalue()


# -- shared structs ------------------------------------------------------------------------------


def write_topic_id_partitions(w: Writer, items: tuple[TopicIdPartitions, ...], field: str) -> None:
    """A compact array of ``{TopicId uuid, Partitions []int32, tagged}``."""
    F.write_compact_array_count(w, len(items), field)
    for item in items:
        w.raw(item.topic_id.bytes)
        F.write_compact_int32s(w, item.partitions, f"{field}.Partitions")
        F.write_tagged_fields(w, ())


def _read_one_topic_partitions(r: Reader, field: str) -> TopicIdPartitions:
    topic_id = r.uuid()
    partitions = F.read_compact_int32s(r, f"{field}.Partitions")
    F.read_tagged_fields(r, field, {})
    return TopicIdPartitions(topic_id=topic_id, partitions=partitions)


def read_topic_id_partitions(r: Reader, field: str) -> tuple[TopicIdPartitions, ...]:
    count = F.read_compact_array_count(r, field, 18)
    return tuple(_read_one_topic_partitions(r, field) for _ in range(count))


def _read_nullable_topic_id_partitions(r: Reader, field: str) -> tuple[TopicIdPartitions, ...] | None:
    count = F.read_compact_nullable_array_count(r, field, 18)
    if count is None:
        return None
    return tuple(_read_one_topic_partitions(r, field) for _ in range(count))


def _write_client_assignors(w: Writer, assignors: tuple[ClientAssignor, ...]) -> None:
    F.write_compact_array_count(w, len(assignors), "ClientAssignors")
    for a in assignors:
        F.write_compact_string(w, a.name, "ClientAssignors.Name")
        w.int16(a.minimum_version, "ClientAssignors.MinimumVersion")
        w.int16(a.maximum_version, "ClientAssignors.MaximumVersion")
        w.int8(a.reason, "ClientAssignors.Reason")
        w.int16(a.metadata_version, "ClientAssignors.MetadataVersion")
        F.write_compact_bytes(w, a.metadata_bytes, "ClientAssignors.MetadataBytes")
        F.write_tagged_fields(w, ())


def _read_client_assignors(r: Reader) -> tuple[ClientAssignor, ...]:
    count = F.read_compact_array_count(r, "ClientAssignors", 10)
    out = []
    for _ in range(count):
        name = F.read_compact_string(r, "ClientAssignors.Name")
        minimum, maximum, reason = r.int16(), r.int16(), r.int8()
        version = r.int16()
        metadata = F.read_compact_bytes(r, "ClientAssignors.MetadataBytes")
        F.read_tagged_fields(r, "ClientAssignors", {})
        out.append(
            ClientAssignor(
                name=name,
                minimum_version=minimum,
                maximum_version=maximum,
                reason=reason,
                metadata_version=version,
                metadata_bytes=metadata,
            )
        )
    return tuple(out)


def _assignment_tags(
    pending: tuple[TopicIdPartitions, ...], error: int, version: int, metadata: bytes
) -> list[tuple[int, bytes]]:
    tags: list[tuple[int, bytes]] = []
    if pending:
        tags.append(
            (
                TAG_PENDING_TOPIC_PARTITIONS,
                _encoded(lambda w: write_topic_id_partitions(w, pending, "PendingTopicPartitions")),
            )
        )
    if error:
        tags.append((TAG_ASSIGNMENT_ERROR, _encoded(lambda w: w.int8(error, "Assignment.Error"))))
    if version:
        tags.append(
            (TAG_METADATA_VERSION, _encoded(lambda w: w.int16(version, "Assignment.MetadataVersion")))
        )
    if metadata:
        tags.append(
            (
                TAG_METADATA_BYTES,
                _encoded(lambda w: F.write_compact_bytes(w, metadata, "Assignment.MetadataBytes")),
            )
        )
    return tags


_ASSIGNMENT_TAGS: dict[int, Callable[[Reader], object]] = {
    TAG_PENDING_TOPIC_PARTITIONS: lambda r: read_topic_id_partitions(r, "PendingTopicPartitions"),
    TAG_ASSIGNMENT_ERROR: lambda r: r.int8(),
    TAG_METADATA_VERSION: lambda r: r.int16(),
    TAG_METADATA_BYTES: lambda r: F.read_compact_bytes(r, "Assignment.MetadataBytes"),
}


def _tag(found: dict[int, object], tag: int, default: T, kind: type[T]) -> T:
    value = found.get(tag, default)
    assert isinstance(value, kind)
    return value


# -- ConsumerGroupHeartbeat ------------------------------------------------------------------------


def encode_heartbeat_request(request: ConsumerGroupHeartbeatRequest, version: int = 1) -> bytes:
    F.check_version(version, CONSUMER_GROUP_HEARTBEAT_VERSIONS, "ConsumerGroupHeartbeat", decoding=False)
    w = Writer()
    F.write_compact_string(w, request.group_id, "GroupId")
    F.write_compact_string(w, request.member_id, "MemberId")
    w.int32(request.member_epoch, "MemberEpoch")
    F.write_compact_nullable_string(w, request.instance_id, "InstanceId")
    F.write_compact_nullable_string(w, request.rack_id, "RackId")
    w.int32(request.rebalance_timeout_ms, "RebalanceTimeoutMs")
    names = request.subscribed_topic_names
    F.write_compact_nullable_array_count(w, None if names is None else len(names), "SubscribedTopicNames")
    for name in names or ():
        F.write_compact_string(w, name, "SubscribedTopicNames")
    if version >= 1:
        F.write_compact_nullable_string(w, request.subscribed_topic_regex, "SubscribedTopicRegex")
    elif request.subscribed_topic_regex is not None:
        raise LocalProtocolError("SubscribedTopicRegex needs ConsumerGroupHeartbeat v1")
    F.write_compact_nullable_string(w, request.server_assignor, "ServerAssignor")
    owned = request.topic_partitions
    if owned is None:
        F.write_compact_nullable_array_count(w, None, "TopicPartitions")
    else:
        write_topic_id_partitions(w, owned, "TopicPartitions")
    tags: list[tuple[int, bytes]] = []
    assignors = request.client_assignors
    if assignors is not None:
        tags.append((TAG_CLIENT_ASSIGNORS, _encoded(lambda x: _write_client_assignors(x, assignors))))
    F.write_tagged_fields(w, tags)
    return w.getvalue()


def decode_heartbeat_request(data: bytes, version: int = 1) -> ConsumerGroupHeartbeatRequest:
    F.check_version(version, CONSUMER_GROUP_HEARTBEAT_VERSIONS, "ConsumerGroupHeartbeat", decoding=True)
    r = Reader(data, f"ConsumerGroupHeartbeatRequest v{version}")
    group_id = F.read_compact_string(r, "GroupId")
    member_id = F.read_compact_string(r, "MemberId")
    member_epoch = r.int32()
    instance_id = F.read_compact_nullable_string(r, "InstanceId")
    rack_id = F.read_compact_nullable_string(r, "RackId")
    rebalance_timeout_ms = r.int32()
    count = F.read_compact_nullable_array_count(r, "SubscribedTopicNames", 1)
    names = (
        None
        if count is None
        else tuple(F.read_compact_string(r, "SubscribedTopicNames") for _ in range(count))
    )
    regex = F.read_compact_nullable_string(r, "SubscribedTopicRegex") if version >= 1 else None
    server_assignor = F.read_compact_nullable_string(r, "ServerAssignor")
    owned = _read_nullable_topic_id_partitions(r, "TopicPartitions")
    found = F.read_tagged_fields(
        r, "ConsumerGroupHeartbeatRequest", {TAG_CLIENT_ASSIGNORS: _read_client_assignors}
    )
    F.finish(r)
    return ConsumerGroupHeartbeatRequest(
        group_id=group_id,
        member_id=member_id,
        member_epoch=member_epoch,
        instance_id=instance_id,
        rack_id=rack_id,
        rebalance_timeout_ms=rebalance_timeout_ms,
        subscribed_topic_names=names,
        subscribed_topic_regex=regex,
        server_assignor=server_assignor,
        topic_partitions=owned,
        client_assignors=found.get(TAG_CLIENT_ASSIGNORS),
    )


def encode_heartbeat_response(response: ConsumerGroupHeartbeatResponse, version: int = 1) -> bytes:
    F.check_version(version, CONSUMER_GROUP_HEARTBEAT_VERSIONS, "ConsumerGroupHeartbeat", decoding=False)
    w = Writer()
    w.int32(response.throttle_time_ms, "ThrottleTimeMs")
    w.int16(int(response.error), "ErrorCode")
    F.write_compact_nullable_string(w, response.error_message, "ErrorMessage")
    F.write_compact_nullable_string(w, response.member_id, "MemberId")
    w.int32(response.member_epoch, "MemberEpoch")
    w.int32(response.heartbeat_interval_ms, "HeartbeatIntervalMs")
    a = response.assignment
    if a is None:
        w.int8(-1)
    else:
        w.int8(1)
        write_topic_id_partitions(w, a.topic_partitions, "Assignment.TopicPartitions")
        F.write_tagged_fields(
            w, _assignment_tags(a.pending_topic_partitions, a.error, a.metadata_version, a.metadata_bytes)
        )
    tags = [(TAG_SHOULD_COMPUTE_ASSIGNMENT, b"\x01")] if response.should_compute_assignment else []
    F.write_tagged_fields(w, tags)
    return w.getvalue()


def decode_heartbeat_response(data: bytes, version: int = 1) -> ConsumerGroupHeartbeatResponse:
    F.check_version(version, CONSUMER_GROUP_HEARTBEAT_VERSIONS, "ConsumerGroupHeartbeat", decoding=True)
    r = Reader(data, f"ConsumerGroupHeartbeatResponse v{version}")
    throttle = r.int32()
    error = KafkaErrorCode.of(r.int16())
    message = F.read_compact_nullable_string(r, "ErrorMessage")
    member_id = F.read_compact_nullable_string(r, "MemberId")
    member_epoch = r.int32()
    interval = r.int32()
    assignment = None
    if F.read_nullable_struct_marker(r, "Assignment"):
        owned = read_topic_id_partitions(r, "Assignment.TopicPartitions")
        found = F.read_tagged_fields(r, "Assignment", _ASSIGNMENT_TAGS)
        assignment = HeartbeatAssignment(
            topic_partitions=owned,
            pending_topic_partitions=_tag(found, TAG_PENDING_TOPIC_PARTITIONS, (), tuple),
            error=_tag(found, TAG_ASSIGNMENT_ERROR, 0, int),
            metadata_version=_tag(found, TAG_METADATA_VERSION, 0, int),
            metadata_bytes=_tag(found, TAG_METADATA_BYTES, b"", bytes),
        )
    top = F.read_tagged_fields(
        r,
        "ConsumerGroupHeartbeatResponse",
        {TAG_SHOULD_COMPUTE_ASSIGNMENT: lambda x: F.read_bool(x, "ShouldComputeAssignment")},
    )
    F.finish(r)
    return ConsumerGroupHeartbeatResponse(
        error=error,
        error_message=message,
        member_id=member_id,
        member_epoch=member_epoch,
        heartbeat_interval_ms=interval,
        assignment=assignment,
        should_compute_assignment=bool(top.get(TAG_SHOULD_COMPUTE_ASSIGNMENT, False)),
        throttle_time_ms=throttle,
    )


# -- ConsumerGroupDescribe -------------------------------------------------------------------------


def encode_describe_request(request: ConsumerGroupDescribeRequest, version: int = 1) -> bytes:
    F.check_version(version, CONSUMER_GROUP_DESCRIBE_VERSIONS, "ConsumerGroupDescribe", decoding=False)
    w = Writer()
    F.write_compact_array_count(w, len(request.group_ids), "GroupIds")
    for group_id in request.group_ids:
        F.write_compact_string(w, group_id, "GroupIds")
    F.write_bool(w, request.include_authorized_operations)
    F.write_tagged_fields(w, ())
    return w.getvalue()


def decode_describe_request(data: bytes, version: int = 1) -> ConsumerGroupDescribeRequest:
    F.check_version(version, CONSUMER_GROUP_DESCRIBE_VERSIONS, "ConsumerGroupDescribe", decoding=True)
    r = Reader(data, f"ConsumerGroupDescribeRequest v{version}")
    count = F.read_compact_array_count(r, "GroupIds", 1)
    group_ids = tuple(F.read_compact_string(r, "GroupIds") for _ in range(count))
    include = F.read_bool(r, "IncludeAuthorizedOperations")
    F.read_tagged_fields(r, "ConsumerGroupDescribeRequest", {})
    F.finish(r)
    return ConsumerGroupDescribeRequest(group_ids=group_ids, include_authorized_operations=include)


def _write_described_assignment(w: Writer, a: DescribedAssignment, field: str) -> None:
    F.write_compact_array_count(w, len(a.topic_partitions), f"{field}.TopicPartitions")
    for tp in a.topic_partitions:
        w.raw(tp.topic_id.bytes)
        F.write_compact_string(w, tp.topic_name, f"{field}.TopicName")
        F.write_compact_int32s(w, tp.partitions, f"{field}.Partitions")
        F.write_tagged_fields(w, ())
    F.write_tagged_fields(w, _assignment_tags((), a.error, a.metadata_version, a.metadata_bytes))


def _read_described_assignment(r: Reader, field: str) -> DescribedAssignment:
    count = F.read_compact_array_count(r, f"{field}.TopicPartitions", 19)
    items = []
    for _ in range(count):
        topic_id = r.uuid()
        name = F.read_compact_string(r, f"{field}.TopicName")
        partitions = F.read_compact_int32s(r, f"{field}.Partitions")
        F.read_tagged_fields(r, field, {})
        items.append(DescribedTopicPartitions(topic_id=topic_id, topic_name=name, partitions=partitions))
    found = F.read_tagged_fields(r, field, _ASSIGNMENT_TAGS)
    return DescribedAssignment(
        topic_partitions=tuple(items),
        error=_tag(found, TAG_ASSIGNMENT_ERROR, 0, int),
        metadata_version=_tag(found, TAG_METADATA_VERSION, 0, int),
        metadata_bytes=_tag(found, TAG_METADATA_BYTES, b"", bytes),
    )


def _write_member(w: Writer, m: DescribedMember, version: int) -> None:
    F.write_compact_string(w, m.member_id, "MemberId")
    F.write_compact_nullable_string(w, m.instance_id, "InstanceId")
    F.write_compact_nullable_string(w, m.rack_id, "RackId")
    w.int32(m.member_epoch, "MemberEpoch")
    F.write_compact_string(w, m.client_id, "ClientId")
    F.write_compact_string(w, m.client_host, "ClientHost")
    F.write_compact_array_count(w, len(m.subscribed_topic_names), "SubscribedTopicNames")
    for name in m.subscribed_topic_names:
        F.write_compact_string(w, name, "SubscribedTopicNames")
    F.write_compact_nullable_string(w, m.subscribed_topic_regex, "SubscribedTopicRegex")
    _write_described_assignment(w, m.assignment, "Assignment")
    _write_described_assignment(w, m.target_assignment, "TargetAssignment")
    if version >= 1:
        w.int8(m.member_type, "MemberType")
    elif m.member_type != -1:
        raise LocalProtocolError("MemberType needs ConsumerGroupDescribe v1")
    F.write_tagged_fields(w, ())


def _read_member(r: Reader, version: int) -> DescribedMember:
    member_id = F.read_compact_string(r, "MemberId")
    instance_id = F.read_compact_nullable_string(r, "InstanceId")
    rack_id = F.read_compact_nullable_string(r, "RackId")
    epoch = r.int32()
    client_id = F.read_compact_string(r, "ClientId")
    client_host = F.read_compact_string(r, "ClientHost")
    count = F.read_compact_array_count(r, "SubscribedTopicNames", 1)
    names = tuple(F.read_compact_string(r, "SubscribedTopicNames") for _ in range(count))
    regex = F.read_compact_nullable_string(r, "SubscribedTopicRegex")
    assignment = _read_described_assignment(r, "Assignment")
    target = _read_described_assignment(r, "TargetAssignment")
    member_type = r.int8() if version >= 1 else -1
    F.read_tagged_fields(r, "Member", {})
    return DescribedMember(
        member_id=member_id,
        instance_id=instance_id,
        rack_id=rack_id,
        member_epoch=epoch,
        client_id=client_id,
        client_host=client_host,
        subscribed_topic_names=names,
        subscribed_topic_regex=regex,
        assignment=assignment,
        target_assignment=target,
        member_type=member_type,
    )


def encode_describe_response(response: ConsumerGroupDescribeResponse, version: int = 1) -> bytes:
    F.check_version(version, CONSUMER_GROUP_DESCRIBE_VERSIONS, "ConsumerGroupDescribe", decoding=False)
    w = Writer()
    w.int32(response.throttle_time_ms, "ThrottleTimeMs")
    F.write_compact_array_count(w, len(response.groups), "Groups")
    for g in response.groups:
        w.int16(int(g.error), "ErrorCode")
        F.write_compact_nullable_string(w, g.error_message, "ErrorMessage")
        F.write_compact_string(w, g.group_id, "GroupId")
        F.write_compact_string(w, g.group_state, "GroupState")
        w.int32(g.group_epoch, "GroupEpoch")
        w.int32(g.assignment_epoch, "AssignmentEpoch")
        F.write_compact_string(w, g.assignor_name, "AssignorName")
        F.write_compact_array_count(w, len(g.members), "Members")
        for m in g.members:
            _write_member(w, m, version)
        w.int32(g.authorized_operations, "AuthorizedOperations")
        F.write_tagged_fields(w, ())
    F.write_tagged_fields(w, ())
    return w.getvalue()


def decode_describe_response(data: bytes, version: int = 1) -> ConsumerGroupDescribeResponse:
    F.check_version(version, CONSUMER_GROUP_DESCRIBE_VERSIONS, "ConsumerGroupDescribe", decoding=True)
    r = Reader(data, f"ConsumerGroupDescribeResponse v{version}")
    throttle = r.int32()
    count = F.read_compact_array_count(r, "Groups", 20)
    groups = []
    for _ in range(count):
        error = KafkaErrorCode.of(r.int16())
        message = F.read_compact_nullable_string(r, "ErrorMessage")
        group_id = F.read_compact_string(r, "GroupId")
        state = F.read_compact_string(r, "GroupState")
        group_epoch, assignment_epoch = r.int32(), r.int32()
        assignor = F.read_compact_string(r, "AssignorName")
        n = F.read_compact_array_count(r, "Members", 16)
        members = tuple(_read_member(r, version) for _ in range(n))
        operations = r.int32()
        F.read_tagged_fields(r, "DescribedGroup", {})
        groups.append(
            DescribedGroup(
                error=error,
                error_message=message,
                group_id=group_id,
                group_state=state,
                group_epoch=group_epoch,
                assignment_epoch=assignment_epoch,
                assignor_name=assignor,
                members=members,
                authorized_operations=operations,
            )
        )
    F.read_tagged_fields(r, "ConsumerGroupDescribeResponse", {})
    F.finish(r)
    return ConsumerGroupDescribeResponse(groups=tuple(groups), throttle_time_ms=throttle)
