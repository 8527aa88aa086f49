"""KIP-848 codecs: byte-identical to Apache Kafka (kio's serializer, hand-written vectors from the
JSON schemas), the streamtasks tagged fields skipped by Apache's reader, the private RPCs."""

from __future__ import annotations

import io
import uuid
from collections.abc import Callable
from dataclasses import replace
from typing import Any, TypeVar
from unittest import mock

import pytest
from hypothesis import given
from kio.serial import entity_reader, entity_writer

from streamtasks.errors import DecodeError, LocalProtocolError
from streamtasks.protocol import _flex as F
from streamtasks.protocol import consumer_group_kio as K
from streamtasks.protocol.assignment_rpc import (
    INSTALL_ASSIGNMENT_API_KEY,
    PREPARE_ASSIGNMENT_API_KEY,
    ConsumerGroupInstallAssignmentRequest,
    ConsumerGroupPrepareAssignmentRequest,
    InstalledMember,
    decode_install_request,
    decode_install_response,
    decode_prepare_request,
    decode_prepare_response,
    encode_install_request,
    encode_install_response,
    encode_prepare_request,
    encode_prepare_response,
)
from streamtasks.protocol.consumer_group import (
    ClientAssignor,
    ConsumerGroupDescribeRequest,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    DescribedAssignment,
    HeartbeatAssignment,
    TopicIdPartitions,
)
from streamtasks.protocol.consumer_group_codec import (
    decode_describe_request,
    decode_describe_response,
    decode_heartbeat_request,
    decode_heartbeat_response,
    encode_describe_request,
    encode_describe_response,
    encode_heartbeat_request,
    encode_heartbeat_response,
)
from streamtasks.protocol.errors import KafkaErrorCode
from tests.protocol import strategies_kip848 as S
from tests.protocol.fuzz_cases_kip848 import KIP848_CASES

T = TypeVar("T")
T1 = uuid.UUID(int=1)
T1_BYTES = bytes(15) + b"\x01"


def kio_bytes(entity: Any) -> bytes:
    buf = io.BytesIO()
    entity_writer(type(entity))(buf, entity)
    return buf.getvalue()


def kio_parse(cls: type[Any], data: bytes) -> Any:
    entity, offset = entity_reader(cls)(memoryview(data), 0)
    assert offset == len(data)
    return entity


# -- hand-written vectors, field by field from the JSON schemas ----------------------------------

REQUEST = ConsumerGroupHeartbeatRequest(
    group_id="g",
    member_id="m",
    member_epoch=0,
    rack_id="r1",
    rebalance_timeout_ms=300_000,
    subscribed_topic_names=("foo",),
    server_assignor="uniform",
    topic_partitions=(),
)
REQUEST_V0 = bytes.fromhex(
    "0267"  # GroupId "g"
    "026d"  # MemberId "m"
    "00000000"  # MemberEpoch 0
    "00"  # InstanceId null
    "037231"  # RackId "r1"
    "000493e0"  # RebalanceTimeoutMs 300000
    "0204666f6f"  # SubscribedTopicNames ["foo"]
    "08756e69666f726d"  # ServerAssignor "uniform"
    "01"  # TopicPartitions []
    "00"  # no tagged fields
)
# v1: SubscribedTopicRegex (null) after the names
REQUEST_V1 = REQUEST_V0[:21] + b"\x00" + REQUEST_V0[21:]

RESPONSE = ConsumerGroupHeartbeatResponse(
    error=KafkaErrorCode.FENCED_MEMBER_EPOCH,
    error_message="x",
    member_epoch=5,
    heartbeat_interval_ms=5000,
    assignment=HeartbeatAssignment(topic_partitions=(TopicIdPartitions(topic_id=T1, partitions=(0, 2)),)),
)
RESPONSE_BYTES = (
    bytes.fromhex("00000000006e02780000000005000013880102")
    + T1_BYTES
    + bytes.fromhex("030000000000000002000000")
)


@pytest.mark.parametrize(("version", "expected"), [(0, REQUEST_V0), (1, REQUEST_V1)])
def test_heartbeat_request_vector(version: int, expected: bytes) -> None:
    assert len(REQUEST_V0) == 31
    assert encode_heartbeat_request(REQUEST, version) == expected
    assert decode_heartbeat_request(expected, version) == REQUEST
    assert kio_bytes(K.heartbeat_request_to_kio(REQUEST, version)) == expected


@pytest.mark.parametrize("version", [0, 1])
def test_heartbeat_response_vector(version: int) -> None:
    assert encode_heartbeat_response(RESPONSE, version) == RESPONSE_BYTES
    assert decode_heartbeat_response(RESPONSE_BYTES, version) == RESPONSE
    assert kio_bytes(K.heartbeat_response_to_kio(RESPONSE, version)) == RESPONSE_BYTES


def test_extension_tag_vectors() -> None:
    """The tags are uvarints: 84800 = c0 96 05, 84801 = c1 96 05."""
    with_assignors = replace(REQUEST, client_assignors=())
    assert encode_heartbeat_request(with_assignors, 1) == REQUEST_V1[:-1] + bytes.fromhex("01c096050101")
    flagged = ConsumerGroupHeartbeatResponse(
        error=KafkaErrorCode.NONE, member_epoch=1, heartbeat_interval_ms=1, should_compute_assignment=True
    )
    encoded = encode_heartbeat_response(flagged)
    assert encoded.endswith(bytes.fromhex("ff01c196050101"))


def test_describe_request_vector() -> None:
    request = ConsumerGroupDescribeRequest(group_ids=("g",), include_authorized_operations=True)
    expected = bytes.fromhex("0202670100")
    for version in (0, 1):
        assert encode_describe_request(request, version) == expected
        assert kio_bytes(K.describe_request_to_kio(request, version)) == expected


def test_prepare_and_install_request_vectors() -> None:
    prepare = ConsumerGroupPrepareAssignmentRequest(group_id="g", member_id="m", member_epoch=3)
    assert encode_prepare_request(prepare) == bytes.fromhex("0267026d0000000300")
    install = ConsumerGroupInstallAssignmentRequest(
        group_id="g",
        member_id="m",
        member_epoch=3,
        group_epoch=4,
        members=(
            InstalledMember(
                member_id="m",
                topic_partitions=(TopicIdPartitions(topic_id=T1, partitions=(1,)),),
                metadata_version=2,
                metadata_bytes=b"\x07",
            ),
        ),
    )
    expected = (
        bytes.fromhex("0267026d00000003000000040002026d02")
        + T1_BYTES
        + bytes.fromhex("020000000100000202070000")
    )
    assert encode_install_request(install) == expected
    assert decode_install_request(expected) == install


def test_private_api_keys_clear_of_apache() -> None:
    """Apache Kafka 4.4 uses 0-94; the seed's 71 for Describe is GetTelemetrySubscriptions."""
    for key in (PREPARE_ASSIGNMENT_API_KEY, INSTALL_ASSIGNMENT_API_KEY):
        assert 94 < key <= (1 << 15) - 1


# -- against kio, generated ------------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1])
@given(data=S.st.data())
def test_heartbeat_request_matches_kio(version: int, data: S.st.DataObject) -> None:
    request = data.draw(S.heartbeat_requests(version, extensions=False))
    encoded = encode_heartbeat_request(request, version)
    entity = K.heartbeat_request_to_kio(request, version)
    assert kio_bytes(entity) == encoded
    assert decode_heartbeat_request(encoded, version) == request
    assert K.heartbeat_request_from_kio(kio_parse(type(entity), encoded)) == request


@pytest.mark.parametrize("version", [0, 1])
@given(data=S.st.data())
def test_heartbeat_response_matches_kio(version: int, data: S.st.DataObject) -> None:
    response = data.draw(S.heartbeat_responses(extensions=False))
    encoded = encode_heartbeat_response(response, version)
    entity = K.heartbeat_response_to_kio(response, version)
    assert kio_bytes(entity) == encoded
    assert K.heartbeat_response_from_kio(kio_parse(type(entity), encoded)) == response


@pytest.mark.parametrize("version", [0, 1])
@given(data=S.st.data())
def test_describe_matches_kio(version: int, data: S.st.DataObject) -> None:
    request = data.draw(S.describe_requests)
    encoded = encode_describe_request(request, version)
    assert kio_bytes(K.describe_request_to_kio(request, version)) == encoded
    assert decode_describe_request(encoded, version) == request
    response = data.draw(S.describe_responses(version, extensions=False))
    encoded = encode_describe_response(response, version)
    entity = K.describe_response_to_kio(response, version)
    assert kio_bytes(entity) == encoded
    assert decode_describe_response(encoded, version) == response
    assert K.describe_response_from_kio(kio_parse(type(entity), encoded)) == response


def apache_reader(decode: Callable[[bytes, int], T], data: bytes, version: int) -> T:
    """Decode as Apache Kafka's generated readers do: every tag is unknown, so skipped.

    (kio cannot stand in here: its reader raises on unknown tags, where Kafka's Java
    ``read()`` keeps them in ``_unknownTaggedFields`` and goes on.)"""
    real = F.read_tagged_fields

    def knows_no_tag(r: Any, what: str, known: Any) -> dict[int, Any]:
        return real(r, what, {})

    with mock.patch.object(F, "read_tagged_fields", knows_no_tag):
        return decode(data, version)


def without_extensions(message: Any) -> Any:
    if isinstance(message, ConsumerGroupHeartbeatRequest):
        return replace(message, client_assignors=None)
    if isinstance(message, ConsumerGroupHeartbeatResponse):
        a = message.assignment
        return replace(
            message,
            should_compute_assignment=False,
            assignment=None if a is None else HeartbeatAssignment(topic_partitions=a.topic_partitions),
        )
    bare = DescribedAssignment
    return replace(
        message,
        groups=tuple(
            replace(
                g,
                members=tuple(
                    replace(
                        m,
                        assignment=bare(topic_partitions=m.assignment.topic_partitions),
                        target_assignment=bare(topic_partitions=m.target_assignment.topic_partitions),
                    )
                    for m in g.members
                ),
            )
            for g in message.groups
        ),
    )


@pytest.mark.parametrize("version", [0, 1])
@given(data=S.st.data())
def test_apache_reader_skips_the_extensions(version: int, data: S.st.DataObject) -> None:
    """A reader that knows none of the streamtasks tags reads a message carrying them as the
    message without them, and that message's bytes are kio's (Apache's)."""
    for message, encode, decode, to_kio in (
        (
            data.draw(S.heartbeat_requests(version)),
            encode_heartbeat_request,
            decode_heartbeat_request,
            K.heartbeat_request_to_kio,
        ),
        (
            data.draw(S.heartbeat_responses()),
            encode_heartbeat_response,
            decode_heartbeat_response,
            K.heartbeat_response_to_kio,
        ),
        (
            data.draw(S.describe_responses(version)),
            encode_describe_response,
            decode_describe_response,
            K.describe_response_to_kio,
        ),
    ):
        encoded = encode(message, version)
        assert decode(encoded, version) == message
        bare = without_extensions(message)
        assert apache_reader(decode, encoded, version) == bare
        assert kio_bytes(to_kio(bare, version)) == encode(bare, version)


@given(data=S.st.data())
def test_private_rpcs_round_trip(data: S.st.DataObject) -> None:
    for strategy, encode, decode in (
        (S.prepare_requests, encode_prepare_request, decode_prepare_request),
        (S.prepare_responses, encode_prepare_response, decode_prepare_response),
        (S.install_requests, encode_install_request, decode_install_request),
        (S.install_responses, encode_install_response, decode_install_response),
    ):
        message = data.draw(strategy)
        assert decode(encode(message)) == message  # type: ignore[operator]


# -- what the encoders refuse ------------------------------------------------------------------------


def test_regex_needs_v1() -> None:
    request = ConsumerGroupHeartbeatRequest(
        group_id="g", member_id="m", member_epoch=0, subscribed_topic_regex="a.*"
    )
    with pytest.raises(LocalProtocolError):
        encode_heartbeat_request(request, 0)
    with pytest.raises(LocalProtocolError):
        encode_heartbeat_request(request, 2)


def test_out_of_range_values_are_refused() -> None:
    bad = ClientAssignor(name="a", minimum_version=0, maximum_version=1 << 15)
    request = ConsumerGroupHeartbeatRequest(
        group_id="g", member_id="m", member_epoch=0, client_assignors=(bad,)
    )
    with pytest.raises(LocalProtocolError):
        encode_heartbeat_request(request)
    with pytest.raises(LocalProtocolError):
        encode_heartbeat_request(
            ConsumerGroupHeartbeatRequest(group_id="x" * 40_000, member_id="m", member_epoch=0)
        )


def test_decoders_refuse_trailing_bytes_duplicate_tags_and_bad_booleans() -> None:
    with pytest.raises(DecodeError, match="trailing"):
        decode_heartbeat_request(REQUEST_V1 + b"\x00", 1)
    duplicate = REQUEST_V1[:-1] + bytes.fromhex("02c096050101c096050101")
    with pytest.raises(DecodeError, match="twice"):
        decode_heartbeat_request(duplicate, 1)
    flag = RESPONSE_BYTES[:-1] + bytes.fromhex("01c196050102")
    with pytest.raises(DecodeError, match="boolean"):
        decode_heartbeat_response(flag, 1)
    unknown_tag = REQUEST_V1[:-1] + bytes.fromhex("010702abcd")
    assert decode_heartbeat_request(unknown_tag, 1) == REQUEST


@pytest.mark.parametrize("name", sorted(KIP848_CASES))
def test_huge_counts_are_refused_without_allocating(name: str) -> None:
    """A length prefix of 2^31 - 1 in the first field never makes a decoder allocate or loop."""
    decode, _ = KIP848_CASES[name]
    with pytest.raises(DecodeError):
        decode(b"\xfe\xff\xff\xff\x07" + b"\x00" * 8)
