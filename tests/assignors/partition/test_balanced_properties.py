"""Properties of the balance-then-stickiness assignors (sticky, cooperative_sticky, uniform)."""

from __future__ import annotations

import random
from collections.abc import Mapping

from hypothesis import given
from hypothesis import strategies as st

from assignors.cooperative import OwnedClaim, valid_claims
from assignors.partition.sticky import CooperativeStickyAssignor, StickyAssignor
from assignors.partition.types import GroupAssignment, GroupSubscription, PartitionAssignor, Subscription
from assignors.partition.uniform import UniformAssignor
from tests.assignors.partition.groups import (
    all_partitions,
    check_complete,
    counts,
    fewest_moves,
    groups,
    homogeneous_groups,
    moved,
    moved_from_owners,
    next_round,
    spread,
)
from topology.ids import TopicPartition

ASSIGNORS = st.sampled_from([StickyAssignor(), CooperativeStickyAssignor(), UniformAssignor()])


def keepable(g: GroupSubscription) -> dict[str, set[TopicPartition]]:
    """What each member may keep: claims that win KIP-341's rule, on existing partitions of
    topics the member subscribes to."""
    claims = {
        m: OwnedClaim(partitions=s.owned_partitions, generation=s.generation) for m, s in g.members.items()
    }
    exists = all_partitions(g)
    return {
        m: {tp for tp in tps if tp in exists and tp.topic in g.members[m].topics}
        for m, tps in valid_claims(claims).items()
    }


def check_balanced(g: GroupSubscription, result: GroupAssignment) -> None:
    """As even as the subscriptions allow: no member can pass a partition, directly or along a
    chain of members (each handing one of a topic the next subscribes to), to a member with
    two or more fewer partitions. That implies Kafka's rule (no single move helps) and, for
    identical subscriptions, counts that differ by at most one."""
    size = counts(result)
    for source in g.members:
        reached, frontier = {source}, [source]
        while frontier:
            giver = frontier.pop()
            for tp in result.members[giver]:
                for taker, subscription in g.members.items():
                    if tp.topic in subscription.topics and taker not in reached:
                        reached.add(taker)
                        frontier.append(taker)
        assert all(size[source] <= size[taker] + 1 for taker in reached), (source, size)


@given(ASSIGNORS, groups())
def test_assigns_every_partition_once_and_balanced(assignor: PartitionAssignor, g: GroupSubscription) -> None:
    result = assignor.assign(g)
    check_complete(g, result)
    check_balanced(g, result)


@given(ASSIGNORS, groups())
def test_no_assignment_with_the_same_counts_moves_fewer(
    assignor: PartitionAssignor, g: GroupSubscription
) -> None:
    """Whatever the subscriptions, the partitions taken from their valid previous owners are the
    fewest any assignment with the same member counts takes (a minimum-cost flow, written in the
    test: tests/assignors/partition/groups.py)."""
    result = assignor.assign(g)
    assert moved_from_owners(g, result) == fewest_moves(g, counts(result))


@given(ASSIGNORS, homogeneous_groups())
def test_identical_subscriptions_differ_by_at_most_one(
    assignor: PartitionAssignor, g: GroupSubscription
) -> None:
    assert spread(assignor.assign(g)) <= 1


@given(ASSIGNORS, homogeneous_groups())
def test_members_keep_all_they_may_up_to_their_share(
    assignor: PartitionAssignor, g: GroupSubscription
) -> None:
    result = assignor.assign(g)
    mine = keepable(g)
    for member, tps in result.members.items():
        assert len(mine[member] & set(tps)) == min(len(mine[member]), len(tps))
    # the one-extra seats go to members that own more
    for a in g.members:
        for b in g.members:
            if len(mine[a]) > len(mine[b]):
                assert len(result.members[a]) >= len(result.members[b])


@given(ASSIGNORS, groups())
def test_a_result_fed_back_is_a_fixpoint(assignor: PartitionAssignor, g: GroupSubscription) -> None:
    first = assignor.assign(g)
    subscriptions = {m: s.topics for m, s in g.members.items()}
    assert assignor.assign(next_round(first, subscriptions, g.partitions_per_topic, generation=7)) == first


def least_moves(before: Mapping[str, tuple[TopicPartition, ...]], members: int, total: int) -> int:
    """Fewest partitions that must change owner to balance ``total`` over ``members`` when the
    old members hold ``before`` (the newcomers hold nothing)."""
    held = sorted((len(tps) for tps in before.values()), reverse=True)
    quota, extra = divmod(total, members)
    return sum(max(0, n - (quota + 1 if i < extra else quota)) for i, n in enumerate(held))


@given(ASSIGNORS, homogeneous_groups(max_members=6), st.integers(1, 3))
def test_adding_members_moves_no_more_than_balance_requires(
    assignor: PartitionAssignor, g: GroupSubscription, joining: int
) -> None:
    first = assignor.assign(g)
    topics = next(iter(g.members.values())).topics
    subscriptions = {m: topics for m in g.members} | {f"new{i}": topics for i in range(joining)}
    second = assignor.assign(next_round(first, subscriptions, g.partitions_per_topic))
    total = sum(len(tps) for tps in first.members.values())
    assert spread(second) <= 1
    assert moved(first.members, second) == least_moves(first.members, len(subscriptions), total)


@given(ASSIGNORS, groups(), st.randoms(use_true_random=False))
def test_input_order_does_not_matter(
    assignor: PartitionAssignor, g: GroupSubscription, rnd: random.Random
) -> None:
    members = list(g.members.items())
    rnd.shuffle(members)
    shuffled = {}
    for member, s in members:
        topics, owned = list(s.topics), list(s.owned_partitions)
        rnd.shuffle(topics)
        rnd.shuffle(owned)
        shuffled[member] = Subscription(
            topics=tuple(topics), owned_partitions=tuple(owned), generation=s.generation
        )
    counts_ = list(g.partitions_per_topic.items())
    rnd.shuffle(counts_)
    other = GroupSubscription(members=shuffled, partitions_per_topic=dict(counts_))
    assert assignor.assign(other) == assignor.assign(g)
