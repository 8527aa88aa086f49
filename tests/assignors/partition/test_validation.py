"""Bad input raises AssignorInputError with a clear message; the metadata helpers."""

from __future__ import annotations

import pytest

from assignors.partition._layout import make_partitions
from assignors.partition.metadata import prune_unknown_topics, unknown_topics
from assignors.partition.range import RangeAssignor
from assignors.partition.round_robin import RoundRobinAssignor
from assignors.partition.sticky import CooperativeStickyAssignor, StickyAssignor
from assignors.partition.types import GroupAssignment, GroupSubscription, PartitionAssignor, Subscription
from assignors.partition.uniform import UniformAssignor
from assignors.registry import get_partition_assignor
from streamtasks.errors import AssignorInputError
from tests.assignors.partition.groups import check_complete, group
from topology.ids import TopicPartition

ALL: list[PartitionAssignor] = [
    RangeAssignor(),
    RoundRobinAssignor(),
    StickyAssignor(),
    CooperativeStickyAssignor(),
    UniformAssignor(),
]
ids = [a.name for a in ALL]


@pytest.mark.parametrize("assignor", ALL, ids=ids)
def test_a_subscribed_topic_without_a_partition_count_is_named(assignor: PartitionAssignor) -> None:
    g = group({"m1": ["known", "missing"], "m2": ["missing"]}, {"known": 2})
    with pytest.raises(AssignorInputError, match=r"'missing' \(subscribed by 'm1', 'm2'\)"):
        assignor.assign(g)


@pytest.mark.parametrize("assignor", ALL, ids=ids)
@pytest.mark.parametrize("count", [-1, "3", 2.0, True])
def test_partition_counts_must_be_non_negative_ints(assignor: PartitionAssignor, count: object) -> None:
    g = group({"m": ["t"]}, {"t": count})  # type: ignore[dict-item]
    with pytest.raises(AssignorInputError, match="partition count of topic 't'"):
        assignor.assign(g)


@pytest.mark.parametrize("assignor", ALL, ids=ids)
def test_topics_must_be_a_collection_of_names(assignor: PartitionAssignor) -> None:
    g = GroupSubscription(members={"m": Subscription(topics="t")}, partitions_per_topic={"t": 1})  # type: ignore[arg-type]
    with pytest.raises(AssignorInputError, match=r"member 'm': Subscription\.topics"):
        assignor.assign(g)


@pytest.mark.parametrize(
    "assignor", [StickyAssignor(), CooperativeStickyAssignor(), UniformAssignor()], ids=str
)
def test_owned_partitions_must_be_topic_partitions(assignor: PartitionAssignor) -> None:
    g = GroupSubscription(
        members={"m": Subscription(topics=("t",), owned_partitions=(("t", 0),))},  # type: ignore[arg-type]
        partitions_per_topic={"t": 1},
    )
    with pytest.raises(AssignorInputError, match="member 'm': owned_partitions must hold TopicPartition"):
        assignor.assign(g)


@pytest.mark.parametrize("assignor", [StickyAssignor(), UniformAssignor()], ids=str)
def test_generations_below_minus_one_are_rejected(assignor: PartitionAssignor) -> None:
    g = group({"m": ["t"]}, {"t": 1}, {"m": [TopicPartition("t", 0)]}, {"m": -5})
    with pytest.raises(AssignorInputError, match="generation must be an int >= -1"):
        assignor.assign(g)


def test_topics_nobody_subscribes_to_need_no_count_and_are_ignored() -> None:
    g = group({"m": ["t"]}, {"t": 2, "other": 5})
    result = UniformAssignor().assign(g)
    assert result.members == {"m": (TopicPartition("t", 0), TopicPartition("t", 1))}


def test_unknown_topics_lists_subscribers() -> None:
    g = group({"b": ["x", "gone"], "a": ["gone", "also-gone"]}, {"x": 1})
    assert unknown_topics(g) == {"also-gone": ("a",), "gone": ("a", "b")}


def test_prune_unknown_topics_keeps_kafkas_skip_behaviour_explicit() -> None:
    g = group({"b": ["x", "gone"], "a": ["gone"]}, {"x": 2})
    pruned, dropped = prune_unknown_topics(g)
    assert dropped == ("gone",)
    assert pruned.members["b"].topics == ("x",)
    assert pruned.members["a"].topics == ()
    result = RangeAssignor().assign(pruned)
    check_complete(pruned, result)


def test_prune_without_unknown_topics_returns_the_same_group() -> None:
    g = group({"a": ["x"]}, {"x": 2})
    assert prune_unknown_topics(g) == (g, ())


def test_fast_partition_objects_equal_constructed_ones() -> None:
    made = make_partitions("orders", 5)
    assert made == [TopicPartition("orders", p) for p in range(5)]
    assert [hash(tp) for tp in made] == [hash(TopicPartition("orders", p)) for p in range(5)]
    assert all(type(tp) is TopicPartition for tp in made)


@pytest.mark.parametrize(
    ("name", "cls", "wire_name"),
    [
        ("range", RangeAssignor, "range"),
        ("round_robin", RoundRobinAssignor, "roundrobin"),
        ("sticky", StickyAssignor, "sticky"),
        ("cooperative_sticky", CooperativeStickyAssignor, "cooperative-sticky"),
        ("uniform", UniformAssignor, "uniform"),
    ],
)
def test_the_registry_finds_every_builtin_under_kafkas_protocol_name(
    name: str, cls: type[PartitionAssignor], wire_name: str
) -> None:
    assignor = get_partition_assignor(name)
    assert isinstance(assignor, PartitionAssignor)
    assert type(assignor) is cls
    assert assignor.name == wire_name


def test_assignments_built_from_sorted_numbers_equal_normal_ones() -> None:
    g = group({"b": ["t", "u"], "a": ["t", "u"], "c": ["u"]}, {"t": 5, "u": 4})
    for assignor in ALL:
        result = assignor.assign(g)
        assert result == GroupAssignment(members=dict(result.members))
        assert list(result.members) == sorted(result.members)
