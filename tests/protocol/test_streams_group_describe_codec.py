"""StreamsGroupDescribe (API key 89) v0/v1 bytes: round trips, a vector written by hand from
Apache Kafka 4.4's JSON schema, the version rules of Kafka's writer, malformed input."""

from __future__ import annotations

import pytest
from hypothesis import given

from streamtasks.errors import DecodeError, LocalProtocolError
from streamtasks.protocol.errors import KafkaErrorCode
from streamtasks.protocol.streams_group import (
    DescribedStreamsGroup,
    StreamsGroupDescribeRequest,
    StreamsGroupDescribeResponse,
    TopologyDescription,
)
from streamtasks.protocol.streams_group_describe_codec import (
    decode_streams_describe_request,
    decode_streams_describe_response,
    encode_streams_describe_request,
    encode_streams_describe_response,
)
from tests.protocol import strategies_streams as S

REQUEST = StreamsGroupDescribeRequest(group_ids=("g",), include_topology_description=True)
EMPTY_GROUP = DescribedStreamsGroup(
    error=KafkaErrorCode.GROUP_ID_NOT_FOUND, group_id="g", error_message="no", assignor_name="sticky"
)
# fmt: off
GROUP_V0 = bytes.fromhex(
    "00000000" "02"  # throttle, one group
    "0045" "036e6f" "0267" "01" "00000000" "00000000"  # error 69, "no", "g", state "", epochs
    "ff" "01" "80000000"  # no topology, no members, AuthorizedOperations omitted (Integer.MIN_VALUE)
    "00" "00"  # the group's and the response's tagged fields
)
# fmt: on


def test_request_versions() -> None:
    assert encode_streams_describe_request(REQUEST, 1) == bytes.fromhex("020267000100")
    assert decode_streams_describe_request(bytes.fromhex("020267000100"), 1) == REQUEST
    with pytest.raises(LocalProtocolError, match="IncludeTopologyDescription needs StreamsGroupDescribe v1"):
        encode_streams_describe_request(REQUEST, 0)


def test_response_v0_matches_the_hand_written_vector_and_drops_the_ignorable_assignor() -> None:
    response = StreamsGroupDescribeResponse(groups=(EMPTY_GROUP,))
    assert encode_streams_describe_response(response, 0) == GROUP_V0
    decoded = decode_streams_describe_response(GROUP_V0, 0)
    assert decoded.groups[0].assignor_name is None
    v1 = encode_streams_describe_response(response, 1)
    assert v1 == GROUP_V0[:-2] + bytes.fromhex("ff0007737469636b79") + GROUP_V0[-2:]
    assert decode_streams_describe_response(v1, 1) == response


def test_v1_fields_are_refused_at_v0() -> None:
    with pytest.raises(LocalProtocolError, match="TopologyDescription needs"):
        encode_streams_describe_response(
            StreamsGroupDescribeResponse(
                groups=(
                    DescribedStreamsGroup(
                        error=KafkaErrorCode.NONE, group_id="g", topology_description=TopologyDescription()
                    ),
                )
            ),
            0,
        )
    with pytest.raises(LocalProtocolError, match="TopologyDescriptionStatus needs"):
        encode_streams_describe_response(
            StreamsGroupDescribeResponse(
                groups=(
                    DescribedStreamsGroup(
                        error=KafkaErrorCode.NONE, group_id="g", topology_description_status=1
                    ),
                )
            ),
            0,
        )


def test_malformed_responses_are_decode_errors() -> None:
    for cut in range(len(GROUP_V0)):
        with pytest.raises(DecodeError):
            decode_streams_describe_response(GROUP_V0[:cut], 0)
    with pytest.raises(DecodeError, match="trailing"):
        decode_streams_describe_response(GROUP_V0 + b"\x00", 0)
    forged = bytearray(GROUP_V0)
    forged[4] = 0x40  # 63 groups in 29 bytes
    with pytest.raises(DecodeError, match="Groups claims 63"):
        decode_streams_describe_response(bytes(forged), 0)
    with pytest.raises(DecodeError, match="version 2 is not supported"):
        decode_streams_describe_response(GROUP_V0, 2)


@pytest.mark.parametrize("version", [0, 1])
def test_requests_round_trip(version: int) -> None:
    @given(S.describe_requests(version))
    def check(request: StreamsGroupDescribeRequest) -> None:
        assert (
            decode_streams_describe_request(encode_streams_describe_request(request, version), version)
            == request
        )

    check()


@pytest.mark.parametrize("version", [0, 1])
def test_responses_round_trip(version: int) -> None:
    @given(S.describe_responses(version))
    def check(response: StreamsGroupDescribeResponse) -> None:
        encoded = encode_streams_describe_response(response, version)
        assert decode_streams_describe_response(encoded, version) == response

    check()
