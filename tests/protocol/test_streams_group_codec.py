"""StreamsGroupHeartbeat (API key 88) v0/v1 bytes: round trips, a vector written by hand from
Apache Kafka 4.4's JSON schema, the version rules of Kafka's writer, malformed input. Byte
identity with kafka-clients is tests/protocol/test_streams_group_java.py."""

from __future__ import annotations

import pytest
from hypothesis import given

from streamtasks.errors import DecodeError, LocalProtocolError
from streamtasks.protocol.errors import KafkaErrorCode
from streamtasks.protocol.streams_group import (
    Endpoint,
    EndpointToPartitions,
    StreamsGroupHeartbeatRequest,
    StreamsGroupHeartbeatResponse,
    StreamsGroupStatus,
    StreamsStatus,
    Subtopology,
    TaskIds,
    TopicPartitions,
    Topology,
)
from streamtasks.protocol.streams_group_codec import (
    decode_streams_heartbeat_request,
    decode_streams_heartbeat_response,
    encode_streams_heartbeat_request,
    encode_streams_heartbeat_response,
)
from tests.protocol import strategies_streams as S

JOIN = StreamsGroupHeartbeatRequest(
    group_id="g",
    member_id="m",
    member_epoch=0,
    rebalance_timeout_ms=1000,
    topology=Topology(epoch=1, subtopologies=(Subtopology(subtopology_id="0", source_topics=("in",)),)),
    process_id="p",
)
# fmt: off
JOIN_BYTES = bytes.fromhex(
    "0267" "026d" "00000000" "00000000" "00" "00" "000003e8"  # ids, epochs, instance, rack, timeout
    "01" "00000001" "02"  # Topology present, Epoch 1, one subtopology
    "0230" "0203696e" "01" "01" "01" "01" "01" "00"  # "0", ["in"], 4 empty arrays, copartition, tags
    "00"  # Topology's tags
    "00" "00" "00"  # Active/Standby/WarmupTasks null
    "0270" "ff" "00" "00" "00"  # ProcessId "p", UserEndpoint null, tags/offsets/end offsets null
    "00"  # ShutdownApplication false
    "00"  # tagged fields
)
# fmt: on

ANSWER = StreamsGroupHeartbeatResponse(
    error=KafkaErrorCode.NONE,
    member_id="m",
    member_epoch=2,
    heartbeat_interval_ms=5000,
    task_offset_interval_ms=60000,
    acceptable_recovery_lag=10000,
    status=(StreamsStatus(status_code=StreamsGroupStatus.MISSING_INTERNAL_TOPICS, status_detail="x"),),
    active_tasks=(TaskIds(subtopology_id="0", partitions=(0, 1)),),
    standby_tasks=(),
    warmup_tasks=(),
    endpoint_information_epoch=3,
    partitions_by_user_endpoint=(
        EndpointToPartitions(
            user_endpoint=Endpoint(host="h", port=40000),
            active_partitions=(TopicPartitions(topic="in", partitions=(0, 1)),),
        ),
    ),
)
# fmt: off
ANSWER_V1 = bytes.fromhex(
    "00000000" "0000" "00" "026d" "00000002" "00001388"  # throttle, error, message, id, epoch, interval
    "0000ea60" "0000000000002710"  # TaskOffsetIntervalMs 60000, AcceptableRecoveryLag 10000 (int64)
    "02" "03" "0278" "00"  # Status: MISSING_INTERNAL_TOPICS "x"
    "02" "0230" "03" "00000000" "00000001" "00"  # ActiveTasks: "0" [0, 1]
    "01" "01"  # Standby / Warmup: empty
    "00"  # TopologyDescriptionRequired false
    "00000003"  # EndpointInformationEpoch
    "02" "0268" "9c40" "00" "02" "03696e" "03" "00000000" "00000001" "00" "01" "00"  # h:40000, in [0,1]
    "00"  # tagged fields
)
# fmt: on


def test_join_request_matches_the_hand_written_vector() -> None:
    for version in (0, 1):
        assert encode_streams_heartbeat_request(JOIN, version) == JOIN_BYTES
        assert decode_streams_heartbeat_request(JOIN_BYTES, version) == JOIN


def test_response_v1_matches_the_hand_written_vector() -> None:
    assert encode_streams_heartbeat_response(ANSWER, 1) == ANSWER_V1
    assert decode_streams_heartbeat_response(ANSWER_V1, 1) == ANSWER


def test_response_v0_carries_the_int32_legacy_lag_and_no_description_flag() -> None:
    v0 = encode_streams_heartbeat_response(ANSWER, 0)
    # v1 drops 4 bytes of int32 legacy lag, adds 8 of int64 lag and 1 of TopologyDescriptionRequired
    assert len(ANSWER_V1) - len(v0) == 8 + 1 - 4
    decoded = decode_streams_heartbeat_response(v0, 0)
    assert decoded.acceptable_recovery_lag == -1  # ignorable: dropped at v0, as Kafka does
    assert decoded.task_offset_interval_ms == 60000


def test_fields_a_version_does_not_carry_are_refused_as_kafka_refuses_them() -> None:
    with pytest.raises(LocalProtocolError, match="TopologyDescriptionRequired needs"):
        encode_streams_heartbeat_response(
            StreamsGroupHeartbeatResponse(
                error=KafkaErrorCode.NONE,
                member_id="m",
                member_epoch=1,
                heartbeat_interval_ms=1,
                topology_description_required=True,
            ),
            0,
        )
    with pytest.raises(LocalProtocolError, match="AcceptableRecoveryLagLegacy"):
        encode_streams_heartbeat_response(
            StreamsGroupHeartbeatResponse(
                error=KafkaErrorCode.NONE,
                member_id="m",
                member_epoch=1,
                heartbeat_interval_ms=1,
                acceptable_recovery_lag_legacy=5,
            ),
            1,
        )


def test_values_kafka_cannot_carry_are_refused() -> None:
    with pytest.raises(LocalProtocolError, match="Port"):
        encode_streams_heartbeat_request(
            StreamsGroupHeartbeatRequest(
                group_id="g", member_id="m", member_epoch=0, user_endpoint=Endpoint(host="h", port=65536)
            )
        )
    with pytest.raises(LocalProtocolError, match="version 2"):
        encode_streams_heartbeat_request(JOIN, 2)


@pytest.mark.parametrize("version", [-1, 2])
def test_unknown_versions_are_decode_errors(version: int) -> None:
    with pytest.raises(DecodeError, match=f"version {version} is not supported"):
        decode_streams_heartbeat_request(JOIN_BYTES, version)
    with pytest.raises(DecodeError, match=f"version {version} is not supported"):
        decode_streams_heartbeat_response(ANSWER_V1, version)


def test_every_truncation_is_a_decode_error() -> None:
    for cut in range(len(JOIN_BYTES)):
        with pytest.raises(DecodeError):
            decode_streams_heartbeat_request(JOIN_BYTES[:cut])
    for cut in range(len(ANSWER_V1)):
        with pytest.raises(DecodeError):
            decode_streams_heartbeat_response(ANSWER_V1[:cut])


def test_malformed_bytes_are_decode_errors_naming_the_field() -> None:
    with pytest.raises(DecodeError, match="trailing"):
        decode_streams_heartbeat_request(JOIN_BYTES + b"\x00")
    forged = bytearray(JOIN_BYTES)
    forged[23] = 0x7F  # the subtopology count: 126 subtopologies in 24 bytes
    with pytest.raises(DecodeError, match=r"Topology\.Subtopologies claims 126"):
        decode_streams_heartbeat_request(bytes(forged))
    nulled = bytearray(JOIN_BYTES)
    nulled[26] = 0x00  # Subtopology.SourceTopics as null: not nullable
    with pytest.raises(DecodeError, match="SourceTopics must not be null"):
        decode_streams_heartbeat_request(bytes(nulled))
    marker = bytearray(JOIN_BYTES)
    marker[18] = 0x02  # the Topology's presence byte
    with pytest.raises(DecodeError, match="Topology starts with 2"):
        decode_streams_heartbeat_request(bytes(marker))
    flag = bytearray(ANSWER_V1)
    flag[49] = 0x02  # TopologyDescriptionRequired
    with pytest.raises(DecodeError, match="TopologyDescriptionRequired is the byte 2"):
        decode_streams_heartbeat_response(bytes(flag))


def test_unknown_tagged_fields_are_skipped_as_kafka_skips_them() -> None:
    tagged = JOIN_BYTES[:-1] + bytes.fromhex("010502abcd")  # one field, tag 5, 2 bytes
    assert decode_streams_heartbeat_request(tagged) == JOIN


@pytest.mark.parametrize("version", [0, 1])
def test_requests_round_trip(version: int) -> None:
    @given(S.heartbeat_requests(version))
    def check(request: StreamsGroupHeartbeatRequest) -> None:
        assert (
            decode_streams_heartbeat_request(encode_streams_heartbeat_request(request, version), version)
            == request
        )

    check()


@pytest.mark.parametrize("version", [0, 1])
def test_responses_round_trip(version: int) -> None:
    @given(S.heartbeat_responses(version))
    def check(response: StreamsGroupHeartbeatResponse) -> None:
        encoded = encode_streams_heartbeat_response(response, version)
        assert decode_streams_heartbeat_response(encoded, version) == response

    check()
