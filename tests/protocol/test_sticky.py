"""KIP-341 sticky userdata: bytes equal kafka-python 3's, v0/v1 cross-reading."""

from __future__ import annotations

import warnings

import pytest
from hypothesis import given

from assignors.partition import sticky_user_data as sticky_module
from streamtasks.errors import DecodeError, LocalProtocolError
from streamtasks.protocol import (
    DEFAULT_GENERATION,
    StickyUserData,
    decode_sticky_userdata,
    encode_sticky_userdata,
)
from streamtasks.protocol.consumer_protocol import decode_subscription
from tests.protocol import strategies as S
from topology.ids import TopicPartition as TP

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.coordinator.assignors.sticky.user_data import StickyAssignorUserData


def kafka_python(ud: StickyUserData, version: int) -> bytes:
    groups: dict[str, list[int]] = {}
    for tp in sorted(ud.partitions):
        groups.setdefault(tp.topic, []).append(tp.partition)
    data = StickyAssignorUserData(
        previous_assignment=list(groups.items()), generation=ud.effective_generation
    )
    encoded: bytes = data.encode(version=version, header=False)
    return encoded


@pytest.mark.parametrize("version", [0, 1])
@given(ud=S.sticky_userdata)
def test_bytes_equal_kafka_python(version: int, ud: StickyUserData) -> None:
    assert encode_sticky_userdata(ud, version) == kafka_python(ud, version)


@given(ud=S.sticky_userdata)
def test_v1_roundtrip_and_kafka_python_reads_it(ud: StickyUserData) -> None:
    data = encode_sticky_userdata(ud)
    decoded = decode_sticky_userdata(data)
    assert decoded.partitions == ud.partitions
    assert decoded.generation == ud.effective_generation
    theirs = StickyAssignorUserData.decode(data, version=1, header=False)
    assert theirs.generation == ud.effective_generation


@given(ud=S.sticky_userdata)
def test_v1_reader_falls_back_to_v0_without_generation(ud: StickyUserData) -> None:
    decoded = decode_sticky_userdata(encode_sticky_userdata(ud, 0))
    assert decoded.partitions == ud.partitions
    assert decoded.generation is None
    assert decoded.effective_generation == DEFAULT_GENERATION


@given(ud=S.sticky_userdata)
def test_v0_reader_ignores_the_trailing_generation(ud: StickyUserData) -> None:
    decoded = decode_sticky_userdata(encode_sticky_userdata(ud, 1), max_version=0)
    assert decoded.partitions == ud.partitions
    assert decoded.generation is None


def test_layout_of_both_versions() -> None:
    ud = StickyUserData(partitions=(TP("b", 1), TP("a", 3), TP("a", 0)), generation=12)
    v0 = (
        b"\x00\x00\x00\x02"
        + b"\x00\x01a"
        + b"\x00\x00\x00\x02"
        + b"\x00\x00\x00\x00"
        + b"\x00\x00\x00\x03"
        + b"\x00\x01b"
        + b"\x00\x00\x00\x01"
        + b"\x00\x00\x00\x01"
    )
    assert encode_sticky_userdata(ud, 0) == v0
    assert encode_sticky_userdata(ud) == v0 + b"\x00\x00\x00\x0c"
    assert encode_sticky_userdata(StickyUserData(partitions=()), 1) == b"\x00\x00\x00\x00\xff\xff\xff\xff"


@pytest.mark.parametrize("data", [b"", b"\x00\x00", b"\x00\x00\x00\x01\x00\x05ab", b"\xff\xff\xff\xfe"])
def test_unreadable_in_both_versions_is_a_decode_error(data: bytes) -> None:
    with pytest.raises(DecodeError):
        decode_sticky_userdata(data)


def test_only_versions_0_and_1_exist() -> None:
    with pytest.raises(LocalProtocolError):
        encode_sticky_userdata(StickyUserData(partitions=()), 2)
    with pytest.raises(LocalProtocolError):
        decode_sticky_userdata(b"\x00\x00\x00\x00", max_version=2)


# -- kafka-python 3's variant: its schema version as an int16 before the KIP-341 layout ----------

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
    from kafka.structs import TopicPartition as KpTopicPartition


def kafka_python_join_metadata(ud: StickyUserData, topics: tuple[str, ...] = ("t",)) -> bytes:
    """What a kafka-python 3 ``sticky`` member puts in JoinGroup: its assignor's
    ``metadata()`` (a ``ConsumerProtocolSubscription`` holding a ``StickyAssignorUserData``),
    encoded as kafka-python's ``Bytes`` field encodes it, by calling ``.encode()``."""
    partitions = [KpTopicPartition(tp.topic, tp.partition) for tp in ud.partitions]
    subscription = StickyPartitionAssignor._metadata(list(topics), partitions, ud.effective_generation)
    encoded: bytes = subscription.encode()
    return encoded


def kafka_python_user_data(ud: StickyUserData) -> bytes:
    user_data = decode_subscription(kafka_python_join_metadata(ud)).user_data
    assert user_data is not None
    return user_data


def test_kafka_python_writes_an_int16_version_before_the_v1_layout() -> None:
    ud = StickyUserData(partitions=(TP("a", 0), TP("a", 3), TP("b", 1)), generation=12)  # its order
    assert kafka_python_user_data(ud) == b"\x00\x01" + encode_sticky_userdata(ud, 1)
    with pytest.raises(DecodeError):  # what a plain KIP-341 reader (Java's, ours before) makes of it
        sticky_module._read(kafka_python_user_data(ud), 1)


@given(ud=S.sticky_userdata)
def test_userdata_from_kafka_pythons_own_encoder_is_read(ud: StickyUserData) -> None:
    decoded = decode_sticky_userdata(kafka_python_user_data(ud))
    assert decoded.partitions == ud.partitions
    assert decoded.generation == ud.effective_generation  # kafka-python always writes v1


@given(ud=S.sticky_userdata)
def test_a_v0_reader_reads_kafka_pythons_partitions_without_the_generation(ud: StickyUserData) -> None:
    decoded = decode_sticky_userdata(kafka_python_user_data(ud), max_version=0)
    assert decoded == StickyUserData(partitions=ud.partitions)


@pytest.mark.parametrize("version", [0, 1])
@given(ud=S.sticky_userdata)
def test_both_versions_of_kafka_pythons_schema_encoder_are_read(version: int, ud: StickyUserData) -> None:
    groups: dict[str, list[int]] = {}
    for tp in ud.partitions:
        groups.setdefault(tp.topic, []).append(tp.partition)
    data = StickyAssignorUserData(
        previous_assignment=list(groups.items()), generation=ud.effective_generation, version=version
    ).encode()  # header=True: kafka-python's default, as in its JoinGroup metadata
    assert data[:2] == bytes([0, version])
    decoded = decode_sticky_userdata(data)
    assert decoded.partitions == ud.partitions
    assert decoded.generation == (ud.effective_generation if version == 1 else None)


@given(ud=S.sticky_userdata)
def test_the_plain_layouts_still_read_as_before(ud: StickyUserData) -> None:
    """Java's and our own bytes never take the kafka-python path, whatever they hold."""
    for version in (0, 1):
        plain = encode_sticky_userdata(ud, version)
        decoded = decode_sticky_userdata(plain)
        assert decoded.partitions == ud.partitions
        assert decoded.generation == (ud.effective_generation if version == 1 else None)
        assert decode_sticky_userdata(plain, max_version=0) == StickyUserData(partitions=ud.partitions)


def test_the_empty_assignment_in_every_layout() -> None:
    empty = StickyUserData(partitions=(), generation=5)
    cases = {
        b"\x00\x00\x00\x00": StickyUserData(partitions=()),  # plain v0
        b"\x00\x00\x00\x00\x00\x00\x00\x05": empty,  # plain v1
        b"\x00\x00\x00\x00\x00\x00": StickyUserData(partitions=()),  # kafka-python v0
        b"\x00\x01\x00\x00\x00\x00\x00\x00\x00\x05": empty,  # kafka-python v1
    }
    for data, expected in cases.items():
        assert decode_sticky_userdata(data) == expected, data.hex()
    assert kafka_python_user_data(empty) == b"\x00\x01\x00\x00\x00\x00\x00\x00\x00\x05"


@pytest.mark.parametrize(
    "data",
    [
        b"\x00\x02\x00\x00\x00\x00\x00\x00\x00\x05",  # kafka-python knows versions 0 and 1 only
        b"\x00\x01\x00\x00\x00\x01\x00\x01",  # the header, then a truncated topic
        b"\x00\x01\x00\x00\x00\x01\x00\x01a\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00",  # cut generation
    ],
)
def test_a_broken_kafka_python_variant_is_a_decode_error(data: bytes) -> None:
    with pytest.raises(DecodeError):
        decode_sticky_userdata(data)


def test_trailing_bytes_after_a_plain_v1_layout_are_ignored_as_java_does() -> None:
    ud = StickyUserData(partitions=(TP("a", 0),), generation=3)
    assert decode_sticky_userdata(encode_sticky_userdata(ud) + b"\x00\x00") == ud
