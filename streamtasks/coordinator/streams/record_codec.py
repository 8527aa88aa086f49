"""The streams coordinator's records as key/value bytes for a compacted topic, pure; framed as
the consumer coordinator's (``coordinator/record_codec.py``): the key is an int16 record type,
the group id and (member-keyed types) the member id in Kafka's classic encoding; the value an
int16 value version then the fields in the flexible encoding, closed by a tagged-field
section; a tombstone is the key with no value. The types take streamtasks' private numbers
1071-1076 (the layouts are streamtasks', not Kafka's ``Streams*`` records). ``streamtasks
coordinator`` writes them to its log beside the consumer groups' records. Decoders raise only
:class:`~streamtasks.errors.DecodeError`."""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import replace
from typing import cast

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
    TaskSet,
)
from streamtasks.errors import DecodeError
from streamtasks.membership.streams.records import task_ids, tasks_of
from streamtasks.protocol import _flex as F
from streamtasks.protocol import _streams_structs as S
from streamtasks.protocol._buf import Reader, Writer
from streamtasks.protocol.streams_group_codec import _read_topology, _write_topology

__all__ = ["StreamsRecordType", "decode_streams_record", "encode_streams_record"]

VALUE_VERSION = 0
#: The target metadata's ``AssignmentTimestampMs``, a tagged field (written when not 0, so a
#: log written without an assignment interval reads as before and older readers skip it).
_TIMESTAMP_TAG = 0


class StreamsRecordType(enum.IntEnum):
    GROUP = 1071
    TOPOLOGY = 1072
    MEMBER = 1073
    TARGET_METADATA = 1074
    TARGET_MEMBER = 1075
    CURRENT_ASSIGNMENT = 1076


_TYPES: dict[StreamsRecordType, tuple[type[object], type[object]]] = {
    StreamsRecordType.GROUP: (StreamsGroupRecord, StreamsGroupTombstone),
    StreamsRecordType.TOPOLOGY: (StreamsTopologyRecord, StreamsTopologyTombstone),
    StreamsRecordType.MEMBER: (StreamsMemberRecord, StreamsMemberTombstone),
    StreamsRecordType.TARGET_METADATA: (StreamsTargetMetadataRecord, StreamsTargetMetadataTombstone),
    StreamsRecordType.TARGET_MEMBER: (StreamsTargetMemberRecord, StreamsTargetMemberTombstone),
    StreamsRecordType.CURRENT_ASSIGNMENT: (StreamsCurrentAssignmentRecord, StreamsCurrentAssignmentTombstone),
}
_TYPE_OF = {cls: t for t, pair in _TYPES.items() for cls in pair}
_MEMBER_KEYED = frozenset(
    {StreamsRecordType.MEMBER, StreamsRecordType.TARGET_MEMBER, StreamsRecordType.CURRENT_ASSIGNMENT}
)
_STATES = {
    StreamsMemberState.STABLE: 0,
    StreamsMemberState.UNREVOKED_TASKS: 1,
    StreamsMemberState.UNRELEASED_TASKS: 2,
}
_STATE_OF = {v: k for k, v in _STATES.items()}


def _tasks(w: Writer, tasks: TaskSet, field: str) -> None:
    S.write_task_ids(w, task_ids(tasks), field)


def _read_tasks(r: Reader, field: str) -> TaskSet:
    return tasks_of(S.read_task_ids(r, field))


def _write_value(w: Writer, record: StreamsRecord) -> None:
    match record:
        case StreamsGroupRecord():
            w.int32(record.epoch, "Epoch")
            F.write_compact_array_count(w, len(record.metadata), "Metadata")
            for name, partitions in record.metadata:
                F.write_compact_string(w, name, "Metadata.Topic")
                w.int32(partitions, "Metadata.Partitions")
            F.write_compact_nullable_string(w, record.shutdown_requested_by, "ShutdownRequestedBy")
        case StreamsTopologyRecord():
            _write_topology(w, record.topology)
        case StreamsMemberRecord():
            F.write_compact_string(w, record.process_id, "ProcessId")
            w.int32(record.rebalance_timeout_ms, "RebalanceTimeoutMs")
            w.int32(record.topology_epoch, "TopologyEpoch")
            F.write_compact_nullable_string(w, record.instance_id, "InstanceId")
            F.write_compact_nullable_string(w, record.rack_id, "RackId")
            F.write_compact_string(w, record.client_id, "ClientId")
            F.write_compact_string(w, record.client_host, "ClientHost")
            w.int8(-1 if record.user_endpoint is None else 1)
            if record.user_endpoint is not None:
                S.write_endpoint(w, record.user_endpoint)
            S.write_key_values(w, record.client_tags, "ClientTags")
            S.write_task_offsets(w, record.task_offsets, "TaskOffsets")
            S.write_task_offsets(w, record.task_end_offsets, "TaskEndOffsets")
        case StreamsTargetMetadataRecord():
            w.int32(record.assignment_epoch, "AssignmentEpoch")
            F.write_compact_string(w, record.assignor_name, "AssignorName")
            w.int64(-1 if record.followup_ms is None else record.followup_ms, "FollowupMs")
        case StreamsTargetMemberRecord():
            _tasks(w, record.active, "ActiveTasks")
            _tasks(w, record.standby, "StandbyTasks")
            _tasks(w, record.warmup, "WarmupTasks")
        case StreamsCurrentAssignmentRecord():
            w.int32(record.member_epoch, "MemberEpoch")
            w.int32(record.previous_member_epoch, "PreviousMemberEpoch")
            w.int8(_STATES[record.state])
            _tasks(w, record.active, "ActiveTasks")
            _tasks(w, record.standby, "StandbyTasks")
            _tasks(w, record.warmup, "WarmupTasks")
            _tasks(w, record.pending_revocation, "PendingRevocation")


def encode_streams_record(record: StreamsRecord) -> tuple[bytes, bytes | None]:
    """(key, value) for the compacted topic; ``value`` is None for a tombstone."""
    kind = _TYPE_OF[type(record)]
    key = Writer()
    key.int16(kind, "key type")
    key.kafka_nullable_string(record.group_id, "group id")
    if kind in _MEMBER_KEYED:
        key.kafka_nullable_string(cast(StreamsMemberTombstone, record).member_id, "member id")
    if type(record) is _TYPES[kind][1]:
        return key.getvalue(), None
    value = Writer()
    value.int16(VALUE_VERSION, "value version")
    _write_value(value, record)
    tagged: list[tuple[int, bytes]] = []
    if isinstance(record, StreamsTargetMetadataRecord) and record.assignment_timestamp_ms:
        stamp = Writer()
        stamp.int64(record.assignment_timestamp_ms, "AssignmentTimestampMs")
        tagged.append((_TIMESTAMP_TAG, stamp.getvalue()))
    F.write_tagged_fields(value, tagged)
    return key.getvalue(), value.getvalue()


def _read_group(r: Reader, gid: str, _: str) -> StreamsRecord:
    epoch = r.int32()
    metadata = tuple(
        (F.read_compact_string(r, "Metadata.Topic"), r.int32())
        for _ in range(F.read_compact_array_count(r, "Metadata", 5))
    )
    by = F.read_compact_nullable_string(r, "ShutdownRequestedBy")
    return StreamsGroupRecord(group_id=gid, epoch=epoch, metadata=metadata, shutdown_requested_by=by)


def _read_topology_record(r: Reader, gid: str, _: str) -> StreamsRecord:
    topology = _read_topology(r)
    if topology is None:
        raise r.fail("a topology record without a topology")
    return StreamsTopologyRecord(group_id=gid, topology=topology)


def _read_member(r: Reader, gid: str, mid: str) -> StreamsRecord:
    process_id = F.read_compact_string(r, "ProcessId")
    rebalance, topology_epoch = r.int32(), r.int32()
    instance_id = F.read_compact_nullable_string(r, "InstanceId")
    rack_id = F.read_compact_nullable_string(r, "RackId")
    client_id = F.read_compact_string(r, "ClientId")
    client_host = F.read_compact_string(r, "ClientHost")
    endpoint = S.read_endpoint(r) if F.read_nullable_struct_marker(r, "UserEndpoint") else None
    return StreamsMemberRecord(
        group_id=gid,
        member_id=mid,
        process_id=process_id,
        rebalance_timeout_ms=rebalance,
        topology_epoch=topology_epoch,
        instance_id=instance_id,
        rack_id=rack_id,
        client_id=client_id,
        client_host=client_host,
        user_endpoint=endpoint,
        client_tags=S.read_key_values(r, "ClientTags") or (),
        task_offsets=S.read_task_offsets(r, "TaskOffsets") or (),
        task_end_offsets=S.read_task_offsets(r, "TaskEndOffsets") or (),
    )


def _read_target_metadata(r: Reader, gid: str, _: str) -> StreamsRecord:
    epoch = r.int32()
    name = F.read_compact_string(r, "AssignorName")
    followup = r.int64()
    return StreamsTargetMetadataRecord(
        group_id=gid,
        assignment_epoch=epoch,
        assignor_name=name,
        followup_ms=None if followup < 0 else followup,
    )


def _read_target_member(r: Reader, gid: str, mid: str) -> StreamsRecord:
    return StreamsTargetMemberRecord(
        group_id=gid,
        member_id=mid,
        active=_read_tasks(r, "ActiveTasks"),
        standby=_read_tasks(r, "StandbyTasks"),
        warmup=_read_tasks(r, "WarmupTasks"),
    )


def _read_current(r: Reader, gid: str, mid: str) -> StreamsRecord:
    epoch, previous = r.int32(), r.int32()
    raw = r.int8()
    if raw not in _STATE_OF:
        raise r.fail(f"member state {raw} is unknown")
    return StreamsCurrentAssignmentRecord(
        group_id=gid,
        member_id=mid,
        member_epoch=epoch,
        previous_member_epoch=previous,
        state=_STATE_OF[raw],
        active=_read_tasks(r, "ActiveTasks"),
        standby=_read_tasks(r, "StandbyTasks"),
        warmup=_read_tasks(r, "WarmupTasks"),
        pending_revocation=_read_tasks(r, "PendingRevocation"),
    )


_READERS: dict[StreamsRecordType, Callable[[Reader, str, str], StreamsRecord]] = {
    StreamsRecordType.GROUP: _read_group,
    StreamsRecordType.TOPOLOGY: _read_topology_record,
    StreamsRecordType.MEMBER: _read_member,
    StreamsRecordType.TARGET_METADATA: _read_target_metadata,
    StreamsRecordType.TARGET_MEMBER: _read_target_member,
    StreamsRecordType.CURRENT_ASSIGNMENT: _read_current,
}


def decode_streams_record(key: bytes, value: bytes | None) -> StreamsRecord:
    """The record a (key, value) pair holds; a None value is the tombstone."""
    k = Reader(key, "streams record key")
    raw = k.int16()
    try:
        kind = StreamsRecordType(raw)
    except ValueError:
        raise k.fail(f"unknown record type {raw}") from None
    gid = k.kafka_string("group id")
    mid = k.kafka_string("member id") if kind in _MEMBER_KEYED else ""
    if k.remaining:
        raise k.fail(f"{k.remaining} trailing byte(s)")
    if value is None:
        make = cast("Callable[..., StreamsRecord]", _TYPES[kind][1])
        return make(group_id=gid, member_id=mid) if kind in _MEMBER_KEYED else make(group_id=gid)
    r = Reader(value, f"streams record value ({kind.name})")
    version = r.int16()
    if version != VALUE_VERSION:
        raise r.fail(f"value version {version} is not supported (only {VALUE_VERSION})")
    try:
        record = _READERS[kind](r, gid, mid)
    except DecodeError:
        raise
    except ValueError as exc:  # a value a record type refuses
        raise r.fail(str(exc)) from None
    known = {_TIMESTAMP_TAG: _read_int64} if kind is StreamsRecordType.TARGET_METADATA else {}
    tagged = F.read_tagged_fields(r, "record value", known)
    if r.remaining:
        raise r.fail(f"{r.remaining} trailing byte(s)")
    if _TIMESTAMP_TAG in tagged and isinstance(record, StreamsTargetMetadataRecord):
        record = replace(record, assignment_timestamp_ms=tagged[_TIMESTAMP_TAG])
    return record


def _read_int64(r: Reader) -> int:
    return r.int64()
