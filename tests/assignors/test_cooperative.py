"""KIP-429's leader step (cooperative.adjust) and the assign() wrapper."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from assignors import cooperative
from assignors.cooperative import Adjustment, OwnedClaim, adjust, owned_from, valid_claims
from assignors.partition.range import RangeAssignor
from assignors.partition.sticky import CooperativeStickyAssignor, StickyAssignor
from assignors.partition.types import GroupAssignment, RebalanceProtocol
from assignors.partition.uniform import UniformAssignor
from streamtasks.errors import AssignorError, AssignorInputError
from tests.assignors.partition.groups import Returns, check_complete, group, next_round
from tests.ids import tp
from topology.ids import TopicPartition

COOPERATIVE = RebalanceProtocol.COOPERATIVE
EAGER = RebalanceProtocol.EAGER


def claim(*tps: TopicPartition, generation: int = 1) -> OwnedClaim:
    return OwnedClaim(partitions=tps, generation=generation)


# -- the three sets ---------------------------------------------------------------------------


def test_a_partition_that_stays_is_kept() -> None:
    result = adjust({"a": claim(tp("t", 0))}, {"a": [tp("t", 0)]})
    assert result.assignment == {"a": (tp("t", 0),)}
    assert (result.revoking, result.withheld, result.followup_needed) == ({}, {}, False)


def test_maybe_revoking_a_moving_partition_is_withheld_from_its_new_owner() -> None:
    result = adjust(
        {"a": claim(tp("t", 0), tp("t", 1)), "b": claim()}, {"a": [tp("t", 0)], "b": [tp("t", 1)]}
    )
    assert result.assignment == {"a": (tp("t", 0),), "b": ()}
    assert result.revoking == {"a": (tp("t", 1),)}
    assert result.withheld == {"b": (tp("t", 1),)}
    assert result.followup_needed


def test_ready_to_migrate_an_unowned_partition_is_handed_out_at_once() -> None:
    result = adjust({"a": claim(tp("t", 0))}, {"a": [tp("t", 0)], "b": [tp("t", 1)]})
    assert result.assignment == {"a": (tp("t", 0),), "b": (tp("t", 1),)}
    assert not result.followup_needed


def test_unknown_but_owned_goes_back_to_its_owner() -> None:
    result = adjust({"a": claim(tp("deleted", 3), tp("t", 0))}, {"a": [tp("t", 0)]})
    assert result.assignment == {"a": (tp("deleted", 3), tp("t", 0))}
    assert result.revoking == {}
    assert not result.followup_needed


# -- conflicting claims (KIP-341) ---------------------------------------------------------------


def test_the_newer_generation_owns_a_partition_claimed_twice() -> None:
    owned = {"stale": claim(tp("t", 0), generation=3), "current": claim(tp("t", 0), generation=5)}
    result = adjust(owned, {"current": [tp("t", 0)], "stale": []})
    assert result.assignment == {"current": (tp("t", 0),), "stale": ()}
    assert result.dropped_claims == (("stale", tp("t", 0)),)
    assert result.revoking == {"stale": (tp("t", 0),)}
    assert not result.followup_needed


def test_moving_to_the_stale_claimant_still_waits_for_the_current_owner() -> None:
    owned = {"stale": claim(tp("t", 0), generation=3), "current": claim(tp("t", 0), generation=5)}
    result = adjust(owned, {"stale": [tp("t", 0)], "current": []})
    assert result.withheld == {"stale": (tp("t", 0),)}
    assert result.revoking == {"current": (tp("t", 0),), "stale": (tp("t", 0),)}
    assert result.followup_needed


def test_an_unknown_generation_loses_to_a_known_one() -> None:
    owned = {"old-protocol": claim(tp("t", 0), generation=-1), "new": claim(tp("t", 0), generation=0)}
    assert valid_claims(owned) == {"new": (tp("t", 0),), "old-protocol": ()}


def test_claims_tied_at_the_top_generation_are_all_dropped_and_the_partition_waits() -> None:
    owned = {"a": claim(tp("t", 0), tp("t", 1), generation=4), "b": claim(tp("t", 0), generation=4)}
    result = adjust(owned, {"a": [tp("t", 0), tp("t", 1)], "b": []})
    assert result.dropped_claims == (("a", tp("t", 0)), ("b", tp("t", 0)))
    assert result.assignment == {"a": (tp("t", 1),), "b": ()}
    assert result.withheld == {"a": (tp("t", 0),)}
    assert result.revoking == {"a": (tp("t", 0),), "b": (tp("t", 0),)}
    assert result.followup_needed


def test_a_higher_generation_breaks_a_lower_tie() -> None:
    owned = {
        "a": claim(tp("t", 0), generation=4),
        "b": claim(tp("t", 0), generation=4),
        "c": claim(tp("t", 0), generation=6),
    }
    assert valid_claims(owned) == {"a": (), "b": (), "c": (tp("t", 0),)}


def test_a_partition_listed_twice_by_one_member_is_one_claim() -> None:
    result = adjust({"a": claim(tp("t", 0), tp("t", 0))}, {"a": [tp("t", 0)]})
    assert result.assignment == {"a": (tp("t", 0),)}
    assert result.dropped_claims == ()


# -- bad input ------------------------------------------------------------------------------------


def test_a_target_that_gives_a_partition_twice_is_rejected() -> None:
    with pytest.raises(AssignorInputError, match=r"assigns t-0 to both 'a' and 'b'"):
        adjust({}, {"a": [tp("t", 0)], "b": [tp("t", 0)]})


def test_targets_must_hold_topic_partitions() -> None:
    with pytest.raises(AssignorInputError, match="member 'a': the target must hold TopicPartition"):
        adjust({}, {"a": [("t", 0)]})  # type: ignore[list-item]


def test_partition_numbers_must_be_non_negative_ints() -> None:
    with pytest.raises(AssignorInputError, match="partition is not an int"):
        adjust({"a": claim(tp("t", -1))}, {})
    with pytest.raises(AssignorInputError, match="partition is not an int"):
        adjust({"a": claim(TopicPartition("t", "0"))}, {})  # type: ignore[arg-type]


def test_claims_must_be_owned_claims_with_a_sane_generation() -> None:
    with pytest.raises(AssignorInputError, match="generation must be an int >= -1"):
        OwnedClaim(partitions=(), generation=-2)
    with pytest.raises(AssignorInputError, match="expected an OwnedClaim"):
        adjust({"a": (tp("t", 0),)}, {})  # type: ignore[dict-item]


# -- properties -----------------------------------------------------------------------------------

UNIVERSE = [tp(t, p) for t in ("x", "y") for p in range(6)]
MEMBERS = ["a", "b", "c", "d"]


@st.composite
def rounds(draw: st.DrawFn) -> tuple[dict[str, OwnedClaim], dict[str, list[TopicPartition]]]:
    owned = {
        m: OwnedClaim(
            partitions=tuple(draw(st.lists(st.sampled_from(UNIVERSE), max_size=6))),
            generation=draw(st.integers(-1, 2)),
        )
        for m in draw(st.lists(st.sampled_from(MEMBERS), unique=True))
    }
    placement = draw(
        st.lists(st.sampled_from([None, *MEMBERS]), min_size=len(UNIVERSE), max_size=len(UNIVERSE))
    )
    target: dict[str, list[TopicPartition]] = {
        m: [] for m in draw(st.lists(st.sampled_from(MEMBERS), unique=True))
    }
    for partition, member in zip(UNIVERSE, placement, strict=True):
        if member is not None:
            target.setdefault(member, []).append(partition)
    return owned, target


def claimants(owned: dict[str, OwnedClaim], partition: TopicPartition) -> dict[str, int]:
    return {m: c.generation for m, c in owned.items() if partition in c.partitions}


@given(rounds())
def test_never_hands_a_partition_over_while_another_member_still_holds_a_live_claim(
    case: tuple[dict[str, OwnedClaim], dict[str, list[TopicPartition]]],
) -> None:
    owned, target = case
    result = adjust(owned, target)
    seen: set[TopicPartition] = set()
    for member, partitions in result.assignment.items():
        for partition in partitions:
            assert partition not in seen
            seen.add(partition)
            others = {m: g for m, g in claimants(owned, partition).items() if m != member}
            if others:  # only the unique newest claimant may have it while others still claim it
                assert member in claimants(owned, partition)
                assert owned[member].generation > max(others.values())


@given(rounds())
def test_the_three_sets_account_for_every_partition(
    case: tuple[dict[str, OwnedClaim], dict[str, list[TopicPartition]]],
) -> None:
    owned, target = case
    result = adjust(owned, target)
    valid = valid_claims(owned)
    targeted = {p for ps in target.values() for p in ps}
    for member in {*owned, *target}:
        wanted = set(target.get(member, ()))
        got = set(result.assignment[member])
        held_back = set(result.withheld.get(member, ()))
        assert got & wanted | held_back == wanted
        assert not got & held_back
        assert got - wanted == set(valid.get(member, ())) - targeted  # unknown but owned
        mine = set(owned[member].partitions) if member in owned else set()
        assert set(result.revoking.get(member, ())) == mine - got
    assert result.followup_needed == bool(result.withheld)
    assert set(result.dropped_claims) == {
        (m, p) for m, c in owned.items() for p in set(c.partitions) - set(valid[m])
    }


@given(rounds())
def test_the_follow_up_round_completes_the_move(
    case: tuple[dict[str, OwnedClaim], dict[str, list[TopicPartition]]],
) -> None:
    owned, target = case
    first = adjust(owned, target)
    # Each member revoked what it lost; it now owns exactly its assignment, at the next generation.
    after = {m: OwnedClaim(partitions=tps, generation=5) for m, tps in first.assignment.items()}
    second = adjust(after, target)
    assert not second.followup_needed
    targeted = {p for ps in target.values() for p in ps}
    for member, tps in second.assignment.items():
        leftovers = {p for p in first.assignment[member] if p not in targeted}
        assert set(tps) == set(target.get(member, ())) | leftovers


@given(rounds(), st.randoms(use_true_random=False))
def test_input_order_does_not_matter(
    case: tuple[dict[str, OwnedClaim], dict[str, list[TopicPartition]]], rnd: random.Random
) -> None:
    owned, target = case
    items = list(owned.items())
    rnd.shuffle(items)
    shuffled_owned = {
        m: OwnedClaim(partitions=tuple(rnd.sample(c.partitions, len(c.partitions))), generation=c.generation)
        for m, c in items
    }
    shuffled_target = {m: rnd.sample(ps, len(ps)) for m, ps in rnd.sample(list(target.items()), len(target))}
    assert adjust(shuffled_owned, shuffled_target) == adjust(owned, target)


# -- assign(): the leader's entry point ---------------------------------------------------------


def test_owned_from_reads_the_subscriptions() -> None:
    g = group({"a": ["t"], "b": ["t"]}, {"t": 2}, {"a": [tp("t", 1)]}, {"a": 9})
    assert owned_from(g) == {
        "a": claim(tp("t", 1), generation=9),
        "b": OwnedClaim(partitions=(), generation=-1),
    }


def test_an_assignor_is_only_run_under_a_protocol_it_supports() -> None:
    with pytest.raises(AssignorInputError, match="'sticky' does not support the COOPERATIVE protocol"):
        cooperative.assign(StickyAssignor(), group({"a": ["t"]}, {"t": 1}), COOPERATIVE)
    with pytest.raises(AssignorInputError, match="'range' does not support the COOPERATIVE protocol"):
        cooperative.assign(RangeAssignor(), group({"a": ["t"]}, {"t": 1}), COOPERATIVE)
    with pytest.raises(AssignorInputError, match="unknown rebalance protocol"):
        cooperative.assign(RangeAssignor(), group({"a": ["t"]}, {"t": 1}), 7)  # type: ignore[arg-type]


def test_eager_passes_the_assignment_through() -> None:
    g = group({"a": ["t"], "b": ["t"]}, {"t": 4}, {"a": [tp("t", p) for p in range(4)]})
    assert cooperative.assign(StickyAssignor(), g, EAGER) == StickyAssignor().assign(g)


@pytest.mark.parametrize("assignor", [CooperativeStickyAssignor(), UniformAssignor()], ids=lambda a: a.name)
def test_a_joining_member_gets_its_share_in_two_rounds(assignor: CooperativeStickyAssignor) -> None:
    subs = {"a": ["t"], "b": ["t"]}
    first = cooperative.assign(assignor, group(subs, {"t": 6}), COOPERATIVE)
    assert not first.followup_needed
    subs["c"] = ["t"]
    second = cooperative.assign(assignor, next_round(first, subs, {"t": 6}, generation=1), COOPERATIVE)
    assert second.followup_needed
    assert second.members["c"] == ()  # everything it should get is still owned by a or b
    assert len(second.members["a"]) == len(second.members["b"]) == 2
    third = cooperative.assign(assignor, next_round(second, subs, {"t": 6}, generation=2), COOPERATIVE)
    assert not third.followup_needed
    check_complete(next_round(second, subs, {"t": 6}, generation=2), third)
    assert {len(v) for v in third.members.values()} == {2}
    assert set(second.members["a"]) <= set(third.members["a"])  # nobody lost anything in round two


@pytest.mark.parametrize(
    ("result", "message"),
    [
        (
            GroupAssignment(members={"a": (tp("t", 0),), "b": (tp("t", 0),)}),
            "assigns t-0 to both 'a' and 'b'",
        ),
        (GroupAssignment(members={"stranger": (tp("t", 0),)}), r"\['stranger'\], who are not in the group"),
        ({"a": ()}, "returned dict, not a GroupAssignment"),
    ],
)
def test_a_broken_assignor_result_is_reported(result: object, message: str) -> None:
    g = group({"a": ["t"], "b": ["t"]}, {"t": 1})
    for protocol in (EAGER, COOPERATIVE):
        with pytest.raises(AssignorError, match=message):
            cooperative.assign(Returns(result), g, protocol)


def test_adjustment_is_immutable() -> None:
    result = adjust({"a": claim(tp("t", 0))}, {"b": [tp("t", 0)]})
    assert isinstance(result, Adjustment)
    with pytest.raises(TypeError):
        result.assignment["a"] = ()  # type: ignore[index]
