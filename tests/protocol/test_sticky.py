"""KIP-341 sticky userdata: bytes equal kafka-python 3's, v0/v1 cross-reading."""

from __future__ import annotations

import warnings

import pytest
from hypothesis import given

from streamtasks.errors import DecodeError, LocalProtocolError
from streamtasks.protocol import (
    DEFAULT_GENERATION,
    StickyUserData,
    decode_sticky_userdata,
    encode_sticky_userdata,
)
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
        + b"\x00\x01a" + b"\x00\x00\x00\x02" + b"\x00\x00\x00\x00" + b"\x00\x00\x00\x03"
        + b"\x00\x01b" + b"\x00\x00\x00\x01" + b"\x00\x00\x00\x01"
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
