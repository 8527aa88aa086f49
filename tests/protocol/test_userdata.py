"""streamtasks userdata: the documented layout of every version, round trips, the probing
header, canonical form, and the size bound against Kafka Streams' v11 SubscriptionInfo."""

from __future__ import annotations

import struct
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamtasks.errors import DecodeError, LocalProtocolError
from streamtasks.protocol import (
    LATEST_VERSION,
    RUNNING_OFFSET_SUM,
    UNKNOWN_OFFSET_SUM,
    AssignmentInfo,
    AssignorErrorCode,
    SubscriptionInfo,
    decode_assignment_info,
    decode_subscription_info,
    encode_assignment_info,
    encode_subscription_info,
    offset_sums_from_sets,
    peek_version,
)
from tests.protocol import strategies as S
from topology.ids import TaskId

PID = uuid.UUID(int=1)
PID_BYTES = bytes(15) + b"\x01"
FINGERPRINT = bytes(range(16))


def header(version: int, latest: int = 3) -> bytes:
    return struct.pack(">ii", version, latest)


SUB = SubscriptionInfo(
    process_id=PID,
    task_offset_sums={TaskId(0, 0): RUNNING_OFFSET_SUM, TaskId(0, 1): 100, TaskId(2, 5): UNKNOWN_OFFSET_SUM},
    endpoint="h:9",
    capacity=2,
    rack="r1",
    client_tags={"zone": "a"},
    topology_fingerprint=FINGERPRINT,
)

SUB_V1 = (
    header(1)
    + PID_BYTES
    + bytes([1, 0, 1, 0])  # previous active {0_0}: 1 group, subtopology 0, 1 task, partition 0
    + bytes([2, 0, 1, 1, 1, 1, 5])  # previous standby {0_1, 2_5}: subtopology gaps 0, 1; partitions 1, 5
)
SUB_V2 = (
    header(2)
    + PID_BYTES
    # offset sums: 2 groups; s0: 2 tasks (p0: -2+3=1, p1 gap 0: 100+3=103); s2 (gap 1): p5: -3+3=0
    + bytes([2, 0, 2, 0, 1, 0, 103, 1, 1, 5, 0])
    + b"\x04h:9"  # endpoint: length + 1, bytes
    + b"\x02"  # capacity
)
SUB_V3 = (
    SUB_V2[:8].replace(header(2), header(3))
    + SUB_V2[8:]
    + b"\x03r1"  # rack
    + b"\x01\x04zone\x01a"  # client tags
    + b"\x01"
    + FINGERPRINT  # fingerprint present
    + b"\x00"  # error code NONE
)

ASSIGN = AssignmentInfo(
    active_tasks=frozenset({TaskId(0, 0), TaskId(0, 1)}),
    standby_tasks=frozenset({TaskId(1, 0)}),
    warmup_tasks=frozenset({TaskId(1, 2)}),
    active_tasks_by_host={"h:9": frozenset({TaskId(0, 0), TaskId(0, 1)})},
    standby_tasks_by_host={"h:8": frozenset({TaskId(1, 0)})},
    next_rebalance_ms=1000,
    acceptable_recovery_lag=5,
)
ASSIGN_V1 = (
    header(1)
    + bytes([1, 0, 2, 0, 0])  # active {0_0, 0_1}
    + bytes([1, 1, 2, 0, 1])  # standby incl. warm-up {1_0, 1_2}
    + b"\x00"  # error code
)
ASSIGN_V2 = (
    header(2)
    + bytes([1, 0, 2, 0, 0])  # active
    + bytes([1, 1, 1, 0])  # standby {1_0}
    + bytes([1, 1, 1, 2])  # warm-up {1_2}
    + b"\x01\x03h:9"
    + bytes([1, 0, 2, 0, 0])  # active tasks by host
    + b"\xe9\x07"  # next rebalance: 1000 + 1 = 1001 as a varint
    + b"\x00"  # error code
)
ASSIGN_V3 = (
    header(3)
    + ASSIGN_V2[8:]
    + b"\x01\x03h:8"
    + bytes([1, 1, 1, 0])  # standby tasks by host
    + b"\x06"  # acceptable recovery lag: 5 + 1
)


@pytest.mark.parametrize(("version", "expected"), [(1, SUB_V1), (2, SUB_V2), (3, SUB_V3)])
def test_subscription_info_layout(version: int, expected: bytes) -> None:
    assert encode_subscription_info(SUB, version) == expected
    assert decode_subscription_info(expected) == SUB.as_version(version)


@pytest.mark.parametrize(("version", "expected"), [(1, ASSIGN_V1), (2, ASSIGN_V2), (3, ASSIGN_V3)])
def test_assignment_info_layout(version: int, expected: bytes) -> None:
    assert encode_assignment_info(ASSIGN, version) == expected
    assert decode_assignment_info(expected) == ASSIGN.as_version(version)


def test_versions_differ_in_content() -> None:
    v1, v2 = SUB.as_version(1), SUB.as_version(2)
    assert v1.task_offset_sums[TaskId(0, 1)] == UNKNOWN_OFFSET_SUM  # v1 only knows "standby"
    assert v2.task_offset_sums[TaskId(0, 1)] == 100
    assert (v1.endpoint, v2.endpoint) == (None, "h:9")
    assert (v2.rack, SUB.as_version(3).rack) == (None, "r1")
    a1 = ASSIGN.as_version(1)
    assert a1.warmup_tasks == frozenset()
    assert TaskId(1, 2) in a1.standby_tasks
    assert ASSIGN.as_version(2).standby_tasks_by_host == {}


@given(info=S.subscription_infos, version=S.versions)
def test_subscription_info_roundtrip(info: SubscriptionInfo, version: int) -> None:
    data = encode_subscription_info(info, version)
    assert decode_subscription_info(data) == info.as_version(version)
    assert peek_version(data) == (version, LATEST_VERSION)


@given(info=S.assignment_infos(), version=S.versions)
def test_assignment_info_roundtrip(info: AssignmentInfo, version: int) -> None:
    data = encode_assignment_info(info, version)
    assert decode_assignment_info(data) == info.as_version(version)
    assert encode_assignment_info(decode_assignment_info(data)) == data  # canonical


def test_previous_tasks_derive_from_offset_sums() -> None:
    assert SUB.previous_active == {TaskId(0, 0)}
    assert SUB.previous_standby == {TaskId(0, 1), TaskId(2, 5)}
    sums = offset_sums_from_sets({TaskId(0, 0)}, {TaskId(1, 1)})
    assert sums == {TaskId(0, 0): RUNNING_OFFSET_SUM, TaskId(1, 1): UNKNOWN_OFFSET_SUM}


@given(trailer=st.binary(max_size=40), version=st.integers(LATEST_VERSION + 1, 2**31 - 1))
def test_future_subscription_yields_header_and_process_id(trailer: bytes, version: int) -> None:
    data = struct.pack(">ii", version, version) + PID_BYTES + trailer
    assert peek_version(data) == (version, version)
    info = decode_subscription_info(data)
    assert (info.version, info.latest_supported_version, info.process_id) == (version, version, PID)
    assert info.task_offset_sums == {}
    with pytest.raises(LocalProtocolError):
        encode_subscription_info(info)


def test_future_assignment_is_a_decode_error() -> None:
    with pytest.raises(DecodeError, match="newer than the latest"):
        decode_assignment_info(header(4, 4) + ASSIGN_V3[8:])


def test_an_older_reader_sees_a_newer_subscription_as_a_future_one() -> None:
    """An emulated release whose latest is v2 reads a v3 subscription as version probing does:
    header and process id, nothing else; what it knows it reads as before."""
    info = decode_subscription_info(SUB_V3, latest=2)
    assert (info.version, info.latest_supported_version, info.process_id) == (3, 3, PID)
    assert info.task_offset_sums == {}
    assert info.topology_fingerprint is None
    assert decode_subscription_info(SUB_V2, latest=2) == SUB.as_version(2)
    assert decode_subscription_info(SUB_V3 + b"junk", latest=2).version == 3  # not parsed past the id


def test_an_assignment_above_the_readers_latest_is_a_decode_error() -> None:
    with pytest.raises(DecodeError, match=r"newer than the latest this member reads \(2\)"):
        decode_assignment_info(ASSIGN_V3, latest=2)
    assert decode_assignment_info(ASSIGN_V2, latest=2) == ASSIGN.as_version(2)


@pytest.mark.parametrize("latest", [0, LATEST_VERSION + 1])
def test_a_reading_limit_must_be_a_version_this_code_knows(latest: int) -> None:
    with pytest.raises(LocalProtocolError, match="latest version must be in"):
        decode_subscription_info(SUB_V3, latest=latest)
    with pytest.raises(LocalProtocolError, match="latest version must be in"):
        decode_assignment_info(ASSIGN_V3, latest=latest)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"\x00\x00\x00", "truncated"),
        (header(0, 3) + PID_BYTES, "unknown version 0"),
        (header(-1, 3) + PID_BYTES, "unknown version -1"),
        (header(3, 2) + PID_BYTES, "below version"),
        (header(9, 9) + PID_BYTES[:8], "truncated"),
        (SUB_V1 + b"\x00", "trailing"),
        (header(1) + PID_BYTES + bytes([1, 0, 1, 0]) + bytes([1, 0, 1, 0]), "both previous active"),
        (header(1) + PID_BYTES + bytes([1, 0, 0]) + bytes([0]), "empty group"),
        (header(1) + PID_BYTES + bytes([1, 0x80, 0x00, 1, 0, 0]), "shortest form"),
        (header(1) + PID_BYTES + bytes([1, 0xFF, 0xFF, 0xFF, 0xFF, 0x0F, 1, 0, 0]), "above the maximum"),
        (header(1) + PID_BYTES + bytes([2, 0xFF, 0xFF, 0xFF, 0xFF, 0x07, 1, 0, 0, 1, 0]), "does not fit"),
        (header(2) + PID_BYTES + bytes([1, 0, 1, 0, 2, 0, 1]), "offset sum -1"),
        (header(2) + PID_BYTES + bytes([0, 0, 0]), "capacity must be"),
        (header(3) + PID_BYTES + bytes([0, 0, 1, 0, 0, 2]), "above the maximum 1"),
        (header(3) + PID_BYTES + bytes([0, 0, 1, 0, 0, 0, 9]), "unknown error code 9"),
        (header(3) + PID_BYTES + bytes([0, 0, 1, 0, 2, 1, ord("b"), 0, 1, ord("a"), 0]), "not strictly"),
    ],
)
def test_malformed_subscription_info(data: bytes, message: str) -> None:
    with pytest.raises(DecodeError, match=message):
        decode_subscription_info(data)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (header(1) + bytes([0, 0]), "truncated"),
        (header(1) + bytes([1, 0, 1, 0, 1, 0, 1, 0, 0]), "both active_tasks and standby_tasks"),
        (header(2) + bytes([0, 0, 0, 2, 1, ord("b"), 0, 1, ord("a"), 0, 0, 0]), "not strictly increasing"),
        (header(1) + bytes([0x85, 0x80, 0x80, 0x80, 0x01]), "claims"),
    ],
)
def test_malformed_assignment_info(data: bytes, message: str) -> None:
    with pytest.raises(DecodeError, match=message):
        decode_assignment_info(data)


def test_values_the_wire_cannot_carry_are_rejected_up_front() -> None:
    with pytest.raises(LocalProtocolError, match="offset sum -1"):
        SubscriptionInfo(process_id=PID, task_offset_sums={TaskId(0, 0): -1})
    with pytest.raises(LocalProtocolError, match="capacity"):
        SubscriptionInfo(process_id=PID, capacity=0)
    with pytest.raises(LocalProtocolError, match="16 bytes"):
        SubscriptionInfo(process_id=PID, topology_fingerprint=b"short")
    with pytest.raises(LocalProtocolError, match="UUID"):
        SubscriptionInfo(process_id="not-a-uuid")  # type: ignore[arg-type]
    with pytest.raises(LocalProtocolError, match="latest_supported_version"):
        SubscriptionInfo(process_id=PID, version=3, latest_supported_version=2)
    with pytest.raises(LocalProtocolError, match="both active_tasks and warmup_tasks"):
        AssignmentInfo(active_tasks=frozenset({TaskId(0, 0)}), warmup_tasks=frozenset({TaskId(0, 0)}))
    with pytest.raises(LocalProtocolError, match="next_rebalance_ms"):
        AssignmentInfo(next_rebalance_ms=-5)
    with pytest.raises(LocalProtocolError, match="cannot encode"):
        encode_assignment_info(ASSIGN, 4)


def test_error_codes_follow_kafka_streams() -> None:
    assert [(e.name, e.value) for e in AssignorErrorCode][:5] == [
        ("NONE", 0),
        ("INCOMPLETE_SOURCE_TOPIC_METADATA", 1),
        ("VERSION_PROBING", 2),
        ("ASSIGNMENT_ERROR", 3),
        ("SHUTDOWN_REQUESTED", 4),
    ]


# -- size against Kafka Streams --------------------------------------------------------------


def streams_v11_size(endpoint: str, tasks: int) -> int:
    """Kafka Streams' v11 SubscriptionInfo for the same content, from its documented layout:
    8-byte header, 16-byte process id, endpoint (int32 length + bytes), then per task offset
    sum 4 + 4 + 8 + 2 bytes. (It also has fields not counted here, so this is a lower bound.)"""
    return 8 + 16 + 4 + len(endpoint.encode()) + 18 * tasks


def owned_tasks(n: int, big_sums: bool) -> dict[TaskId, int]:
    """``n`` tasks over 4 subtopologies, every third partition, half of them running."""
    sums: dict[TaskId, int] = {}
    for i in range(n):
        task = TaskId(i % 4, 3 * (i // 4))
        if i % 2:
            sums[task] = RUNNING_OFFSET_SUM
        else:
            sums[task] = (1 << 63) - 1 - i if big_sums else (i * 7_919_993) % 1_000_000_007
    return sums


@pytest.mark.parametrize("tasks", [10, 100, 1000])
@pytest.mark.parametrize("big_sums", [False, True])
@pytest.mark.parametrize("version", [1, 2, 3])
def test_never_larger_than_kafka_streams(tasks: int, big_sums: bool, version: int) -> None:
    endpoint = "streamtasks-7.streamtasks.svc.cluster.local:8080"
    info = SubscriptionInfo(
        process_id=uuid.UUID(int=2**127 + 12345),
        task_offset_sums=owned_tasks(tasks, big_sums),
        endpoint=endpoint,
        capacity=4,
        rack="eu-west-1a",
        client_tags={"zone": "eu-west-1a", "cluster": "k8s-3"},
        topology_fingerprint=FINGERPRINT,
    )
    assert len(encode_subscription_info(info, version)) <= streams_v11_size(endpoint, tasks)


def test_unknown_error_code_is_rejected_up_front() -> None:
    with pytest.raises(LocalProtocolError, match="unknown error code 42"):
        AssignmentInfo(error_code=42)  # type: ignore[arg-type]
