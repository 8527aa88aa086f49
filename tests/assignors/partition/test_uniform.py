from __future__ import annotations

from assignors.partition.types import RebalanceProtocol
from assignors.partition.uniform import UniformAssignor
from tests.assignors.partition.groups import check_complete, counts, group, moved, next_round, spread
from tests.ids import tp


def test_declares_both_protocols_and_a_version() -> None:
    assert set(UniformAssignor().supported_protocols()) == {
        RebalanceProtocol.EAGER,
        RebalanceProtocol.COOPERATIVE,
    }
    assert (UniformAssignor.name, UniformAssignor.version) == ("uniform", 0)


def test_homogeneous_quotas_p_over_n_and_the_first_p_mod_n_get_one_more() -> None:
    g = group({f"m{i}": ["a", "b"] for i in range(3)}, {"a": 6, "b": 5})  # 11 over 3: 4, 4, 3
    result = UniformAssignor().assign(g)
    check_complete(g, result)
    assert counts(result) == {"m0": 4, "m1": 4, "m2": 3}


def test_each_member_keeps_what_it_owned_up_to_its_quota() -> None:
    owned = {"m0": [tp("t", p) for p in range(6)], "m1": [tp("t", 6)], "m2": []}
    g = group({m: ["t"] for m in owned}, {"t": 9}, owned)
    result = UniformAssignor().assign(g)
    check_complete(g, result)
    assert counts(result) == {"m0": 3, "m1": 3, "m2": 3}
    assert set(result.members["m0"]) < set(owned["m0"])
    assert tp("t", 6) in result.members["m1"]
    assert moved(owned, result) == 3  # m0 gives up exactly its excess


def test_heterogeneous_subscriptions_are_balanced_where_topics_allow() -> None:
    # x, y, z have 6 partitions each; a and d can only take x and z. Water-filling topic by
    # topic and single moves (Kafka's rule) stop at a=3, b=4, c=5, d=6; chains of moves
    # (d -> c -> b -> a) finish the job.
    subs = {"a": ["x"], "b": ["x", "y"], "c": ["y", "z"], "d": ["z"]}
    g = group(subs, {"x": 6, "y": 6, "z": 6})
    result = UniformAssignor().assign(g)
    check_complete(g, result)
    assert spread(result) <= 1
    again = UniformAssignor().assign(next_round(result, subs, {"x": 6, "y": 6, "z": 6}))
    assert again == result


def test_heterogeneous_balance_moves_from_the_most_to_the_least_loaded() -> None:
    owned = {"a": [tp("x", p) for p in range(6)] + [tp("y", p) for p in range(6)]}
    subs = {"a": ["x", "y"], "b": ["x"], "c": ["y"]}
    g = group(subs, {"x": 6, "y": 6}, owned)
    result = UniformAssignor().assign(g)
    check_complete(g, result)
    assert counts(result) == {"a": 4, "b": 4, "c": 4}
    assert set(result.members["a"]) < set(owned["a"])  # a keeps 4 of its own, gives 8 away


def test_a_subscription_change_releases_the_dropped_topic() -> None:
    subs = {"a": ["x", "y"], "b": ["x", "y"]}
    first = UniformAssignor().assign(group(subs, {"x": 2, "y": 2}))
    subs = {"a": ["x"], "b": ["x"]}
    second = UniformAssignor().assign(next_round(first, subs, {"x": 2, "y": 2}))
    assert all(t.topic == "x" for tps in second.members.values() for t in tps)
    assert counts(second) == {"a": 1, "b": 1}
