"""The coordinator's records as key/value bytes: every record round-trips, a tombstone is its key
with no value, the key is the compaction key, a log written as bytes replays to the same group,
and the decoder raises DecodeError (only) on random, mutated and truncated bytes."""

from __future__ import annotations

import contextlib
import uuid
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamtasks.coordinator import (
    ClientAssignmentRequestRecord,
    ClientAssignmentRequestTombstone,
    CurrentMemberAssignmentRecord,
    CurrentMemberAssignmentTombstone,
    GroupCoordinator,
    GroupEpochRecord,
    GroupEpochTombstone,
    MemberMetadataRecord,
    MemberMetadataTombstone,
    MemberState,
    PartitionMetadataRecord,
    PartitionMetadataTombstone,
    PreparedAssignmentRecord,
    PreparedAssignmentTombstone,
    PreparedMemberSpec,
    TargetAssignmentMemberRecord,
    TargetAssignmentMemberTombstone,
    TargetAssignmentMetadataRecord,
    TargetAssignmentMetadataTombstone,
    TopicMetadata,
    TopicPartitionSet,
    record_key,
)
from streamtasks.coordinator.record_codec import (
    LogRecord,
    OffsetCommitRecord,
    OffsetCommitTombstone,
    RecordType,
    decode_log_record,
    encode_log_record,
)
from streamtasks.errors import DecodeError
from streamtasks.protocol.consumer_group import ClientAssignor
from tests.coordinator.support import GROUP, Harness

text = st.text(max_size=6)
ids = st.text(min_size=1, max_size=6)
opt_text = st.none() | text
int8s, int16s, int32s = (
    st.integers(-128, 127),
    st.integers(-(2**15), 2**15 - 1),
    st.integers(-(2**31), 2**31 - 1),
)
uuids = st.uuids().map(lambda u: uuid.UUID(int=u.int))
partition_sets = st.dictionaries(uuids, st.frozensets(st.integers(0, 1 << 20), max_size=4), max_size=3).map(
    TopicPartitionSet
)
topics = st.lists(st.builds(TopicMetadata, topic_id=uuids, name=text, num_partitions=int32s), max_size=3).map(
    tuple
)
client_assignors = st.lists(
    st.builds(
        ClientAssignor,
        name=text,
        minimum_version=int16s,
        maximum_version=int16s,
        reason=int8s,
        metadata_version=int16s,
        metadata_bytes=st.binary(max_size=8),
    ),
    max_size=2,
).map(tuple)
group = {"group_id": ids}
member = {"group_id": ids, "member_id": ids}

records: st.SearchStrategy[LogRecord] = st.one_of(
    st.builds(GroupEpochRecord, epoch=int32s, **group),
    st.builds(GroupEpochTombstone, **group),
    st.builds(PartitionMetadataRecord, topics=topics, **group),
    st.builds(PartitionMetadataTombstone, **group),
    st.builds(
        MemberMetadataRecord,
        instance_id=opt_text,
        rack_id=opt_text,
        client_id=text,
        client_host=text,
        subscribed_topic_names=st.lists(text, max_size=3).map(tuple),
        server_assignor=opt_text,
        client_assignors=client_assignors,
        rebalance_timeout_ms=int32s,
        **member,
    ),
    st.builds(MemberMetadataTombstone, **member),
    st.builds(TargetAssignmentMetadataRecord, assignment_epoch=int32s, assignor_name=text, **group),
    st.builds(TargetAssignmentMetadataTombstone, **group),
    st.builds(
        TargetAssignmentMemberRecord,
        partitions=partition_sets,
        error=int8s,
        metadata_version=int16s,
        metadata_bytes=st.binary(max_size=8),
        **member,
    ),
    st.builds(TargetAssignmentMemberTombstone, **member),
    st.builds(
        CurrentMemberAssignmentRecord,
        member_epoch=int32s,
        previous_member_epoch=int32s,
        state=st.sampled_from(MemberState),
        assigned=partition_sets,
        pending_revocation=partition_sets,
        error=int8s,
        metadata_version=int16s,
        metadata_bytes=st.binary(max_size=8),
        **member,
    ),
    st.builds(CurrentMemberAssignmentTombstone, **member),
    st.builds(ClientAssignmentRequestRecord, group_epoch=int32s, **member),
    st.builds(ClientAssignmentRequestTombstone, **group),
    st.builds(
        PreparedAssignmentRecord,
        group_epoch=int32s,
        assignor_name=text,
        members=st.lists(
            st.builds(
                PreparedMemberSpec,
                member_id=ids,
                subscribed_topic_ids=st.frozensets(uuids, max_size=3),
                minimum_version=int16s,
                maximum_version=int16s,
            ),
            max_size=3,
        ).map(tuple),
        topics=topics,
        **member,
    ),
    st.builds(PreparedAssignmentTombstone, **group),
    st.builds(
        OffsetCommitRecord,
        topic=ids,
        partition=int32s,
        offset=st.integers(-(2**63), 2**63 - 1),
        leader_epoch=int32s,
        metadata=opt_text,
        commit_timestamp_ms=st.integers(-(2**63), 2**63 - 1),
        **group,
    ),
    st.builds(OffsetCommitTombstone, topic=ids, partition=int32s, **group),
)


def log_key(record: LogRecord) -> tuple[object, ...]:
    if isinstance(record, OffsetCommitRecord | OffsetCommitTombstone):
        return ("offset", record.group_id, record.topic, record.partition)
    return record_key(record)


def is_tombstone(record: Any) -> bool:
    return type(record).__name__.endswith("Tombstone")


@given(records)
def test_every_record_round_trips(record: LogRecord) -> None:
    key, value = encode_log_record(record)
    assert (value is None) == is_tombstone(record)
    assert decode_log_record(key, value) == record


@given(records, records)
def test_key_bytes_are_the_compaction_key(a: LogRecord, b: LogRecord) -> None:
    """Two records share key bytes exactly when they are the same thing (a record and its
    tombstone included): what the compacted topic keeps is the last record per key."""
    assert (encode_log_record(a)[0] == encode_log_record(b)[0]) == (log_key(a) == log_key(b))


def test_layout_of_a_current_member_assignment() -> None:
    """The bytes docs/protocol.md shows: key type 8, group, member; value version 0 ..."""
    topic = uuid.UUID(int=1)
    record = CurrentMemberAssignmentRecord(
        group_id="g",
        member_id="m",
        member_epoch=5,
        previous_member_epoch=4,
        state=MemberState.UNREVOKED_PARTITIONS,
        assigned=TopicPartitionSet({topic: [0]}),
        pending_revocation=TopicPartitionSet({topic: [1]}),
    )
    key, value = encode_log_record(record)
    assert key.hex() == "0008" + "000167" + "00016d"
    assert value is not None

    def tp(p: int) -> str:
        return "02" + topic.bytes.hex() + f"02{p:08x}" + "00"

    assert (
        value.hex() == "0000" + "00000005" + "00000004" + "01" + tp(0) + tp(1) + "00" + "0000" + "01" + "00"
    )


def test_a_log_written_as_bytes_replays_to_the_same_groups() -> None:
    """A live history (joins, client-side install, a leave) through bytes and back."""
    h = Harness({"foo": 4, "bar": 2})
    assignor = ClientAssignor(name="st", minimum_version=0, maximum_version=1, metadata_bytes=b"m")
    h.join("m1", ("foo", "bar"), client_assignors=(assignor,), instance_id="i1", rack_id="r")
    h.join("m2", ("foo",), server_assignor="range")
    h.settle()
    prepared = h.prepare("m1")
    if prepared.error == 0:
        h.install("m1", prepared.group_epoch, {"m1": TopicPartitionSet(), "m2": TopicPartitionSet()})
    h.heartbeat("m2", member_epoch=-1)
    h.settle()
    assert h.log
    decoded = [decode_log_record(*encode_log_record(r)) for r in h.log]
    assert decoded == h.log
    fresh = GroupCoordinator(
        h.coordinator.config, assignors=h.coordinator.assignors, image=h.coordinator.image
    )
    for record in decoded:
        fresh.replay(record)  # type: ignore[arg-type]
    assert fresh.snapshot() == h.coordinator.snapshot()
    assert fresh.group(GROUP) is not None


# -- decoders never trust the bytes --------------------------------------------------------------


def _decodes_or_rejects(key: bytes, value: bytes | None) -> None:
    with contextlib.suppress(DecodeError):
        decode_log_record(key, value)


@given(st.binary(max_size=64), st.none() | st.binary(max_size=128))
def test_random_bytes_raise_decode_error_only(key: bytes, value: bytes | None) -> None:
    _decodes_or_rejects(key, value)


@given(records, st.data())
def test_mutated_and_truncated_records_raise_decode_error_only(
    record: LogRecord, data: st.DataObject
) -> None:
    key, value = encode_log_record(record)
    cut = data.draw(st.integers(0, len(key)))
    _decodes_or_rejects(key[:cut], value)
    if value is not None:
        cut = data.draw(st.integers(0, len(value) - 1))
        with pytest.raises(DecodeError):
            decode_log_record(key, value[:cut])
        flipped = bytearray(value)
        at = data.draw(st.integers(0, len(value) - 1))
        flipped[at] = data.draw(st.integers(0, 255))
        _decodes_or_rejects(key, bytes(flipped))


def test_huge_length_prefix_is_not_trusted() -> None:
    record = PartitionMetadataRecord(group_id="g", topics=())
    key, _ = encode_log_record(record)
    with pytest.raises(DecodeError, match="claims"):
        decode_log_record(key, b"\x00\x00" + b"\xff\xff\xff\xff\x07")
    with pytest.raises(DecodeError, match="truncated"):
        decode_log_record(b"\x00\x03\x7f\xff" + b"g", b"")


@pytest.mark.parametrize(
    ("key", "value", "match"),
    [
        (b"\x00\x02\x00\x01g", None, "unknown record type 2"),
        (b"\x00\x03\x00\x01g", b"\x00\x01\x00\x00\x00\x01\x00", "value version 1 is not supported"),
        (b"\x00\x03\x00\x01gX", None, "trailing"),
        (b"\x00\x03\x00\x01g", b"\x00\x00\x00\x00\x00\x01\x00\x00", "trailing"),
    ],
)
def test_named_rejections(key: bytes, value: bytes | None, match: str) -> None:
    with pytest.raises(DecodeError, match=match):
        decode_log_record(key, value)


def test_record_types_are_kafkas_numbers_where_kafka_has_the_record() -> None:
    assert [t.value for t in RecordType][:7] == [1, 3, 4, 5, 6, 7, 8]
