"""Consumer protocol v0-v3: byte equality with two independent implementations (kafka-python 3
and kio's generated types), Java's ordering rules, and the compatibility rules."""

from __future__ import annotations

import io
import struct
import warnings
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from assignors.partition.types import Subscription
from streamtasks.errors import DecodeError, LocalProtocolError
from streamtasks.protocol import (
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
    subscription_from,
)
from tests.protocol import strategies as S
from topology.ids import TopicPartition

with warnings.catch_warnings():
    # kafka-python 3 reads its schemas with a deprecated importlib API at import time.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment as KpAssignment
    from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription as KpSubscription

from kio.schema.consumer_protocol_assignment import v0 as kio_a0
from kio.schema.consumer_protocol_assignment import v1 as kio_a1
from kio.schema.consumer_protocol_assignment import v2 as kio_a2
from kio.schema.consumer_protocol_assignment import v3 as kio_a3
from kio.schema.consumer_protocol_subscription import v0 as kio_s0
from kio.schema.consumer_protocol_subscription import v1 as kio_s1
from kio.schema.consumer_protocol_subscription import v2 as kio_s2
from kio.schema.consumer_protocol_subscription import v3 as kio_s3
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i32

KIO_SUBSCRIPTION = {0: kio_s0, 1: kio_s1, 2: kio_s2, 3: kio_s3}
KIO_ASSIGNMENT = {0: kio_a0, 1: kio_a1, 2: kio_a2, 3: kio_a3}
TP = TopicPartition


# -- Java's ordering rules, written out independently of the codec ----------------------------


def java_subscription_groups(sub: ConsumerProtocolSubscription) -> list[tuple[str, list[int]]]:
    """``ownedPartitions.sort(topic, partition)`` then a new group whenever the topic changes."""
    groups: dict[str, list[int]] = {}
    for tp in sorted(sub.owned_partitions, key=lambda tp: (tp.topic, tp.partition)):
        groups.setdefault(tp.topic, []).append(tp.partition)
    return list(groups.items())


def java_assignment_groups(a: ConsumerProtocolAssignment) -> list[tuple[str, list[int]]]:
    """``assignedPartitions().find(topic)``: one group per topic, in first-appearance order."""
    groups: dict[str, list[int]] = {}
    for tp in a.assigned_partitions:
        groups.setdefault(tp.topic, []).append(tp.partition)
    return list(groups.items())


def kafka_python_subscription(sub: ConsumerProtocolSubscription, version: int) -> bytes:
    owned = [KpSubscription.TopicPartition(topic=t, partitions=ps) for t, ps in java_subscription_groups(sub)]
    data = KpSubscription(
        topics=sorted(sub.topics),
        user_data=sub.user_data,
        owned_partitions=owned,
        generation_id=sub.generation_id,
        rack_id=sub.rack_id,
    )
    encoded: bytes = data.encode(version=version)
    return encoded


def kafka_python_assignment(a: ConsumerProtocolAssignment, version: int) -> bytes:
    groups = [KpAssignment.TopicPartition(topic=t, partitions=ps) for t, ps in java_assignment_groups(a)]
    encoded: bytes = KpAssignment(assigned_partitions=groups, user_data=a.user_data).encode(version=version)
    return encoded


def kio_bytes(module: Any, entity: Any, version: int) -> bytes:
    buf = io.BytesIO()
    buf.write(struct.pack(">h", version))
    entity_writer(type(entity))(buf, entity)
    return buf.getvalue()


def kio_subscription(sub: ConsumerProtocolSubscription, version: int) -> bytes:
    module = KIO_SUBSCRIPTION[version]
    fields: dict[str, Any] = {"topics": tuple(sorted(sub.topics)), "user_data": sub.user_data}
    if version >= 1:
        fields["owned_partitions"] = tuple(
            module.data.TopicPartition(topic=t, partitions=tuple(i32(p) for p in ps))
            for t, ps in java_subscription_groups(sub)
        )
    if version >= 2:
        fields["generation_id"] = i32(sub.generation_id)
    if version >= 3:
        fields["rack_id"] = sub.rack_id
    return kio_bytes(module, module.ConsumerProtocolSubscription(**fields), version)


def kio_assignment(a: ConsumerProtocolAssignment, version: int) -> bytes:
    module = KIO_ASSIGNMENT[version]
    groups = tuple(
        module.data.TopicPartition(topic=t, partitions=tuple(i32(p) for p in ps))
        for t, ps in java_assignment_groups(a)
    )
    entity = module.ConsumerProtocolAssignment(assigned_partitions=groups, user_data=a.user_data)
    return kio_bytes(module, entity, version)


def expected_after_roundtrip(sub: ConsumerProtocolSubscription, version: int) -> ConsumerProtocolSubscription:
    return ConsumerProtocolSubscription(
        topics=tuple(sorted(sub.topics)),
        user_data=sub.user_data,
        owned_partitions=tuple(sorted(sub.owned_partitions)) if version >= 1 else (),
        generation_id=sub.generation_id if version >= 2 else -1,
        rack_id=sub.rack_id if version >= 3 else None,
        version=min(version, 3),
    )


# -- byte equality ---------------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1, 2, 3])
@given(sub=S.subscriptions)
def test_subscription_bytes_equal_kafka_python_and_kio(
    version: int, sub: ConsumerProtocolSubscription
) -> None:
    ours = encode_subscription(sub, version)
    assert ours == kafka_python_subscription(sub, version)
    assert ours == kio_subscription(sub, version)


@pytest.mark.parametrize("version", [0, 1, 2, 3])
@given(a=S.assignments)
def test_assignment_bytes_equal_kafka_python_and_kio(version: int, a: ConsumerProtocolAssignment) -> None:
    ours = encode_assignment(a, version)
    assert ours == kafka_python_assignment(a, version)
    assert ours == kio_assignment(a, version)


@given(sub=S.subscriptions, topic_order=st.randoms(use_true_random=False))
def test_decodes_what_kafka_python_and_kio_write(sub: ConsumerProtocolSubscription, topic_order: Any) -> None:
    version = sub.version
    topics = list(sub.topics)
    topic_order.shuffle(topics)  # other writers need not sort; the reader keeps wire order
    kp = KpSubscription(
        topics=topics,
        user_data=sub.user_data,
        owned_partitions=[
            KpSubscription.TopicPartition(topic=t, partitions=ps) for t, ps in java_subscription_groups(sub)
        ],
        generation_id=sub.generation_id,
        rack_id=sub.rack_id,
    ).encode(version=version)
    expected = expected_after_roundtrip(sub, version)
    assert decode_subscription(kp) == replace(expected, topics=tuple(topics))
    assert decode_subscription(kio_subscription(sub, version)) == expected


@given(sub=S.subscriptions, a=S.assignments, version=st.integers(0, 3))
def test_kafka_python_and_kio_read_what_we_write(
    sub: ConsumerProtocolSubscription, a: ConsumerProtocolAssignment, version: int
) -> None:
    theirs = KpSubscription.decode(encode_subscription(sub, version))
    assert list(theirs.topics) == sorted(sub.topics)
    if sub.user_data is not None:
        assert theirs.user_data == sub.user_data
    if version >= 1:
        flat_owned = [TP(g.topic, p) for g in theirs.owned_partitions for p in g.partitions]
        assert flat_owned == sorted(sub.owned_partitions)
    data = encode_assignment(a, version)
    kio_decoded, size = entity_reader(KIO_ASSIGNMENT[version].ConsumerProtocolAssignment)(data, 2)
    assert size == len(data) - 2
    flat = [TP(g.topic, p) for g in kio_decoded.assigned_partitions for p in g.partitions]
    assert sorted(flat) == sorted(a.assigned_partitions)
    assert kio_decoded.user_data == a.user_data
    kio_sub, _ = entity_reader(KIO_SUBSCRIPTION[version].ConsumerProtocolSubscription)(
        encode_subscription(sub, version), 2
    )
    assert kio_sub.topics == tuple(sorted(sub.topics))
    if version >= 2:
        assert kio_sub.generation_id == sub.generation_id


# -- Java's ordering, spelled out ------------------------------------------------------------


def test_subscription_sorts_topics_and_owned_partitions_like_java() -> None:
    sub = ConsumerProtocolSubscription(
        topics=("zeta", "alpha"),
        user_data=None,
        owned_partitions=(TP("zeta", 1), TP("alpha", 5), TP("zeta", 0), TP("alpha", 2)),
        generation_id=7,
        rack_id="rack-1",
    )
    expected = (
        b"\x00\x03"  # version 3
        + b"\x00\x00\x00\x02"
        + b"\x00\x05alpha"
        + b"\x00\x04zeta"  # topics, sorted
        + b"\xff\xff\xff\xff"  # null user data
        + b"\x00\x00\x00\x02"  # two owned groups
        + b"\x00\x05alpha"
        + b"\x00\x00\x00\x02"
        + b"\x00\x00\x00\x02"
        + b"\x00\x00\x00\x05"
        + b"\x00\x04zeta"
        + b"\x00\x00\x00\x02"
        + b"\x00\x00\x00\x00"
        + b"\x00\x00\x00\x01"
        + b"\x00\x00\x00\x07"  # generation
        + b"\x00\x06rack-1"
    )
    assert encode_subscription(sub) == expected


def test_assignment_groups_by_first_appearance_like_java() -> None:
    a = ConsumerProtocolAssignment(
        assigned_partitions=(TP("b", 2), TP("a", 1), TP("b", 0)), user_data=b"u", version=1
    )
    expected = (
        b"\x00\x01"
        + b"\x00\x00\x00\x02"
        + b"\x00\x01b"
        + b"\x00\x00\x00\x02"
        + b"\x00\x00\x00\x02"
        + b"\x00\x00\x00\x00"
        + b"\x00\x01a"
        + b"\x00\x00\x00\x01"
        + b"\x00\x00\x00\x01"
        + b"\x00\x00\x00\x01u"
    )
    assert encode_assignment(a) == expected
    assert decode_assignment(expected).assigned_partitions == (TP("b", 2), TP("b", 0), TP("a", 1))


# -- round trips and compatibility -----------------------------------------------------------


@given(sub=S.subscriptions, version=st.integers(0, 5))
def test_subscription_roundtrip(sub: ConsumerProtocolSubscription, version: int) -> None:
    assert decode_subscription(encode_subscription(sub, version)) == expected_after_roundtrip(sub, version)


@given(a=S.assignments, version=st.integers(0, 5))
def test_assignment_roundtrip(a: ConsumerProtocolAssignment, version: int) -> None:
    decoded = decode_assignment(encode_assignment(a, version))
    assert decoded.version == min(version, 3)
    assert decoded.user_data == a.user_data
    assert decoded.assigned_partitions == tuple(TP(t, p) for t, ps in java_assignment_groups(a) for p in ps)


def test_newer_reader_fills_defaults_for_older_versions() -> None:
    sub = ConsumerProtocolSubscription(
        topics=("t",), user_data=b"x", owned_partitions=(TP("t", 0),), generation_id=4, rack_id="r"
    )
    v0 = decode_subscription(encode_subscription(sub, 0))
    assert (v0.owned_partitions, v0.generation_id, v0.rack_id, v0.version) == ((), -1, None, 0)
    v1 = decode_subscription(encode_subscription(sub, 1))
    assert (v1.owned_partitions, v1.generation_id, v1.rack_id) == ((TP("t", 0),), -1, None)
    v2 = decode_subscription(encode_subscription(sub, 2))
    assert (v2.generation_id, v2.rack_id) == (4, None)


def test_older_reader_ignores_trailing_fields() -> None:
    sub = ConsumerProtocolSubscription(
        topics=("t",), user_data=b"x", owned_partitions=(TP("t", 0),), generation_id=4, rack_id="r"
    )
    v3 = encode_subscription(sub, 3)
    # A v1 reader: same bytes, header says 1 - generation and rack are trailing and ignored.
    as_v1 = decode_subscription(b"\x00\x01" + v3[2:])
    assert (as_v1.owned_partitions, as_v1.generation_id, as_v1.rack_id) == ((TP("t", 0),), -1, None)
    as_v0 = decode_subscription(b"\x00\x00" + v3[2:])
    assert (as_v0.topics, as_v0.owned_partitions, as_v0.generation_id) == (("t",), (), -1)


def test_future_versions_read_as_v3_and_ignore_what_follows() -> None:
    sub = ConsumerProtocolSubscription(topics=("t",), user_data=None, generation_id=9, rack_id="r")
    future = b"\x00\x07" + encode_subscription(sub, 3)[2:] + b"\x00\x00\x00\x2a new field"
    decoded = decode_subscription(future)
    assert decoded.version == 7
    assert (decoded.generation_id, decoded.rack_id) == (9, "r")
    # Encoding above the highest known version writes v3, as Java does.
    assert encode_subscription(sub, 9) == encode_subscription(sub, 3)
    a = ConsumerProtocolAssignment(assigned_partitions=(TP("t", 1),), user_data=b"")
    future_assignment = b"\x00\x05" + encode_assignment(a)[2:] + b"xyz"
    assert decode_assignment(future_assignment).assigned_partitions == (TP("t", 1),)


def test_empty_rack_reads_as_none_and_null_user_data_survives() -> None:
    data = encode_subscription(ConsumerProtocolSubscription(topics=(), user_data=None), 3)
    assert data.endswith(b"\xff\xff")
    with_empty_rack = data[:-2] + b"\x00\x00"
    decoded = decode_subscription(with_empty_rack)
    assert decoded.rack_id is None
    assert decoded.user_data is None
    assert ConsumerProtocolSubscription(topics=(), user_data=b"", rack_id="").rack_id is None


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "truncated"),
        (b"\x00", "truncated"),
        (b"\xff\xfe", "unsupported version -2"),
        (b"\x00\x00\xff\xff\xff\xff", "must not be null"),
        (b"\x00\x00\xff\xff\xff\xfe", "negative length"),
        (b"\x00\x00\x7f\xff\xff\xff", "claims 2147483647 element"),
        (b"\x00\x00\x00\x00\x00\x01\x00\x05ab", "truncated"),
        (b"\x00\x00\x00\x00\x00\x01\x00\x01\xff\xff\xff\xff\xff", "not valid UTF-8"),
        (b"\x00\x00\x00\x00\x00\x00\x80\x00\x00\x00", "negative length"),
    ],
)
def test_malformed_subscriptions_raise_decode_error(data: bytes, message: str) -> None:
    with pytest.raises(DecodeError, match=message):
        decode_subscription(data)


def test_encoding_rejects_what_the_wire_cannot_carry() -> None:
    with pytest.raises(LocalProtocolError):
        ConsumerProtocolSubscription(topics=(), user_data=None, version=-1)
    with pytest.raises(LocalProtocolError):
        ConsumerProtocolSubscription(topics=(), user_data=None, generation_id=1 << 31)
    with pytest.raises(LocalProtocolError):
        ConsumerProtocolAssignment(assigned_partitions=(TP("t", 1 << 31),), user_data=None)
    with pytest.raises(LocalProtocolError, match="length of topic"):
        encode_subscription(ConsumerProtocolSubscription(topics=("x" * 40_000,), user_data=None))
    sub = ConsumerProtocolSubscription(topics=(), user_data=None)
    with pytest.raises(LocalProtocolError):
        encode_subscription(sub, -1)


def test_subscription_from_maps_to_partition_assignor_input() -> None:
    sub = ConsumerProtocolSubscription(
        topics=("a",), user_data=None, owned_partitions=(TP("a", 0),), generation_id=3, rack_id="r"
    )
    assert subscription_from(sub, "instance-1") == Subscription(
        topics=("a",),
        owned_partitions=(TP("a", 0),),
        generation=3,
        rack="r",
        group_instance_id="instance-1",
        user_data=b"",
    )
