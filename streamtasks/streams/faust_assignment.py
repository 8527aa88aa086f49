"""faust-streaming's partition assignment, reimplemented deterministically (pure).

What faust's ``PartitionAssignor`` (name ``"faust"``, version 4) computes as group leader, so a
streamtasks leader can answer a group that still holds faust members (``upgrade_from="faust"``):

1. Topics with a partition count are grouped by that count; the counts, sorted, number the
   *topic groups* (``topic_groups``: topic -> index). Inside one count, topics subscribed by
   the same set of members form one *co-partitioned set*; topics without partitions are
   left out (faust logs and ignores them).
2. Per co-partitioned set, over the members subscribed to it, faust's ``CopartitionedAssignor``
   runs with ``replicas = min(replicas, members - 1)``: every member starts from its previous
   actives / standbys (the first of the set's topics, sorted, that has any), drops its extras
   above ``capacity`` (lowest first) (``floor(P/N)`` without replicas when ``P >= N``, ``ceil(P/N)``
   otherwise) and ``capacity * replicas``, then actives and standbys are placed: partitions
   held by too many members are taken from the first holders; the rest go round robin over
   the members sorted by how many they hold, actives preferring a member that has the
   partition as a standby (which is then promoted), standbys starting ``partition`` places
   further on and never on the partition's active; a partition with no room left evicts one
   from a full member that some other member can still take.
3. Every topic of the set gets the member's active and standby partitions.

faust itself pops arbitrary elements of sets and walks dicts in arrival order; here every such
choice is fixed (members by id, topics by name, the lowest partitions dropped first, as
CPython's ``set.pop`` does for small ints), so the same input gives the same answer. Global
tables (faust's ``global=True``: every changelog partition as a standby everywhere) are not
modelled: a streamtasks leader treats a global
table's changelog as an ordinary co-partitioned topic (docs/protocol.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from math import ceil, floor
from types import MappingProxyType

from streamtasks.errors import AssignorError

__all__ = ["CopartitionedSet", "FaustMemberInput", "FaustMemberOutput", "copartitioned_sets", "faust_assign"]

TopicPartitions = Mapping[str, tuple[int, ...]]


@dataclass(frozen=True, slots=True, kw_only=True)
class FaustMemberInput:
    """One member as faust's leader sees it: its topics and its previous assignment."""

    topics: tuple[str, ...]
    actives: TopicPartitions = field(default_factory=dict)
    standbys: TopicPartitions = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class FaustMemberOutput:
    """One member's new ``ClientAssignment`` (every topic of its co-partitioned sets, sorted
    partitions, possibly empty)."""

    actives: TopicPartitions
    standbys: TopicPartitions


class _Slots:
    """faust's ``CopartitionedAssignment`` for one member (mutable, private to one run)."""

    __slots__ = ("actives", "standbys")

    def __init__(self, actives: set[int], standbys: set[int]) -> None:
        self.actives = actives
        self.standbys = standbys - actives

    def held(self, active: bool) -> set[int]:
        return self.actives if active else self.standbys

    def can_take(self, partition: int, active: bool) -> bool:
        return partition not in self.held(active) and (active or partition not in self.actives)

    def drop_extras(self, capacity: int, replicas: int) -> None:
        for held, limit in ((self.actives, capacity), (self.standbys, capacity * replicas)):
            while len(held) > limit:
                held.remove(min(held))


def _first_nonempty(previous: TopicPartitions, topics: tuple[str, ...]) -> set[int]:
    for topic in topics:
        if previous.get(topic):
            return set(previous[topic])
    return set()


class _Copartitioned:
    """faust's ``CopartitionedAssignor`` over one co-partitioned set (see the module notes)."""

    def __init__(self, slots: dict[str, _Slots], partitions: int, replicas: int) -> None:
        self._order = sorted(slots)
        self._slots = slots
        self._n = len(slots)
        self._p = partitions
        self._replicas = min(replicas, self._n - 1)
        self._max = ceil(partitions / self._n)
        self._min = floor(partitions / self._n)

    def run(self) -> None:
        no_replicas = self._replicas == 0 and self._p >= self._n
        capacity = self._min if no_replicas else self._max
        for member in self._order:
            self._slots[member].drop_extras(capacity, self._replicas)
        self._assign(active=True)
        self._assign(active=False)

    def _per_partition(self, active: bool) -> int:
        return 1 if active else self._replicas

    def _counts(self, active: bool) -> list[int]:
        counts = [0] * self._p
        for member in self._order:
            for p in self._slots[member].held(active):
                counts[p] += 1
        return counts

    def _exhausted(self, slots: _Slots, active: bool) -> bool:
        return len(slots.held(active)) >= self._max * self._per_partition(active)

    def _assign(self, active: bool) -> None:
        want = self._per_partition(active)
        counts = self._counts(active)
        for p in range(self._p):  # the same partition held by too many members (zombies)
            for _ in range(counts[p] - want):
                holder = next(m for m in self._order if p in self._slots[m].held(active))
                self._slots[holder].held(active).remove(p)
        counts = self._counts(active)
        queue = [p for p in range(self._p) for _ in range(want - counts[p])]
        ring = sorted(self._order, key=lambda m: len(self._slots[m].held(active)))
        cursor = 0
        budget = (len(queue) + 1) * (self._n + 1) * (self._p + 1) * 4
        while queue:
            budget -= 1
            if budget < 0:
                raise AssignorError(
                    f"faust assignment does not converge ({self._p} partitions, {self._n} members)"
                )
            p = queue.pop(0)
            chosen: str | None = None
            if active:  # promote a standby of p first
                for _ in range(self._n):
                    member = ring[cursor % self._n]
                    cursor += 1
                    s = self._slots[member]
                    if p in s.standbys and not self._exhausted(s, True) and s.can_take(p, True):
                        chosen = member
                        s.standbys.remove(p)
                        break
            else:
                cursor += p
            if chosen is None:
                for _ in range(self._n):
                    member = ring[cursor % self._n]
                    cursor += 1
                    s = self._slots[member]
                    if not self._exhausted(s, active) and s.can_take(p, active):
                        chosen = member
                        break
            if chosen is None:  # free a slot on a full member for p; its victim goes back in the queue
                chosen = next(
                    (
                        m
                        for m in self._order
                        if self._exhausted(self._slots[m], active) and self._slots[m].can_take(p, active)
                    ),
                    None,
                )
                if chosen is None:
                    raise AssignorError(f"faust assignment: no member can take partition {p}")
                queue.append(self._free_one(chosen, active))
            self._slots[chosen].held(active).add(p)

    def _free_one(self, member: str, active: bool) -> int:
        held = self._slots[member].held(active)
        for candidate in sorted(held):
            for other in self._order:
                o = self._slots[other]
                if other != member and not self._exhausted(o, active) and o.can_take(candidate, active):
                    held.remove(candidate)
                    return candidate
        candidate = min(held)
        held.remove(candidate)
        return candidate


@dataclass(frozen=True, slots=True, kw_only=True)
class CopartitionedSet:
    """Topics faust assigns together: one partition count, one set of subscribers."""

    group_id: int
    partitions: int
    topics: tuple[str, ...]
    members: tuple[str, ...]


def copartitioned_sets(
    subscriptions: Mapping[str, Iterable[str]], partitions_per_topic: Mapping[str, int]
) -> tuple[CopartitionedSet, ...]:
    """faust's grouping of the subscribed topics (module notes, step 1), deterministic."""
    subscribers: dict[str, set[str]] = {}
    for member in sorted(subscriptions):
        for topic in subscriptions[member]:
            subscribers.setdefault(topic, set()).add(member)
    by_count: dict[int, list[str]] = {}
    for topic in sorted(subscribers):
        count = partitions_per_topic.get(topic, 0)
        if count > 0:
            by_count.setdefault(count, []).append(topic)
    out: list[CopartitionedSet] = []
    for group_id, count in enumerate(sorted(by_count)):
        groups: dict[frozenset[str], list[str]] = {}
        for topic in by_count[count]:
            groups.setdefault(frozenset(subscribers[topic]), []).append(topic)
        for topics in sorted(tuple(g) for g in groups.values()):
            out.append(
                CopartitionedSet(
                    group_id=group_id,
                    partitions=count,
                    topics=topics,
                    members=tuple(sorted(subscribers[topics[0]])),
                )
            )
    return tuple(out)


def faust_assign(
    members: Mapping[str, FaustMemberInput],
    partitions_per_topic: Mapping[str, int],
    *,
    replicas: int,
) -> tuple[dict[str, FaustMemberOutput], dict[str, int]]:
    """Every member's new assignment and the ``topic_groups`` map (see the module notes).

    ``replicas`` is faust's ``table_standby_replicas``. Topics without a positive partition
    count are left out.
    """
    if replicas < 0:
        raise AssignorError(f"replicas must be >= 0, got {replicas}")
    actives: dict[str, dict[str, tuple[int, ...]]] = {m: {} for m in members}
    standbys: dict[str, dict[str, tuple[int, ...]]] = {m: {} for m in members}
    topic_groups: dict[str, int] = {}
    subscriptions = {m: members[m].topics for m in members}
    for cs in copartitioned_sets(subscriptions, partitions_per_topic):
        for topic in cs.topics:
            topic_groups[topic] = cs.group_id
        count = cs.partitions
        slots = {
            m: _Slots(
                {p for p in _first_nonempty(members[m].actives, cs.topics) if p < count},
                {p for p in _first_nonempty(members[m].standbys, cs.topics) if p < count},
            )
            for m in cs.members
        }
        _Copartitioned(slots, count, replicas).run()
        for m in cs.members:
            for topic in cs.topics:
                actives[m][topic] = tuple(sorted(slots[m].actives))
                standbys[m][topic] = tuple(sorted(slots[m].standbys))
    out = {
        m: FaustMemberOutput(actives=MappingProxyType(actives[m]), standbys=MappingProxyType(standbys[m]))
        for m in sorted(members)
    }
    return out, topic_groups
