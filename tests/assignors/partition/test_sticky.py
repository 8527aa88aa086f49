from __future__ import annotations

import pytest

from assignors.partition.sticky import CooperativeStickyAssignor, StickyAssignor
from assignors.partition.types import GroupAssignment, RebalanceProtocol
from tests.assignors.partition.groups import check_complete, counts, group, moved, next_round, spread
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


def test_with_different_subscriptions_new_partitions_move_before_owned_ones() -> None:
    """Found by the differential test against Kafka's CooperativeStickyAssignor: m1 (the
    newer generation) validly owns a-3, c-9 and c-11. Balancing topic c first used to hand
    c-11 to m2 once m1 had no new c partition left, although m1 could give m2 a new partition
    of a instead: 10/10/10 with c-11 moved; Kafka keeps all three. Now owned partitions move
    only once no new partition can: 10/10/10 and nothing moved."""
    owned = [tp("a", 3), tp("c", 9), tp("c", 11)]
    g = group(
        {"m0": ["d", "b", "c"], "m1": ["a", "d", "b", "c"], "m2": ["c", "a"]},
        {"a": 7, "b": 7, "c": 12, "d": 4},
        {"m0": owned, "m1": owned},
        {"m0": 0, "m1": 1, "m2": 3},
    )
    result = CooperativeStickyAssignor().assign(g)
    check_complete(g, result)
    assert spread(result) == 0
    assert set(owned) <= set(result.members["m1"])


def test_with_different_subscriptions_a_member_trades_a_new_partition_for_its_own() -> None:
    """m0 owns 36 of 38 partitions and keeps 10 (m1 and m3 take a and d, m2 takes c). It used
    to end with c-11, which nobody owned, while one of its own c partitions went to m2 (27
    moved; Kafka 26): the two now trade, 26 moved at the same balance."""
    every = {"a": 14, "b": 6, "c": 14, "d": 4}
    owned = {
        "m0": [tp(t, p) for t, n in every.items() for p in range(n) if (t, p) not in {("a", 2), ("c", 11)}]
    }
    g = group(
        {"m0": ["d", "a", "b", "c"], "m1": ["d", "a"], "m2": ["b", "c"], "m3": ["d", "a"]}, every, owned
    )
    result = CooperativeStickyAssignor().assign(g)
    check_complete(g, result)
    assert spread(result) == 1
    assert moved(owned, result) == 26
    assert tp("c", 11) in result.members["m2"]


def test_with_different_subscriptions_the_member_a_partition_short_is_one_that_lost_less() -> None:
    """m3 joins; m0 gives it 7 of a; m2 (10 owned, b and d) and m1 (6 owned) share b and d. The
    balancing used to leave m2 with 8 and m1 with 9, m2 having lost two of its own (9 moved;
    Kafka 8); a partition now goes back to its previous owner when that owner has exactly one
    fewer than its holder (the counts trade places): m2 9, m1 8, 8 moved."""
    owned = {
        "m0": [tp("a", p) for p in range(12)] + [tp("c", p) for p in range(4)],
        "m1": [tp("b", 3), tp("b", 6), tp("b", 8), tp("d", 2), tp("d", 5), tp("d", 6)],
        "m2": [tp("b", p) for p in (0, 2, 4, 5, 7, 9)] + [tp("d", p) for p in (0, 4, 7, 8)],
    }
    subs = {"m0": ["c", "a"], "m1": ["b", "d"], "m2": ["d", "b"], "m3": ["a", "c", "b", "d"]}
    g = group(subs, {"a": 12, "b": 10, "c": 4, "d": 9}, owned)
    result = CooperativeStickyAssignor().assign(g)
    check_complete(g, result)
    assert spread(result) == 1
    assert moved(owned, result) == 8
    assert counts(result) == {"m0": 9, "m1": 8, "m2": 9, "m3": 9}
