"""Each partition assignor owns its user data (``assignors.partition.hooks``): the eager sticky
assignor writes KIP-341 userdata for its members and reads their claims from it as leader
(kafka-python 3's variant included); assignors without hooks offer and read nothing."""

from __future__ import annotations

import pytest

from assignors.partition.hooks import (
    MemberAssignment,
    claims_in_user_data,
    on_assignment,
    read_subscription,
    subscription_user_data,
)
from assignors.partition.range import RangeAssignor
from assignors.partition.sticky import CooperativeStickyAssignor, StickyAssignor
from assignors.partition.sticky_user_data import (
    StickyUserData,
    decode_sticky_userdata,
    encode_sticky_userdata,
)
from assignors.partition.types import PartitionAssignor, Subscription
from streamtasks.errors import DecodeError
from topology.ids import TopicPartition

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


def test_sticky_writes_its_previous_assignment_with_the_generation() -> None:
    data = subscription_user_data(StickyAssignor(), topics=("t",), previous=(T1, T0), generation=4)
    assert decode_sticky_userdata(data) == StickyUserData(partitions=(T0, T1), generation=4)


def test_sticky_without_the_generation_marker_writes_v0() -> None:
    data = subscription_user_data(StickyAssignor(), topics=("t",), previous=(T0,), generation=None)
    assert data == encode_sticky_userdata(StickyUserData(partitions=(T0,)), version=0)


def test_sticky_reads_claims_from_its_user_data_as_leader() -> None:
    sticky = StickyAssignor()
    assert claims_in_user_data(sticky)
    written = subscription_user_data(sticky, topics=("t",), previous=(T0,), generation=7)
    read = read_subscription(sticky, Subscription(topics=("t",), user_data=written))
    assert (read.owned_partitions, read.generation) == ((T0,), 7)
    kafka_python = b"\x00\x01" + encode_sticky_userdata(StickyUserData(partitions=(T1,), generation=2))
    read = read_subscription(sticky, Subscription(topics=("t",), user_data=kafka_python))
    assert (read.owned_partitions, read.generation) == ((T1,), 2)
    empty = read_subscription(sticky, Subscription(topics=("t",), owned_partitions=(T0,), generation=3))
    assert (empty.owned_partitions, empty.generation) == ((), -1)
    with pytest.raises(DecodeError):
        read_subscription(sticky, Subscription(topics=("t",), user_data=b"\xff\xff"))


@pytest.mark.parametrize("assignor", [RangeAssignor(), CooperativeStickyAssignor()])
def test_assignors_without_hooks_offer_and_read_nothing(assignor: PartitionAssignor) -> None:
    sub = Subscription(topics=("t",), owned_partitions=(T0,), generation=3, user_data=b"x")
    assert subscription_user_data(assignor, topics=("t",), previous=(T0,), generation=3) == b""
    assert not claims_in_user_data(assignor)
    assert read_subscription(assignor, sub) is sub
    assert on_assignment(assignor, MemberAssignment(partitions=(T0,), user_data=b"x")) is None
