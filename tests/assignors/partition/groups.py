"""Building groups for the partition-assignor tests, and what every assignment must satisfy."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import ClassVar

from hypothesis import strategies as st

from assignors import cooperative
from assignors.partition.types import (
    GroupAssignment,
    GroupSubscription,
    MemberId,
    RebalanceProtocol,
    Subscription,
)
from topology.ids import TopicPartition

__all__ = [
    "Returns",
    "all_partitions",
    "check_complete",
    "counts",
    "fewest_moves",
    "moved_from_owners",
    "group",
    "groups",
    "homogeneous_groups",
    "moved",
    "next_round",
    "spread",
]


def group(
    subscriptions: Mapping[str, Sequence[str]],
    partitions: Mapping[str, int],
    owned: Mapping[str, Sequence[TopicPartition]] | None = None,
    generations: Mapping[str, int] | None = None,
    instance_ids: Mapping[str, str] | None = None,
) -> GroupSubscription:
    owned = owned or {}
    generations = generations or {}
    instance_ids = instance_ids or {}
    return GroupSubscription(
        members={
            member: Subscription(
                topics=tuple(topics),
                owned_partitions=tuple(owned.get(member, ())),
                generation=generations.get(member, 1 if owned.get(member) else -1),
                group_instance_id=instance_ids.get(member),
            )
            for member, topics in subscriptions.items()
        },
        partitions_per_topic=dict(partitions),
    )


class Returns:
    """A partition assignor that returns ``result`` whatever the group, EAGER and COOPERATIVE
    (``result`` may be anything: also how a bad result is reported is tested with it)."""

    name: ClassVar[str] = "returns"
    version: ClassVar[int] = 0

    def __init__(self, result: object) -> None:
        self.result = result

    def supported_protocols(self) -> tuple[RebalanceProtocol, ...]:
        return (RebalanceProtocol.EAGER, RebalanceProtocol.COOPERATIVE)

    def assign(self, group: GroupSubscription) -> GroupAssignment:
        return self.result  # type: ignore[return-value]


def next_round(
    previous: GroupAssignment,
    subscriptions: Mapping[str, Sequence[str]],
    partitions: Mapping[str, int],
    generation: int = 1,
) -> GroupSubscription:
    """The group of the next rebalance: each member owns what ``previous`` gave it."""
    owned = {m: previous.members.get(m, ()) for m in subscriptions}
    return group(subscriptions, partitions, owned, {m: generation for m in subscriptions if owned[m]})


def all_partitions(g: GroupSubscription) -> set[TopicPartition]:
    topics = {t for s in g.members.values() for t in s.topics}
    return {TopicPartition(t, p) for t in topics for p in range(g.partitions_per_topic[t])}


def check_complete(g: GroupSubscription, result: GroupAssignment) -> None:
    """Every subscribed partition goes to exactly one member that subscribes to its topic;
    every member appears; tuples are sorted."""
    assert set(result.members) == set(g.members)
    seen = Counter(tp for tps in result.members.values() for tp in tps)
    assert all(n == 1 for n in seen.values()), [tp for tp, n in seen.items() if n > 1]
    assert set(seen) == all_partitions(g)
    for member, tps in result.members.items():
        assert list(tps) == sorted(tps)
        assert all(tp.topic in g.members[member].topics for tp in tps)


def counts(result: GroupAssignment) -> dict[str, int]:
    return {m: len(tps) for m, tps in result.members.items()}


def spread(result: GroupAssignment) -> int:
    sizes = list(counts(result).values())
    return max(sizes) - min(sizes) if sizes else 0


def moved(before: Mapping[str, Sequence[TopicPartition]], after: GroupAssignment) -> int:
    """Partitions whose owner in ``before`` still exists and no longer has them."""
    return sum(
        1 for m, tps in before.items() if m in after.members for tp in set(tps) - set(after.members[m])
    )


def _previous_owners(group: GroupSubscription) -> dict[TopicPartition, MemberId]:
    """Each existing partition's valid previous owner (KIP-341: the highest generation's claim;
    claims tied at the highest void each other)."""
    valid = cooperative.valid_claims(cooperative.owned_from(group))
    sizes = group.partitions_per_topic
    return {tp: m for m, tps in valid.items() for tp in tps if 0 <= tp.partition < sizes.get(tp.topic, 0)}


def moved_from_owners(group: GroupSubscription, result: GroupAssignment) -> int:
    """Partitions that ``result`` takes from their valid previous owner."""
    owner = {tp: m for m, tps in result.members.items() for tp in tps}
    return sum(1 for tp, m in _previous_owners(group).items() if owner.get(tp) != m)


def fewest_moves(group: GroupSubscription, counts: Mapping[MemberId, int]) -> int:
    """The fewest partitions any assignment giving each member ``counts[member]`` partitions of
    its topics takes from their valid previous owner: a minimum-cost flow (topics -> members,
    -1 per partition a member keeps), by successive shortest paths, written apart from the
    assignor so that it checks it."""
    previous = _previous_owners(group)
    sizes = group.partitions_per_topic
    topics = sorted(sizes)
    members = sorted(group.members)
    owned = Counter((tp.topic, m) for tp, m in previous.items() if tp.topic in group.members[m].topics)
    # nodes: 0 source, 1 sink, topics, then members; edges [to, capacity, cost, reverse index]
    node = {("t", t): 2 + k for k, t in enumerate(topics)} | {
        ("m", m): 2 + len(topics) + k for k, m in enumerate(members)
    }
    edges: list[list[list[int]]] = [[] for _ in range(2 + len(topics) + len(members))]

    def arc(a: int, b: int, capacity: int, cost: int) -> None:
        edges[a].append([b, capacity, cost, len(edges[b])])
        edges[b].append([a, 0, -cost, len(edges[a]) - 1])

    for t in topics:
        arc(0, node["t", t], sizes[t], 0)
        for m in members:
            if t in group.members[m].topics:
                arc(node["t", t], node["m", m], owned[t, m], -1)
                arc(node["t", t], node["m", m], sizes[t], 0)
    for m in members:
        arc(node["m", m], 1, counts.get(m, 0), 0)
    kept = 0
    while True:
        dist = [0] + [1 << 30] * (len(edges) - 1)
        back: list[tuple[int, int] | None] = [None] * len(edges)
        for _ in range(len(edges)):
            for a, out in enumerate(edges):
                for k, (b, capacity, cost, _) in enumerate(out):
                    if capacity > 0 and dist[a] + cost < dist[b]:
                        dist[b], back[b] = dist[a] + cost, (a, k)
        if back[1] is None:
            break
        b = 1
        while (step := back[b]) is not None:
            a, k = step
            edges[a][k][1] -= 1
            edges[b][edges[a][k][3]][1] += 1
            b = a
        kept -= dist[1]
    return len(previous) - kept


_TOPICS = ("a", "b", "c", "d")


@st.composite
def groups(draw: st.DrawFn, *, same_topics: bool = False, max_members: int = 7) -> GroupSubscription:
    """Small groups: up to four topics of up to 12 partitions; members subscribe to a
    non-empty subset (all the same when ``same_topics``) and may claim random partitions with
    random generations (so claims can conflict)."""
    partitions = {t: draw(st.integers(0, 12)) for t in _TOPICS}
    n = draw(st.integers(1, max_members))
    members = [f"m{i}" for i in range(n)]
    topic_sets = st.lists(st.sampled_from(_TOPICS), min_size=1, max_size=4, unique=True)
    shared = draw(topic_sets)
    subscriptions = {m: (shared if same_topics else draw(topic_sets)) for m in members}
    universe = [TopicPartition(t, p) for t in _TOPICS for p in range(partitions[t] + 1)]  # +1: a stale one
    owned = {m: draw(st.lists(st.sampled_from(universe), max_size=10)) for m in members}
    generations = {m: draw(st.integers(-1, 3)) for m in members}
    return group(subscriptions, partitions, owned, generations)


def homogeneous_groups(max_members: int = 7) -> st.SearchStrategy[GroupSubscription]:
    return groups(same_topics=True, max_members=max_members)
