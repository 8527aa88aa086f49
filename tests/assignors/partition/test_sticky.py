from __future__ import annotations

import pytest

from assignors.partition.sticky import CooperativeStickyAssignor, StickyAssignor
from assignors.partition.types import GroupAssignment, RebalanceProtocol
from tests.assignors.partition.groups import check_complete, group, moved, next_round, spread
from tests.ids import tp

STICKY = (StickyAssignor(), CooperativeStickyAssignor())


def test_sticky_is_eager_only_like_kafkas() -> None:
    assert StickyAssignor().supported_protocols() == (RebalanceProtocol.EAGER,)
    assert (StickyAssignor.name, StickyAssignor.version) == ("sticky", 0)


def test_cooperative_sticky_supports_both_protocols() -> None:
    assert set(CooperativeStickyAssignor().supported_protocols()) == {
        RebalanceProtocol.EAGER,
        RebalanceProtocol.COOPERATIVE,
    }
    # The JoinGroup protocol name must be Kafka's for mixed groups with Java/librdkafka/kafka-python.
    assert (CooperativeStickyAssignor.name, CooperativeStickyAssignor.version) == ("cooperative-sticky", 0)


@pytest.mark.parametrize("assignor", STICKY, ids=lambda a: a.name)
def test_fresh_group_is_balanced(assignor: StickyAssignor) -> None:
    subs = {f"m{i}": ["a", "b", "c"] for i in range(4)}
    g = group(subs, {"a": 5, "b": 4, "c": 9})
    result = assignor.assign(g)
    check_complete(g, result)
    assert spread(result) == 1  # 18 partitions over 4 members: 5, 5, 4, 4
    assert sorted(len(v) for v in result.members.values()) == [4, 4, 5, 5]


@pytest.mark.parametrize("assignor", STICKY, ids=lambda a: a.name)
def test_a_balanced_previous_assignment_is_kept(assignor: StickyAssignor) -> None:
    subs = {f"m{i}": ["a", "b"] for i in range(3)}
    partitions = {"a": 4, "b": 3}
    first = assignor.assign(group(subs, partitions))
    again = assignor.assign(next_round(first, subs, partitions))
    assert again == first


@pytest.mark.parametrize("assignor", STICKY, ids=lambda a: a.name)
def test_a_joining_member_takes_only_what_balance_requires(assignor: StickyAssignor) -> None:
    subs = {f"m{i}": ["t"] for i in range(3)}
    first = assignor.assign(group(subs, {"t": 9}))  # 3 each
    subs["m3"] = ["t"]
    second = assignor.assign(next_round(first, subs, {"t": 9}))
    check_complete(next_round(first, subs, {"t": 9}), second)
    # 9 over 4 members: 3, 2, 2, 2; the newcomer gets 2, taken from two of the old members
    assert len(second.members["m3"]) == 2
    assert moved(first.members, second) == 2


@pytest.mark.parametrize("assignor", STICKY, ids=lambda a: a.name)
def test_a_leaving_members_partitions_are_spread_and_nothing_else_moves(assignor: StickyAssignor) -> None:
    subs = {f"m{i}": ["t"] for i in range(4)}
    first = assignor.assign(group(subs, {"t": 12}))
    del subs["m2"]
    second = assignor.assign(next_round(first, subs, {"t": 12}))
    assert spread(second) == 0
    for member in subs:
        assert set(first.members[member]) <= set(second.members[member])


def test_the_extra_partitions_stay_with_members_that_already_hold_them() -> None:
    # 7 partitions, 3 members: quotas 3, 2, 2 — the member owning 3 keeps them all.
    owned = {
        "a": [tp("t", 0), tp("t", 1)],
        "b": [tp("t", 2), tp("t", 3), tp("t", 4)],
        "c": [tp("t", 5), tp("t", 6)],
    }
    g = group({m: ["t"] for m in owned}, {"t": 7}, owned)
    result = StickyAssignor().assign(g)
    assert {m: list(v) for m, v in result.members.items()} == owned


def test_kafkas_general_case_example() -> None:
    # Kafka's StickyAssignor javadoc: C0 -> t0; C1 -> t0, t1; C2 -> t0, t1, t2 (1, 2, 3 partitions).
    subs = {"C0": ["t0"], "C1": ["t0", "t1"], "C2": ["t0", "t1", "t2"]}
    partitions = {"t0": 1, "t1": 2, "t2": 3}
    first = StickyAssignor().assign(group(subs, partitions))
    assert first.members == {
        "C0": (tp("t0", 0),),
        "C1": (tp("t1", 0), tp("t1", 1)),
        "C2": (tp("t2", 0), tp("t2", 1), tp("t2", 2)),
    }
    del subs["C0"]
    second = StickyAssignor().assign(next_round(first, subs, partitions))
    assert second.members == {
        "C1": (tp("t0", 0), tp("t1", 0), tp("t1", 1)),
        "C2": (tp("t2", 0), tp("t2", 1), tp("t2", 2)),
    }


def test_the_newer_generation_keeps_a_partition_claimed_twice() -> None:
    # KIP-341: a member that was away (generation 3) still reports t-0; the current owner is at 5.
    owned = {"stale": [tp("t", 0), tp("t", 1)], "fresh": [tp("t", 0), tp("t", 2)]}
    g = group({"stale": ["t"], "fresh": ["t"]}, {"t": 4}, owned, {"stale": 3, "fresh": 5})
    result = StickyAssignor().assign(g)
    check_complete(g, result)
    assert set(result.members["fresh"]) == {tp("t", 0), tp("t", 2)}
    assert set(result.members["stale"]) == {tp("t", 1), tp("t", 3)}


def test_claims_tied_at_the_top_generation_are_all_ignored() -> None:
    owned = {"a": [tp("t", 0), tp("t", 1)], "b": [tp("t", 0), tp("t", 2)]}
    g = group({"a": ["t"], "b": ["t"]}, {"t": 4}, owned, {"a": 4, "b": 4})
    result = StickyAssignor().assign(g)
    check_complete(g, result)
    # Each keeps its uncontested claim; t-0 is handed out like an unowned partition.
    assert tp("t", 1) in result.members["a"]
    assert tp("t", 2) in result.members["b"]
    assert result.members == {"a": (tp("t", 0), tp("t", 1)), "b": (tp("t", 2), tp("t", 3))}


def test_claims_on_unknown_partitions_and_unsubscribed_topics_are_ignored() -> None:
    owned = {"a": [tp("gone", 0), tp("t", 7), tp("u", 0)], "b": [tp("t", 0)]}
    g = group({"a": ["t"], "b": ["t", "u"]}, {"t": 2, "u": 1, "gone": 3}, owned)
    result = StickyAssignor().assign(g)
    check_complete(g, result)
    assert result.members["b"] == (tp("t", 0), tp("u", 0))
    assert result.members["a"] == (tp("t", 1),)


def test_no_members_no_assignment() -> None:
    assert StickyAssignor().assign(group({}, {"t": 3})) == GroupAssignment(members={})


def test_members_without_topics_get_nothing() -> None:
    g = group({"a": [], "b": ["t"]}, {"t": 3})
    result = CooperativeStickyAssignor().assign(g)
    assert result.members == {"a": (), "b": (tp("t", 0), tp("t", 1), tp("t", 2))}
