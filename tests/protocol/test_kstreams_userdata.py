"""Kafka Streams' own SubscriptionInfo / AssignmentInfo, decoded from bytes laid out as Kafka
Streams writes them (built here with struct; a live Java app's in
tests/integration/test_groups_kafka_streams.py)."""

from __future__ import annotations

import struct
import uuid

import pytest

from streamtasks.errors import DecodeError
from streamtasks.protocol.kstreams_userdata import (
    decode_kstreams_assignment,
    decode_kstreams_subscription,
)
from topology.ids import TaskId, TopicPartition

PID = uuid.UUID("12345678-1234-5678-1234-567812345678")


def i32(*values: int) -> bytes:
    return struct.pack(f">{len(values)}i", *values)


def i64(value: int) -> bytes:
    return struct.pack(">q", value)


def utf(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">H", len(raw)) + raw


def blob(text: str) -> bytes:
    raw = text.encode()
    return i32(len(raw)) + raw


def test_subscription_v2_v6_carry_task_sets_and_the_endpoint() -> None:
    v2 = i32(2) + PID.bytes + i32(1, 0, 1) + i32(1, 1, 0) + blob("h:8080")
    info = decode_kstreams_subscription(v2)
    assert (info.version, info.latest_supported_version, info.process_id) == (2, 2, PID)
    assert info.prev_tasks == (TaskId(0, 1),)
    assert info.standby_tasks == (TaskId(1, 0),)
    assert info.endpoint == "h:8080"
    v6 = i32(6, 6) + PID.bytes + i32(0) + i32(0) + blob("")
    assert decode_kstreams_subscription(v6).endpoint is None


def test_subscription_v9_and_v11_carry_offset_sums_error_and_client_tags() -> None:
    v9 = (
        i32(9, 9) + PID.bytes + blob("a:1")
        + i32(1) + i32(0) + i32(2) + i32(0) + i64(-2) + i32(1) + i64(40)  # subtopology 0: p0 -> -2, p1 -> 40
        + b"\x07" + i32(0)
    )  # fmt: skip
    info = decode_kstreams_subscription(v9)
    assert info.task_offset_sums == ((TaskId(0, 0), -2), (TaskId(0, 1), 40))
    v11 = (
        i32(11, 12) + PID.bytes + blob("a:1")
        + i32(2) + i32(1, 3) + i64(5) + struct.pack(">h", -1) + i32(0, 0) + i64(7) + struct.pack(">h", -1)
        + b"\x00" + i32(1)
        + i32(1) + blob("zone") + blob("eu-1")
    )  # fmt: skip
    info = decode_kstreams_subscription(v11)
    assert info.latest_supported_version == 12
    assert info.task_offset_sums == ((TaskId(0, 0), 7), (TaskId(1, 3), 5))
    assert info.error_code == 1
    assert info.client_tags == (("zone", "eu-1"),)
    # a newer version is read with the newest layout known, its appended bytes ignored
    assert decode_kstreams_subscription(i32(12) + v11[4:] + b"more").version == 12
    with pytest.raises(DecodeError, match="4 byte"):
        decode_kstreams_subscription(v11 + b"more")


def _task(subtopology: int, partition: int, version: int) -> bytes:
    return i32(subtopology, partition) + (i32(0) if version >= 10 else b"")


def test_assignment_v11_with_its_topic_dictionary_and_hosts() -> None:
    v = 11
    data = (
        i32(v, v)
        + i32(2) + _task(0, 1, v) + _task(0, 0, v)
        + i32(1) + _task(1, 0, v) + i32(1) + utf("t") + i32(0)
        + i32(1) + i32(0) + utf("t")
        + i32(1) + utf("h") + i32(80) + i32(2) + i32(0, 0) + i32(0, 1)
        + i32(1) + utf("g") + i32(81) + i32(1) + i32(0, 0)
        + i32(0) + i64(123)
    )  # fmt: skip
    info = decode_kstreams_assignment(data)
    assert info.active_tasks == (TaskId(0, 1), TaskId(0, 0))  # parallel to the partitions, as sent
    assert info.standby_tasks == (TaskId(1, 0),)
    assert info.active_partitions_by_host == (("h:80", (TopicPartition("t", 0), TopicPartition("t", 1))),)
    assert info.standby_partitions_by_host == (("g:81", (TopicPartition("t", 0),)),)
    assert info.next_rebalance_ms == 123


def test_assignment_v1_and_v4_and_bad_bytes() -> None:
    v1 = i32(1) + i32(1) + i32(0, 2) + i32(0)
    assert decode_kstreams_assignment(v1).active_tasks == (TaskId(0, 2),)
    v4 = i32(4, 4) + i32(0) + i32(0) + i32(1) + utf("h") + i32(1) + i32(1) + utf("t") + i32(3) + i32(9)
    info = decode_kstreams_assignment(v4)
    assert info.active_partitions_by_host == (("h:1", (TopicPartition("t", 3),)),)
    assert info.error_code == 9
    with pytest.raises(DecodeError, match="bad count"):
        decode_kstreams_assignment(i32(4, 4) + i32(1_000_000))
    with pytest.raises(DecodeError, match="not in the dictionary"):
        decode_kstreams_assignment(
            i32(5, 5) + i32(0, 0) + i32(0) + i32(1) + utf("h") + i32(1) + i32(1) + i32(7, 0)
        )
    with pytest.raises(DecodeError, match="bad version"):
        decode_kstreams_subscription(i32(0))
