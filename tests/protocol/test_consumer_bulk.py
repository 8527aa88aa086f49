"""The consumer protocol a group at a time (streamtasks.protocol.consumer_bulk): SubscriptionDecoder
(a fast reader that remembers the last topic array and topic name, and hands anything unusual to
the checked reader) and AssignmentEncoder give exactly what decode_subscription and
encode_assignment give one message at a time."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamtasks.errors import DecodeError, LocalProtocolError
from streamtasks.protocol.consumer_bulk import AssignmentEncoder, SubscriptionDecoder
from streamtasks.protocol.consumer_protocol import (
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


def outcome(read: Callable[[], Any]) -> tuple[str, Any]:
    try:
        return "ok", read()
    except DecodeError as exc:
        return "error", str(exc)


#: Subscriptions of one group: the same few topic lists and owned topics over and over.
group_subscriptions = st.builds(
    ConsumerProtocolSubscription,
    topics=st.sampled_from([("a", "b"), ("a", "b"), ("b",), ()]),
    user_data=S.user_data,
    owned_partitions=st.lists(
        st.builds(TopicPartition, st.sampled_from(["a", "b", "topic-ü"]), S.small_partitions), max_size=6
    ).map(tuple),
    generation_id=st.integers(-1, 3),
    rack_id=st.none() | st.sampled_from(["", "r1"]),
    version=st.integers(0, 4),
)


@st.composite
def buffers(draw: st.DrawFn) -> bytes:
    """A subscription as a member writes it, or mutated, or cut short, or random bytes."""
    valid = encode_subscription(draw(group_subscriptions | S.subscriptions))
    return draw(st.sampled_from([valid, valid]) | S.mutated(valid) | st.binary(max_size=30))


@given(buffers())
def test_the_fast_reader_agrees_with_the_checked_reader(data: bytes) -> None:
    assert outcome(lambda: SubscriptionDecoder().decode(data)) == outcome(lambda: decode_subscription(data))


@given(st.lists(buffers(), max_size=12))
def test_one_decoder_for_a_group_reads_each_subscription_as_a_fresh_one_would(group: list[bytes]) -> None:
    decoder = SubscriptionDecoder()
    for data in group:
        assert outcome(lambda d=data: decoder.decode(d)) == outcome(lambda d=data: decode_subscription(d))


@given(st.lists(st.tuples(buffers(), st.none() | st.sampled_from(["i1", "i2"])), max_size=12))
def test_decode_all_for_assignor_is_subscription_from_each(group: list[tuple[bytes, str | None]]) -> None:
    read = SubscriptionDecoder().decode_all_for_assignor(group)
    assert len(read) == len(group)
    for (data, instance), got in zip(group, read, strict=True):
        expected = outcome(
            lambda d=data, i=instance: (
                decode_subscription(d).version,
                subscription_from(decode_subscription(d), i),
            )
        )
        assert (("error", str(got)) if isinstance(got, DecodeError) else ("ok", got)) == expected


def test_topics_read_once_are_shared() -> None:
    decoder = SubscriptionDecoder()
    first, second = (
        decoder.decode(encode_subscription(ConsumerProtocolSubscription(topics=("a", "b"), user_data=None)))
        for _ in range(2)
    )
    assert first.topics == ("a", "b")
    assert second.topics is first.topics


def test_decode_for_assignor_raises_what_decode_subscription_raises() -> None:
    with pytest.raises(DecodeError, match="unsupported version -2"):
        SubscriptionDecoder().decode_for_assignor(b"\xff\xfe")


# -- AssignmentEncoder -----------------------------------------------------------------------------


@given(st.lists(S.assignments, max_size=8), st.integers(0, 5))
def test_one_encoder_for_a_group_writes_what_encode_assignment_writes(
    assignments: list[ConsumerProtocolAssignment], version: int
) -> None:
    encoder = AssignmentEncoder()
    for a in assignments:
        assert encoder.encode(a) == encode_assignment(a)
        assert encoder.encode(a, version) == encode_assignment(a, version)
        assert encoder.encode_partitions(a.assigned_partitions, a.user_data, version) == encode_assignment(
            a, version
        )


@pytest.mark.parametrize("partition", [1 << 31, -(1 << 31) - 1])
def test_encode_partitions_rejects_what_the_assignment_rejects(partition: int) -> None:
    parts = (TopicPartition("t", 0), TopicPartition("t", partition))
    with pytest.raises(LocalProtocolError) as expected:
        ConsumerProtocolAssignment(assigned_partitions=parts, user_data=None)
    with pytest.raises(LocalProtocolError) as got:
        AssignmentEncoder().encode_partitions(parts, None, 3)
    assert str(got.value) == str(expected.value)
    with pytest.raises(LocalProtocolError, match="version -1"):
        AssignmentEncoder().encode_partitions((), None, -1)


@given(st.lists(group_subscriptions | S.subscriptions, max_size=6))
def test_the_fast_reader_reads_every_well_formed_subscription_itself(
    group: list[ConsumerProtocolSubscription],
) -> None:
    decoder = SubscriptionDecoder()
    for sub in group:
        assert decoder._fast(encode_subscription(sub)) is not None  # no detour to the checked reader


def test_an_assignment_is_grouped_by_topic_in_order_of_first_appearance() -> None:
    a0, b0, a1 = TopicPartition("a", 0), TopicPartition("b", 0), TopicPartition("a", 1)
    data = AssignmentEncoder().encode_partitions((a0, b0, a1), None, 3)
    assert decode_assignment(data).assigned_partitions == (a0, a1, b0)


@given(st.lists(st.tuples(S.assignments, st.integers(0, 5)), max_size=8))
def test_encode_all_is_encode_assignment_of_each(group: list[tuple[ConsumerProtocolAssignment, int]]) -> None:
    data = AssignmentEncoder().encode_all(
        [a.assigned_partitions for a, _ in group], [a.user_data for a, _ in group], [v for _, v in group]
    )
    assert data == [encode_assignment(a, v) for a, v in group]


def test_encode_all_stops_at_the_first_assignment_that_cannot_be_written() -> None:
    fine, bad = (TopicPartition("t", 0),), (TopicPartition("t", 1 << 31),)
    with pytest.raises(LocalProtocolError, match=r"assigned_partitions: partition t-2147483648 does not fit"):
        AssignmentEncoder().encode_all([fine, bad, fine], [None, None, None], [3, -1, 3])
    with pytest.raises(LocalProtocolError, match="version -1"):
        AssignmentEncoder().encode_all([fine, fine], [None, None], [3, -1])
