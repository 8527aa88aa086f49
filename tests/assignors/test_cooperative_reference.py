"""cooperative.adjust and cooperative.assign against a reference written straight from KIP-429's
leader algorithm (the module docstring of assignors.cooperative), on TopicPartition values
with plain sets and dicts: the keyed, per-member fast paths must give exactly its answer."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from assignors import cooperative
from assignors.cooperative import OwnedClaim, adjust
from assignors.partition.range import RangeAssignor
from assignors.partition.round_robin import RoundRobinAssignor
from assignors.partition.sticky import CooperativeStickyAssignor
from assignors.partition.types import (
    GroupAssignment,
    GroupSubscription,
    PartitionAssignor,
    PartitionNumbers,
    RebalanceProtocol,
    Subscription,
)
from assignors.partition.uniform import UniformAssignor
from streamtasks.errors import AssignorError, AssignorInputError
from tests.assignors.partition.groups import Returns
from topology.ids import TopicPartition

Parts = dict[str, tuple[TopicPartition, ...]]


def reference(
    owned: Mapping[str, OwnedClaim], target: Mapping[str, Sequence[TopicPartition]]
) -> tuple[Parts, Parts, Parts, tuple[tuple[str, TopicPartition], ...], bool]:
    """(assignment, revoking, withheld, dropped_claims, followup_needed), from the docstring."""
    claims = {member: set(claim.partitions) for member, claim in owned.items()}
    owner: dict[TopicPartition, str | None] = {}
    for tp in set().union(*claims.values()):
        generations = {m: owned[m].generation for m, mine in claims.items() if tp in mine}
        top = max(generations.values())
        winners = [m for m, generation in generations.items() if generation == top]
        owner[tp] = winners[0] if len(winners) == 1 else None  # a tie at the top voids them all
    given_to: dict[TopicPartition, str] = {}
    for member in sorted(target):
        for tp in target[member]:
            if given_to.setdefault(tp, member) != member:
                raise AssignorInputError(f"the target assigns {tp} to both {given_to[tp]!r} and {member!r}")
    assignment: dict[str, set[TopicPartition]] = {m: set() for m in {*owned, *target}}
    withheld: dict[str, set[TopicPartition]] = {}
    for member, tps in target.items():
        for tp in tps:
            if owner.get(tp, member) == member:  # kept, or owned by nobody
                assignment[member].add(tp)
            else:  # moves between owners, or contested
                withheld.setdefault(member, set()).add(tp)
    for tp, holder in owner.items():
        if holder is not None and tp not in given_to:  # unknown but owned: back to its owner
            assignment[holder].add(tp)
    revoking = {m: mine - assignment[m] for m, mine in claims.items() if mine - assignment[m]}
    dropped = tuple((m, tp) for m in sorted(claims) for tp in sorted(claims[m]) if owner[tp] != m)

    def parts(sets: Mapping[str, set[TopicPartition]]) -> Parts:
        return {m: tuple(sorted(tps)) for m, tps in sorted(sets.items())}

    return parts(assignment), parts(revoking), parts(withheld), dropped, bool(withheld)


def outcome(
    owned: Mapping[str, OwnedClaim], target: Mapping[str, Sequence[TopicPartition]]
) -> tuple[Parts, Parts, Parts, tuple[tuple[str, TopicPartition], ...], bool]:
    result = adjust(owned, target)
    return (
        dict(result.assignment),
        dict(result.revoking),
        dict(result.withheld),
        result.dropped_claims,
        result.followup_needed,
    )


MEMBERS = ["a", "b", "c", "d", "e"]
#: Topics of different sizes, one past the others' partition numbers, one nobody is targeted.
UNIVERSE = [
    *(TopicPartition("x", p) for p in range(5)),
    *(TopicPartition("y", p) for p in range(2)),
    *(TopicPartition("z", p) for p in (0, 7, 40)),
]
GONE = [TopicPartition("gone", 0), TopicPartition("gone", 3)]


@st.composite
def claims(draw: st.DrawFn) -> dict[str, OwnedClaim]:
    """Claims that overlap (stale, tied and newer generations), repeat, and name partitions
    that no target names."""
    return {
        member: OwnedClaim(
            partitions=tuple(draw(st.lists(st.sampled_from(UNIVERSE + GONE), max_size=7))),
            generation=draw(st.integers(-1, 3)),
        )
        for member in draw(st.lists(st.sampled_from(MEMBERS), unique=True))
    }


@st.composite
def targets(
    draw: st.DrawFn, owned: Mapping[str, OwnedClaim] | None = None
) -> dict[str, list[TopicPartition]]:
    """Each partition to at most one member, in any order, sometimes listed twice by it; or,
    now and then, a member's claim as it is (the fast path: a target that is its claim)."""
    placement = draw(
        st.lists(st.sampled_from([None, *MEMBERS]), min_size=len(UNIVERSE), max_size=len(UNIVERSE))
    )
    out: dict[str, list[TopicPartition]] = {
        m: [] for m in draw(st.lists(st.sampled_from(MEMBERS), unique=True))
    }
    for tp, member in zip(UNIVERSE, placement, strict=True):
        if member is not None:
            out.setdefault(member, []).append(tp)
    for member, tps in list(out.items()):
        shuffled = list(draw(st.permutations(tps)))
        if shuffled and draw(st.booleans()):
            shuffled.append(shuffled[0])
        out[member] = shuffled
    if owned and draw(st.booleans()):  # every member targeted its own claim, if that is a target
        seen: set[TopicPartition] = set()
        for member, claim in owned.items():
            mine = set(claim.partitions)
            if not mine & seen:
                out[member] = list(claim.partitions)
                seen |= mine
    return out


@st.composite
def rounds(draw: st.DrawFn) -> tuple[dict[str, OwnedClaim], dict[str, list[TopicPartition]]]:
    owned = draw(claims())
    return owned, draw(targets(owned))


@given(rounds())
def test_adjust_is_the_reference(case: tuple[dict[str, OwnedClaim], dict[str, list[TopicPartition]]]) -> None:
    owned, target = case
    try:
        expected = reference(owned, target)
    except AssignorInputError as exc:
        with pytest.raises(AssignorInputError, match=str(exc)[:20]):
            adjust(owned, target)
        return
    assert outcome(owned, target) == expected


@given(st.data())
def test_adjust_rejects_what_the_reference_rejects(data: st.DataObject) -> None:
    owned = data.draw(claims())
    target = data.draw(targets())
    twice = data.draw(st.sampled_from(UNIVERSE))
    target.setdefault("a", []).append(twice)
    target.setdefault("b", []).append(twice)
    with pytest.raises(AssignorInputError, match=f"assigns {twice} to both"):
        reference(owned, target)
    with pytest.raises(AssignorInputError, match=f"assigns {twice} to both"):
        adjust(owned, target)


# -- assign(): the same answer through the assignors' own results ------------------------------


COUNTS = {"x": 5, "y": 2}


@st.composite
def groups(draw: st.DrawFn) -> GroupSubscription:
    """Members subscribing to x and y, claiming partitions of x, y (also beyond their counts)
    and of a topic without a count, at various generations."""
    return GroupSubscription(
        members={
            member: Subscription(
                topics=("x", "y"),
                owned_partitions=tuple(draw(st.lists(st.sampled_from(UNIVERSE + GONE), max_size=6))),
                generation=draw(st.integers(-1, 2)),
            )
            for member in draw(st.lists(st.sampled_from(MEMBERS), min_size=1, unique=True))
        },
        partitions_per_topic=COUNTS,
    )


ASSIGNORS: list[PartitionAssignor] = [
    UniformAssignor(),
    CooperativeStickyAssignor(),
    RangeAssignor(),
    RoundRobinAssignor(),
]


@given(groups(), st.sampled_from(ASSIGNORS))
def test_assign_is_the_reference_for_the_assignors_own_results(
    group: GroupSubscription, assignor: PartitionAssignor
) -> None:
    target = assignor.assign(group)  # carries its partition numbers
    result = cooperative.assign(Returns(target), group, RebalanceProtocol.COOPERATIVE)
    assignment, _, withheld, _, followup = reference(cooperative.owned_from(group), target.members)
    assert dict(result.members) == assignment
    assert result.followup_needed == followup
    assert bool(withheld) == followup
    # The numbers change nothing: the same result without them is adjusted the same way.
    plain = GroupAssignment(members=dict(target.members))
    assert plain.numbers is None
    assert cooperative.assign(Returns(plain), group, RebalanceProtocol.COOPERATIVE) == result


@given(groups(), st.data())
def test_assign_is_the_reference_for_any_valid_result(group: GroupSubscription, data: st.DataObject) -> None:
    placement = data.draw(st.lists(st.sampled_from([None, *group.members]), min_size=9, max_size=9))
    target: dict[str, list[TopicPartition]] = {m: [] for m in group.members}
    for tp, member in zip(UNIVERSE[:7] + GONE, placement, strict=True):
        if member is not None:
            target[member].append(tp)
    result = cooperative.assign(
        Returns(GroupAssignment(members=target)), group, RebalanceProtocol.COOPERATIVE
    )
    assignment, _, _, _, followup = reference(cooperative.owned_from(group), target)
    assert dict(result.members) == assignment
    assert result.followup_needed == followup


@pytest.mark.parametrize("generation", [1, 2])
def test_a_target_that_is_the_claim_itself_still_waits_for_a_newer_or_tied_claimant(generation: int) -> None:
    # The target hands a its own claim tuple back, numbers attached; b claims the partition too.
    mine = (TopicPartition("x", 0),)
    group = GroupSubscription(
        members={
            "a": Subscription(topics=("x",), owned_partitions=mine, generation=1),
            "b": Subscription(
                topics=("x",), owned_partitions=(TopicPartition("x", 0),), generation=generation
            ),
        },
        partitions_per_topic={"x": 1},
    )
    numbers = PartitionNumbers(starts={"x": 0}, counts={"x": 1}, members=[[0], []])
    target = GroupAssignment.from_sorted({"a": mine, "b": ()}, numbers=numbers)
    result = cooperative.assign(Returns(target), group, RebalanceProtocol.COOPERATIVE)
    assignment, _, withheld, _, followup = reference(cooperative.owned_from(group), target.members)
    assert withheld == {"a": mine}
    assert dict(result.members) == assignment == {"a": (), "b": ()}
    assert result.followup_needed
    assert followup


def test_numbers_that_give_a_partition_twice_are_not_trusted() -> None:
    x0 = TopicPartition("x", 0)
    group = GroupSubscription(
        members={m: Subscription(topics=("x",)) for m in ("a", "b")}, partitions_per_topic={"x": 1}
    )
    numbers = PartitionNumbers(starts={"x": 0}, counts={"x": 1}, members=[[0], [0]])
    target = GroupAssignment.from_sorted({"a": (x0,), "b": (x0,)}, numbers=numbers)
    with pytest.raises(AssignorError, match=r"assigns x-0 to both 'a' and 'b'"):
        cooperative.assign(Returns(target), group, RebalanceProtocol.COOPERATIVE)
    with pytest.raises(AssignorError, match=r"assigns x-0 to both 'a' and 'b'"):
        cooperative.check_result(Returns(target), group, target)
