"""The seed KIP-848's client-side assignment RPCs on private API keys:
ConsumerGroupPrepareAssignment (``PREPARE_ASSIGNMENT_API_KEY``) and
ConsumerGroupInstallAssignment (``INSTALL_ASSIGNMENT_API_KEY``), version 0, flexible.

Apache Kafka never gave these RPCs API keys (client-side assignment was dropped before 3.7), so
only a streamtasks coordinator serves them; a member learns that it may use them from
ApiVersions. The keys sit far above Apache's (0-94 as of 4.4, allocated one after another), in
the upper part of the int16 range no Apache release will reach. Byte layouts and every
deviation from the seed: ``docs/protocol.md`` ("KIP-848 RPCs").
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from streamtasks.errors import DecodeError, LocalProtocolError
from streamtasks.protocol import _flex as F
from streamtasks.protocol._buf import Reader, Writer
from streamtasks.protocol.consumer_group import ClientAssignmentErrorCode, TopicIdPartitions
from streamtasks.protocol.consumer_group_codec import read_topic_id_partitions, write_topic_id_partitions
from streamtasks.protocol.errors import KafkaErrorCode

__all__ = [
    "INSTALL_ASSIGNMENT_API_KEY",
    "INSTALL_ASSIGNMENT_VERSIONS",
    "PREPARE_ASSIGNMENT_API_KEY",
    "PREPARE_ASSIGNMENT_VERSIONS",
    "ConsumerGroupInstallAssignmentRequest",
    "ConsumerGroupInstallAssignmentResponse",
    "ConsumerGroupPrepareAssignmentRequest",
    "ConsumerGroupPrepareAssignmentResponse",
    "InstalledMember",
    "PreparedAssignor",
    "PreparedMember",
    "PreparedTopic",
    "decode_install_request",
    "decode_install_response",
    "decode_prepare_request",
    "decode_prepare_response",
    "encode_install_request",
    "encode_install_response",
    "encode_prepare_request",
    "encode_prepare_response",
]

#: "848" in the upper int16 range: Apache allocates keys sequentially from 0 (94 in 4.4).
PREPARE_ASSIGNMENT_API_KEY = 30848
INSTALL_ASSIGNMENT_API_KEY = 30849
PREPARE_ASSIGNMENT_VERSIONS = (0, 0)
INSTALL_ASSIGNMENT_VERSIONS = (0, 0)


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupPrepareAssignmentRequest:
    group_id: str
    member_id: str
    member_epoch: int


@dataclass(frozen=True, slots=True, kw_only=True)
class PreparedAssignor:
    """A member's entry for the selected client-side assignor. The version range is a
    streamtasks addition: the assignor must write each member's assignment metadata in a
    version that member reads."""

    reason: int
    minimum_version: int
    maximum_version: int
    metadata_version: int
    metadata_bytes: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class PreparedMember:
    """One member as the assignor sees it; ``topic_partitions`` is its current *target*."""

    member_id: str
    member_epoch: int
    subscribed_topic_ids: tuple[uuid.UUID, ...]
    assignor: PreparedAssignor
    topic_partitions: tuple[TopicIdPartitions, ...]
    instance_id: str | None = None
    rack_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class PreparedTopic:
    topic_id: uuid.UUID
    topic_name: str
    num_partitions: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupPrepareAssignmentResponse:
    error: KafkaErrorCode
    group_epoch: int = -1
    assignor_name: str = ""
    members: tuple[PreparedMember, ...] = ()
    topics: tuple[PreparedTopic, ...] = ()
    error_message: str | None = None
    throttle_time_ms: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class InstalledMember:
    member_id: str
    topic_partitions: tuple[TopicIdPartitions, ...]
    metadata_version: int = 0
    metadata_bytes: bytes = b""


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupInstallAssignmentRequest:
    """``group_epoch`` is the epoch the assignment was computed for (PrepareAssignment's)."""

    group_id: str
    member_id: str
    member_epoch: int
    group_epoch: int
    members: tuple[InstalledMember, ...]
    error: int = ClientAssignmentErrorCode.NONE


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupInstallAssignmentResponse:
    error: KafkaErrorCode
    error_message: str | None = None
    throttle_time_ms: int = 0


def _reader(data: bytes, what: str, version: int) -> Reader:
    if version != 0:
        raise DecodeError(f"{what} version {version} is not supported (only 0)")
    return Reader(data, f"{what} v{version}")


def _writer(what: str, version: int) -> Writer:
    if version != 0:
        raise LocalProtocolError(f"{what} version {version} is not supported (only 0)")
    return Writer()


def _finish(r: Reader) -> None:
    F.read_tagged_fields(r, r.what, {})
    if r.remaining:
        raise r.fail(f"{r.remaining} trailing byte(s)")


def _error_header(w: Writer, throttle: int, error: KafkaErrorCode, message: str | None) -> None:
    w.int32(throttle, "ThrottleTimeMs")
    w.int16(int(error), "ErrorCode")
    F.write_compact_nullable_string(w, message, "ErrorMessage")


def _identity(w: Writer, group_id: str, member_id: str, member_epoch: int) -> None:
    F.write_compact_string(w, group_id, "GroupId")
    F.write_compact_string(w, member_id, "MemberId")
    w.int32(member_epoch, "MemberEpoch")


# -- PrepareAssignment -------------------------------------------------------------------------------


def encode_prepare_request(request: ConsumerGroupPrepareAssignmentRequest, version: int = 0) -> bytes:
    w = _writer("ConsumerGroupPrepareAssignmentRequest", version)
    _identity(w, request.group_id, request.member_id, request.member_epoch)
    F.write_tagged_fields(w, ())
    return w.getvalue()


def decode_prepare_request(data: bytes, version: int = 0) -> ConsumerGroupPrepareAssignmentRequest:
    r = _reader(data, "ConsumerGroupPrepareAssignmentRequest", version)
    group_id = F.read_compact_string(r, "GroupId")
    member_id = F.read_compact_string(r, "MemberId")
    epoch = r.int32()
    _finish(r)
    return ConsumerGroupPrepareAssignmentRequest(group_id=group_id, member_id=member_id, member_epoch=epoch)


def encode_prepare_response(response: ConsumerGroupPrepareAssignmentResponse, version: int = 0) -> bytes:
    w = _writer("ConsumerGroupPrepareAssignmentResponse", version)
    _error_header(w, response.throttle_time_ms, response.error, response.error_message)
    w.int32(response.group_epoch, "GroupEpoch")
    F.write_compact_string(w, response.assignor_name, "AssignorName")
    F.write_compact_array_count(w, len(response.members), "Members")
    for m in response.members:
        F.write_compact_string(w, m.member_id, "Members.MemberId")
        w.int32(m.member_epoch, "Members.MemberEpoch")
        F.write_compact_nullable_string(w, m.instance_id, "Members.InstanceId")
        F.write_compact_nullable_string(w, m.rack_id, "Members.RackId")
        F.write_compact_uuids(w, m.subscribed_topic_ids, "Members.SubscribedTopicIds")
        a = m.assignor
        w.int8(a.reason, "Assignor.Reason")
        w.int16(a.minimum_version, "Assignor.MinimumVersion")
        w.int16(a.maximum_version, "Assignor.MaximumVersion")
        w.int16(a.metadata_version, "Assignor.MetadataVersion")
        F.write_compact_bytes(w, a.metadata_bytes, "Assignor.MetadataBytes")
        F.write_tagged_fields(w, ())
        write_topic_id_partitions(w, m.topic_partitions, "Members.TopicPartitions")
        F.write_tagged_fields(w, ())
    F.write_compact_array_count(w, len(response.topics), "Topics")
    for t in response.topics:
        w.raw(t.topic_id.bytes)
        F.write_compact_string(w, t.topic_name, "Topics.TopicName")
        w.int32(t.num_partitions, "Topics.NumPartitions")
        F.write_tagged_fields(w, ())
    F.write_tagged_fields(w, ())
    return w.getvalue()


def _read_prepared_member(r: Reader) -> PreparedMember:
    member_id = F.read_compact_string(r, "Members.MemberId")
    epoch = r.int32()
    instance_id = F.read_compact_nullable_string(r, "Members.InstanceId")
    rack_id = F.read_compact_nullable_string(r, "Members.RackId")
    topic_ids = F.read_compact_uuids(r, "Members.SubscribedTopicIds")
    reason, minimum, maximum, version = r.int8(), r.int16(), r.int16(), r.int16()
    metadata = F.read_compact_bytes(r, "Assignor.MetadataBytes")
    F.read_tagged_fields(r, "Assignor", {})
    partitions = read_topic_id_partitions(r, "Members.TopicPartitions")
    F.read_tagged_fields(r, "Members", {})
    return PreparedMember(
        member_id=member_id,
        member_epoch=epoch,
        instance_id=instance_id,
        rack_id=rack_id,
        subscribed_topic_ids=topic_ids,
        assignor=PreparedAssignor(
            reason=reason,
            minimum_version=minimum,
            maximum_version=maximum,
            metadata_version=version,
            metadata_bytes=metadata,
        ),
        topic_partitions=partitions,
    )


def decode_prepare_response(data: bytes, version: int = 0) -> ConsumerGroupPrepareAssignmentResponse:
    r = _reader(data, "ConsumerGroupPrepareAssignmentResponse", version)
    throttle = r.int32()
    error = KafkaErrorCode.of(r.int16())
    message = F.read_compact_nullable_string(r, "ErrorMessage")
    group_epoch = r.int32()
    assignor = F.read_compact_string(r, "AssignorName")
    # member: id 1, epoch 4, instance 1, rack 1, topic ids 1, assignor 9, partitions 1, tags 1
    count = F.read_compact_array_count(r, "Members", 19)
    members = tuple(_read_prepared_member(r) for _ in range(count))
    count = F.read_compact_array_count(r, "Topics", 22)
    topics = []
    for _ in range(count):
        topic_id = r.uuid()
        name = F.read_compact_string(r, "Topics.TopicName")
        partitions = r.int32()
        F.read_tagged_fields(r, "Topics", {})
        topics.append(PreparedTopic(topic_id=topic_id, topic_name=name, num_partitions=partitions))
    _finish(r)
    return ConsumerGroupPrepareAssignmentResponse(
        error=error,
        error_message=message,
        group_epoch=group_epoch,
        assignor_name=assignor,
        members=members,
        topics=tuple(topics),
        throttle_time_ms=throttle,
    )


# -- InstallAssignment -------------------------------------------------------------------------------


def encode_install_request(request: ConsumerGroupInstallAssignmentRequest, version: int = 0) -> bytes:
    w = _writer("ConsumerGroupInstallAssignmentRequest", version)
    _identity(w, request.group_id, request.member_id, request.member_epoch)
    w.int32(request.group_epoch, "GroupEpoch")
    w.int8(request.error, "Error")
    F.write_compact_array_count(w, len(request.members), "Members")
    for m in request.members:
        F.write_compact_string(w, m.member_id, "Members.MemberId")
        write_topic_id_partitions(w, m.topic_partitions, "Members.Partitions")
        w.int16(m.metadata_version, "Members.MetadataVersion")
        F.write_compact_bytes(w, m.metadata_bytes, "Members.MetadataBytes")
        F.write_tagged_fields(w, ())
    F.write_tagged_fields(w, ())
    return w.getvalue()


def decode_install_request(data: bytes, version: int = 0) -> ConsumerGroupInstallAssignmentRequest:
    r = _reader(data, "ConsumerGroupInstallAssignmentRequest", version)
    group_id = F.read_compact_string(r, "GroupId")
    member_id = F.read_compact_string(r, "MemberId")
    member_epoch, group_epoch, error = r.int32(), r.int32(), r.int8()
    count = F.read_compact_array_count(r, "Members", 6)
    members = []
    for _ in range(count):
        mid = F.read_compact_string(r, "Members.MemberId")
        partitions = read_topic_id_partitions(r, "Members.Partitions")
        metadata_version = r.int16()
        metadata = F.read_compact_bytes(r, "Members.MetadataBytes")
        F.read_tagged_fields(r, "Members", {})
        members.append(
            InstalledMember(
                member_id=mid,
                topic_partitions=partitions,
                metadata_version=metadata_version,
                metadata_bytes=metadata,
            )
        )
    _finish(r)
    return ConsumerGroupInstallAssignmentRequest(
        group_id=group_id,
        member_id=member_id,
        member_epoch=member_epoch,
        group_epoch=group_epoch,
        error=error,
        members=tuple(members),
    )


def encode_install_response(response: ConsumerGroupInstallAssignmentResponse, version: int = 0) -> bytes:
    w = _writer("ConsumerGroupInstallAssignmentResponse", version)
    _error_header(w, response.throttle_time_ms, response.error, response.error_message)
    F.write_tagged_fields(w, ())
    return w.getvalue()


def decode_install_response(data: bytes, version: int = 0) -> ConsumerGroupInstallAssignmentResponse:
    r = _reader(data, "ConsumerGroupInstallAssignmentResponse", version)
    throttle = r.int32()
    error = KafkaErrorCode.of(r.int16())
    message = F.read_compact_nullable_string(r, "ErrorMessage")
    _finish(r)
    return ConsumerGroupInstallAssignmentResponse(
        error=error, error_message=message, throttle_time_ms=throttle
    )
