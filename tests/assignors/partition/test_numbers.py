"""The partition numbers the built-in assignors hand over with their result
(GroupAssignment.numbers), which cooperative.assign works on instead of the partitions."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from assignors.partition.sticky import CooperativeStickyAssignor, StickyAssignor
from assignors.partition.types import GroupAssignment, GroupSubscription, PartitionAssignor
from assignors.partition.uniform import UniformAssignor
from tests.assignors.partition.groups import check_complete, group, groups
from tests.assignors.partition.test_validation import ALL
from topology.ids import TopicPartition


def partitions_of(result: GroupAssignment) -> list[tuple[TopicPartition, ...]]:
    """Each member's partitions as its numbers say."""
    numbers = result.numbers
    assert numbers is not None
    topic_of = {
        numbers.starts[t] + p: TopicPartition(t, p) for t in numbers.starts for p in range(numbers.counts[t])
    }
    return [tuple(map(topic_of.__getitem__, mine)) for mine in numbers.members]


@given(groups(), st.sampled_from(ALL))
def test_the_numbers_are_the_assignment(g: GroupSubscription, assignor: PartitionAssignor) -> None:
    result = assignor.assign(g)
    assert partitions_of(result) == list(result.members.values())
    assert result.numbers is not None
    flat = [n for mine in result.numbers.members for n in mine]
    assert len(flat) == len(set(flat))
    assert all(list(mine) == sorted(mine) for mine in result.numbers.members)


@pytest.mark.parametrize("assignor", [StickyAssignor(), CooperativeStickyAssignor(), UniformAssignor()])
def test_a_claim_kept_whole_but_sent_out_of_order_comes_back_sorted(assignor: PartitionAssignor) -> None:
    claim = [TopicPartition("t", 1), TopicPartition("t", 0)]
    g = group({"a": ["t"], "b": ["t"]}, {"t": 4}, {"a": claim, "b": [TopicPartition("t", 2)]})
    result = assignor.assign(g)
    check_complete(g, result)
    assert result.members["a"] == (TopicPartition("t", 0), TopicPartition("t", 1))


@pytest.mark.parametrize("assignor", [StickyAssignor(), CooperativeStickyAssignor(), UniformAssignor()])
def test_a_claim_kept_whole_and_in_order_comes_back_as_the_tuple_that_was_sent(
    assignor: PartitionAssignor,
) -> None:
    claim = (TopicPartition("t", 0), TopicPartition("t", 1))
    g = group({"a": ["t"], "b": ["t"]}, {"t": 4}, {"a": claim, "b": [TopicPartition("t", 2)]})
    result = assignor.assign(g)
    assert result.members["a"] == claim
    assert result.members["a"] is g.members["a"].owned_partitions


def test_a_result_built_without_numbers_has_none() -> None:
    assert GroupAssignment(members={"a": (TopicPartition("t", 0),)}).numbers is None
    assert GroupAssignment.from_sorted({"a": ()}).numbers is None
