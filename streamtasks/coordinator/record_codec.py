"""The coordinator's records as key/value bytes for a compacted topic, pure.

Laid out as Kafka's group-coordinator records are (``__consumer_offsets``): the **key** is an
int16 record type followed by what identifies the thing (group id, then member id, or topic and
partition for an offset), in Kafka's classic encoding (int16-length strings); the **value** is
an int16 value version followed by the fields in the flexible encoding (compact strings and
arrays, a tagged-field section closing every struct, so a later field can be added as a tag
without a new version). A tombstone is the key with no value: compaction keeps it until it
removes every older value of that key. ``docs/protocol.md`` ("Coordinator records") has the
byte layout of each type.

Besides the coordinator's :data:`~streamtasks.coordinator.records.Record` types, the log of
``streamtasks coordinator`` holds committed offsets (:class:`OffsetCommitRecord`, Kafka's
``OffsetCommitKey`` / ``OffsetCommitValue``), so both are here.

Decoders raise only :class:`~streamtasks.errors.DecodeError`: unknown types and versions,
truncation, a length beyond the buffer, trailing bytes, an impossible member state.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import cast

from streamtasks.coordinator.records import (
    ClassicMemberMetadata,
    ClientAssignmentRequestRecord,
    ClientAssignmentRequestTombstone,
    CurrentMemberAssignmentRecord,
    CurrentMemberAssignmentTombstone,
    GroupEpochRecord,
    GroupEpochTombstone,
    MemberMetadataRecord,
    MemberMetadataTombstone,
    PartitionMetadataRecord,
    PartitionMetadataTombstone,
    PreparedAssignmentRecord,
    PreparedAssignmentTombstone,
    PreparedMemberSpec,
    Record,
    TargetAssignmentMemberRecord,
    TargetAssignmentMemberTombstone,
    TargetAssignmentMetadataRecord,
    TargetAssignmentMetadataTombstone,
)
from streamtasks.coordinator.types import MemberState, TopicMetadata, TopicPartitionSet
from streamtasks.errors import DecodeError
from streamtasks.protocol import _flex as F
from streamtasks.protocol._buf import Reader, Writer
from streamtasks.protocol.consumer_group_codec import (
    _read_client_assignors,
    _write_client_assignors,
    read_topic_id_partitions,
    write_topic_id_partitions,
)

__all__ = [
    "RECORD_VALUE_VERSION",
    "LogRecord",
    "OffsetCommitRecord",
    "OffsetCommitTombstone",
    "RecordType",
    "decode_log_record",
    "encode_log_record",
]

#: The only value version written so far (every type).
RECORD_VALUE_VERSION = 0


class RecordType(enum.IntEnum):
    """The int16 at the start of every key. 1 and 3-8 are Kafka's numbers for the same records
    (``OffsetCommitKey``, ``ConsumerGroupMetadataKey`` ... ``ConsumerGroupCurrentMemberAssignmentKey``);
    streamtasks' two client-side-assignment records take 848 and 849."""

    OFFSET_COMMIT = 1
    GROUP_EPOCH = 3
    PARTITION_METADATA = 4
    MEMBER_METADATA = 5
    TARGET_ASSIGNMENT_METADATA = 6
    TARGET_ASSIGNMENT_MEMBER = 7
    CURRENT_MEMBER_ASSIGNMENT = 8
    CLIENT_ASSIGNMENT_REQUEST = 848
    PREPARED_ASSIGNMENT = 849


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetCommitRecord:
    """A committed offset (Kafka's ``OffsetCommitValue``), by topic name as Kafka stores it."""

    group_id: str
    topic: str
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str | None = ""
    commit_timestamp_ms: int = -1


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetCommitTombstone:
    """The offset is deleted (its group was deleted)."""

    group_id: str
    topic: str
    partition: int


LogRecord = Record | OffsetCommitRecord | OffsetCommitTombstone

_MEMBER_STATES = {
    MemberState.STABLE: 0,
    MemberState.UNREVOKED_PARTITIONS: 1,
    MemberState.UNRELEASED_PARTITIONS: 2,
}
_STATES_BY_BYTE = {v: k for k, v in _MEMBER_STATES.items()}

# type -> (record class, tombstone class); the key shape follows from the type
_TYPES: dict[RecordType, tuple[type[object], type[object]]] = {
    RecordType.OFFSET_COMMIT: (OffsetCommitRecord, OffsetCommitTombstone),
    RecordType.GROUP_EPOCH: (GroupEpochRecord, GroupEpochTombstone),
    RecordType.PARTITION_METADATA: (PartitionMetadataRecord, PartitionMetadataTombstone),
    RecordType.MEMBER_METADATA: (MemberMetadataRecord, MemberMetadataTombstone),
    RecordType.TARGET_ASSIGNMENT_METADATA: (
        TargetAssignmentMetadataRecord,
        TargetAssignmentMetadataTombstone,
    ),
    RecordType.TARGET_ASSIGNMENT_MEMBER: (TargetAssignmentMemberRecord, TargetAssignmentMemberTombstone),
    RecordType.CURRENT_MEMBER_ASSIGNMENT: (CurrentMemberAssignmentRecord, CurrentMemberAssignmentTombstone),
    RecordType.CLIENT_ASSIGNMENT_REQUEST: (ClientAssignmentRequestRecord, ClientAssignmentRequestTombstone),
    RecordType.PREPARED_ASSIGNMENT: (PreparedAssignmentRecord, PreparedAssignmentTombstone),
}
_TYPE_OF: dict[type[object], RecordType] = {cls: t for t, pair in _TYPES.items() for cls in pair}
_MEMBER_KEYED = frozenset(
    {RecordType.MEMBER_METADATA, RecordType.TARGET_ASSIGNMENT_MEMBER, RecordType.CURRENT_MEMBER_ASSIGNMENT}
)


# -- keys ------------------------------------------------------------------------------------------


def _encode_key(record: LogRecord) -> tuple[RecordType, bytes]:
    kind = _TYPE_OF[type(record)]
    w = Writer()
    w.int16(kind, "key type")
    w.kafka_nullable_string(record.group_id, "group id")
    if kind in _MEMBER_KEYED:
        member = cast(MemberMetadataRecord, record)  # every member-keyed type has member_id
        w.kafka_nullable_string(member.member_id, "member id")
    elif isinstance(record, OffsetCommitRecord | OffsetCommitTombstone):
        w.kafka_nullable_string(record.topic, "topic")
        w.int32(record.partition, "partition")
    return kind, w.getvalue()


@dataclass(frozen=True, slots=True)
class _Key:
    kind: RecordType
    group_id: str
    member_id: str = ""
    topic: str = ""
    partition: int = 0


def _decode_key(data: bytes) -> _Key:
    r = Reader(data, "coordinator record key")
    raw_kind = r.int16()
    try:
        kind = RecordType(raw_kind)
    except ValueError:
        raise r.fail(f"unknown record type {raw_kind}") from None
    group_id = r.kafka_string("group id")
    key = _Key(kind, group_id)
    if kind in _MEMBER_KEYED:
        key = _Key(kind, group_id, member_id=r.kafka_string("member id"))
    elif kind is RecordType.OFFSET_COMMIT:
        topic = r.kafka_string("topic")
        key = _Key(kind, group_id, topic=topic, partition=r.int32())
    if r.remaining:
        raise r.fail(f"{r.remaining} trailing byte(s)")
    return key


# -- values ----------------------------------------------------------------------------------------


def _partitions(w: Writer, value: TopicPartitionSet, field: str) -> None:
    write_topic_id_partitions(w, value.to_wire(), field)


def _read_partitions(r: Reader, field: str) -> TopicPartitionSet:
    return TopicPartitionSet.from_wire(read_topic_id_partitions(r, field))


def _topics(w: Writer, topics: tuple[TopicMetadata, ...]) -> None:
    F.write_compact_array_count(w, len(topics), "Topics")
    for t in topics:
        w.raw(t.topic_id.bytes)
        F.write_compact_string(w, t.name, "Topics.Name")
        w.int32(t.num_partitions, "Topics.NumPartitions")
        F.write_tagged_fields(w, ())


def _read_topics(r: Reader) -> tuple[TopicMetadata, ...]:
    count = F.read_compact_array_count(r, "Topics", 22)
    out = []
    for _ in range(count):
        topic_id = r.uuid()
        name = F.read_compact_string(r, "Topics.Name")
        num = r.int32()
        F.read_tagged_fields(r, "Topics", {})
        out.append(TopicMetadata(topic_id=topic_id, name=name, num_partitions=num))
    return tuple(out)


def _assignment_tail(w: Writer, error: int, version: int, metadata: bytes) -> None:
    w.int8(error, "Error")
    w.int16(version, "MetadataVersion")
    F.write_compact_bytes(w, metadata, "MetadataBytes")


#: The tag of ``ClassicMemberMetadata`` in a member metadata value (Kafka's tag 0): a record
#: without it (every record written before classic members were served) reads as a member of
#: the consumer protocol, and a reader that does not know the tag skips it.
_CLASSIC_TAG = 0


def _classic_bytes(classic: ClassicMemberMetadata) -> bytes:
    w = Writer()
    w.int32(classic.session_timeout_ms, "ClassicMemberMetadata.SessionTimeoutMs")
    F.write_compact_array_count(w, len(classic.protocols), "ClassicMemberMetadata.SupportedProtocols")
    for name, metadata in classic.protocols:
        F.write_compact_string(w, name, "SupportedProtocols.Name")
        F.write_compact_bytes(w, metadata, "SupportedProtocols.Metadata")
        F.write_tagged_fields(w, ())
    F.write_tagged_fields(w, ())
    return w.getvalue()


def _read_classic(r: Reader) -> ClassicMemberMetadata:
    session_timeout_ms = r.int32()
    protocols = []
    for _ in range(F.read_compact_array_count(r, "ClassicMemberMetadata.SupportedProtocols", 3)):
        name = F.read_compact_string(r, "SupportedProtocols.Name")
        metadata = F.read_compact_bytes(r, "SupportedProtocols.Metadata")
        F.read_tagged_fields(r, "SupportedProtocols", {})
        protocols.append((name, metadata))
    F.read_tagged_fields(r, "ClassicMemberMetadata", {})
    return ClassicMemberMetadata(session_timeout_ms=session_timeout_ms, protocols=tuple(protocols))


def _encode_value(record: LogRecord) -> bytes:
    w = Writer()
    tags: list[tuple[int, bytes]] = []
    w.int16(RECORD_VALUE_VERSION, "value version")
    if isinstance(record, GroupEpochRecord):
        w.int32(record.epoch, "Epoch")
    elif isinstance(record, PartitionMetadataRecord):
        _topics(w, record.topics)
    elif isinstance(record, MemberMetadataRecord):
        F.write_compact_nullable_string(w, record.instance_id, "InstanceId")
        F.write_compact_nullable_string(w, record.rack_id, "RackId")
        F.write_compact_string(w, record.client_id, "ClientId")
        F.write_compact_string(w, record.client_host, "ClientHost")
        F.write_compact_array_count(w, len(record.subscribed_topic_names), "SubscribedTopicNames")
        for name in record.subscribed_topic_names:
            F.write_compact_string(w, name, "SubscribedTopicNames")
        F.write_compact_nullable_string(w, record.server_assignor, "ServerAssignor")
        _write_client_assignors(w, record.client_assignors)  # the heartbeat's own layout
        w.int32(record.rebalance_timeout_ms, "RebalanceTimeoutMs")
        if record.classic is not None:
            tags.append((_CLASSIC_TAG, _classic_bytes(record.classic)))
    elif isinstance(record, TargetAssignmentMetadataRecord):
        w.int32(record.assignment_epoch, "AssignmentEpoch")
        F.write_compact_string(w, record.assignor_name, "AssignorName")
    elif isinstance(record, TargetAssignmentMemberRecord):
        _partitions(w, record.partitions, "TopicPartitions")
        _assignment_tail(w, record.error, record.metadata_version, record.metadata_bytes)
    elif isinstance(record, CurrentMemberAssignmentRecord):
        w.int32(record.member_epoch, "MemberEpoch")
        w.int32(record.previous_member_epoch, "PreviousMemberEpoch")
        w.int8(_MEMBER_STATES[record.state], "State")
        _partitions(w, record.assigned, "AssignedPartitions")
        _partitions(w, record.pending_revocation, "PartitionsPendingRevocation")
        _assignment_tail(w, record.error, record.metadata_version, record.metadata_bytes)
    elif isinstance(record, ClientAssignmentRequestRecord):
        F.write_compact_string(w, record.member_id, "MemberId")
        w.int32(record.group_epoch, "GroupEpoch")
    elif isinstance(record, PreparedAssignmentRecord):
        F.write_compact_string(w, record.member_id, "MemberId")
        w.int32(record.group_epoch, "GroupEpoch")
        F.write_compact_string(w, record.assignor_name, "AssignorName")
        F.write_compact_array_count(w, len(record.members), "Members")
        for m in record.members:
            F.write_compact_string(w, m.member_id, "Members.MemberId")
            F.write_compact_uuids(w, sorted(m.subscribed_topic_ids), "Members.SubscribedTopicIds")
            w.int16(m.minimum_version, "Members.MinimumVersion")
            w.int16(m.maximum_version, "Members.MaximumVersion")
            F.write_tagged_fields(w, ())
        _topics(w, record.topics)
    elif isinstance(record, OffsetCommitRecord):
        w.int64(record.offset, "Offset")
        w.int32(record.leader_epoch, "LeaderEpoch")
        F.write_compact_nullable_string(w, record.metadata, "Metadata")
        w.int64(record.commit_timestamp_ms, "CommitTimestamp")
    else:  # pragma: no cover - every record type is listed above
        raise TypeError(f"not a record with a value: {type(record).__name__}")
    F.write_tagged_fields(w, tags)
    return w.getvalue()


def _read_member_metadata(r: Reader, key: _Key) -> MemberMetadataRecord:
    instance_id = F.read_compact_nullable_string(r, "InstanceId")
    rack_id = F.read_compact_nullable_string(r, "RackId")
    client_id = F.read_compact_string(r, "ClientId")
    client_host = F.read_compact_string(r, "ClientHost")
    names = tuple(
        F.read_compact_string(r, "SubscribedTopicNames")
        for _ in range(F.read_compact_array_count(r, "SubscribedTopicNames", 1))
    )
    server_assignor = F.read_compact_nullable_string(r, "ServerAssignor")
    client_assignors = _read_client_assignors(r)
    return MemberMetadataRecord(
        group_id=key.group_id,
        member_id=key.member_id,
        instance_id=instance_id,
        rack_id=rack_id,
        client_id=client_id,
        client_host=client_host,
        subscribed_topic_names=names,
        server_assignor=server_assignor,
        client_assignors=client_assignors,
        rebalance_timeout_ms=r.int32(),
    )


def _read_current(r: Reader, key: _Key) -> CurrentMemberAssignmentRecord:
    member_epoch, previous = r.int32(), r.int32()
    raw_state = r.int8()
    state = _STATES_BY_BYTE.get(raw_state)
    if state is None:
        raise r.fail(f"unknown member state {raw_state}")
    assigned = _read_partitions(r, "AssignedPartitions")
    pending = _read_partitions(r, "PartitionsPendingRevocation")
    error, version = r.int8(), r.int16()
    return CurrentMemberAssignmentRecord(
        group_id=key.group_id,
        member_id=key.member_id,
        member_epoch=member_epoch,
        previous_member_epoch=previous,
        state=state,
        assigned=assigned,
        pending_revocation=pending,
        error=error,
        metadata_version=version,
        metadata_bytes=F.read_compact_bytes(r, "MetadataBytes"),
    )


def _read_prepared(r: Reader, key: _Key) -> PreparedAssignmentRecord:
    member_id = F.read_compact_string(r, "MemberId")
    group_epoch = r.int32()
    assignor_name = F.read_compact_string(r, "AssignorName")
    members = []
    for _ in range(F.read_compact_array_count(r, "Members", 7)):
        mid = F.read_compact_string(r, "Members.MemberId")
        topic_ids = F.read_compact_uuids(r, "Members.SubscribedTopicIds")
        minimum, maximum = r.int16(), r.int16()
        F.read_tagged_fields(r, "Members", {})
        members.append(
            PreparedMemberSpec(
                member_id=mid,
                subscribed_topic_ids=frozenset(topic_ids),
                minimum_version=minimum,
                maximum_version=maximum,
            )
        )
    return PreparedAssignmentRecord(
        group_id=key.group_id,
        member_id=member_id,
        group_epoch=group_epoch,
        assignor_name=assignor_name,
        members=tuple(members),
        topics=_read_topics(r),
    )


def _read_target_member(r: Reader, key: _Key) -> TargetAssignmentMemberRecord:
    partitions = _read_partitions(r, "TopicPartitions")
    error, version = r.int8(), r.int16()
    return TargetAssignmentMemberRecord(
        group_id=key.group_id,
        member_id=key.member_id,
        partitions=partitions,
        error=error,
        metadata_version=version,
        metadata_bytes=F.read_compact_bytes(r, "MetadataBytes"),
    )


def _read_offset(r: Reader, key: _Key) -> OffsetCommitRecord:
    offset, leader_epoch = r.int64(), r.int32()
    metadata = F.read_compact_nullable_string(r, "Metadata")
    return OffsetCommitRecord(
        group_id=key.group_id,
        topic=key.topic,
        partition=key.partition,
        offset=offset,
        leader_epoch=leader_epoch,
        metadata=metadata,
        commit_timestamp_ms=r.int64(),
    )


_VALUE_READERS: dict[RecordType, Callable[[Reader, _Key], LogRecord]] = {
    RecordType.OFFSET_COMMIT: _read_offset,
    RecordType.GROUP_EPOCH: lambda r, k: GroupEpochRecord(group_id=k.group_id, epoch=r.int32()),
    RecordType.PARTITION_METADATA: lambda r, k: PartitionMetadataRecord(
        group_id=k.group_id, topics=_read_topics(r)
    ),
    RecordType.MEMBER_METADATA: _read_member_metadata,
    RecordType.TARGET_ASSIGNMENT_METADATA: lambda r, k: TargetAssignmentMetadataRecord(
        group_id=k.group_id,
        assignment_epoch=r.int32(),
        assignor_name=F.read_compact_string(r, "AssignorName"),
    ),
    RecordType.TARGET_ASSIGNMENT_MEMBER: _read_target_member,
    RecordType.CURRENT_MEMBER_ASSIGNMENT: _read_current,
    RecordType.CLIENT_ASSIGNMENT_REQUEST: lambda r, k: ClientAssignmentRequestRecord(
        group_id=k.group_id, member_id=F.read_compact_string(r, "MemberId"), group_epoch=r.int32()
    ),
    RecordType.PREPARED_ASSIGNMENT: _read_prepared,
}


def _tombstone(key: _Key) -> LogRecord:
    make = cast("Callable[..., LogRecord]", _TYPES[key.kind][1])
    if key.kind in _MEMBER_KEYED:
        return make(group_id=key.group_id, member_id=key.member_id)
    if key.kind is RecordType.OFFSET_COMMIT:
        return OffsetCommitTombstone(group_id=key.group_id, topic=key.topic, partition=key.partition)
    return make(group_id=key.group_id)


# -- the two entry points --------------------------------------------------------------------------


def encode_log_record(record: LogRecord) -> tuple[bytes, bytes | None]:
    """(key, value) for the compacted topic; ``value`` is None for a tombstone."""
    kind, key = _encode_key(record)
    if type(record) is _TYPES[kind][1]:
        return key, None
    return key, _encode_value(record)


def decode_log_record(key: bytes, value: bytes | None) -> LogRecord:
    """The record a (key, value) pair from the topic holds; a None value is the tombstone."""
    parsed = _decode_key(key)
    if value is None:
        return _tombstone(parsed)
    r = Reader(value, f"coordinator record value ({parsed.kind.name})")
    version = r.int16()
    if version != RECORD_VALUE_VERSION:
        raise r.fail(f"value version {version} is not supported (only {RECORD_VALUE_VERSION})")
    try:
        record = _VALUE_READERS[parsed.kind](r, parsed)
    except DecodeError:
        raise
    except ValueError as exc:  # a value the record type itself refuses
        raise r.fail(str(exc)) from None
    if isinstance(record, MemberMetadataRecord):
        tags = F.read_tagged_fields(r, "record value", {_CLASSIC_TAG: _read_classic})
        if _CLASSIC_TAG in tags:
            record = replace(record, classic=tags[_CLASSIC_TAG])
    else:
        F.read_tagged_fields(r, "record value", {})
    if r.remaining:
        raise r.fail(f"{r.remaining} trailing byte(s)")
    return record
