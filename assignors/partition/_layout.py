"""The integer layout the partition assignors compute on (internal to ``assignors.partition``).

Hot loops never touch :class:`~topology.ids.TopicPartition` objects. The subscribed topics are
sorted by name and their partitions numbered ``0 .. P-1`` topic after topic, so ascending
partition numbers are ascending ``TopicPartition`` order and a member's sorted number list
turns straight into the sorted tuple :class:`GroupAssignment` keeps. Members are numbered in
member-id order. Objects are only made at the end, and a ``TopicPartition`` a member sent in
``owned_partitions`` is reused rather than built again.

Claims (``Subscription.owned_partitions``) are resolved with the rule of
:func:`assignors.cooperative.valid_claims`: per partition the claim of the highest generation
wins; two or more claims tied at the highest generation all lose (nobody keeps the partition).
Claims on partitions that do not exist in ``partitions_per_topic`` are ignored here, and so
are claims on topics the claimant does not subscribe to.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from itertools import accumulate, chain, compress, pairwise, repeat
from operator import add, attrgetter, is_, lt

from assignors.partition.types import (
    GroupAssignment,
    GroupSubscription,
    MemberId,
    PartitionNumbers,
    Subscription,
)
from streamtasks.errors import AssignorInputError
from topology.ids import TopicPartition
from topology.partitions import topic_partitions

__all__ = ["UNKNOWN_GENERATION", "Layout", "make_partitions", "member_order_key", "topic_names"]

#: Generation of a claim that carries no KIP-341 marker (consumer protocol < v2).
UNKNOWN_GENERATION = -1

_get_topic = attrgetter("topic")
_get_partition = attrgetter("partition")
_NO_CLAIM = -(2**63)
_CONTESTED = -2
_UNOWNED = -1


def make_partitions(topic: str, count: int) -> list[TopicPartition]:
    """``[TopicPartition(topic, 0), ..., TopicPartition(topic, count - 1)]``, built fast
    (:func:`topology.partitions.topic_partitions`)."""
    return topic_partitions(topic, range(count))


def topic_names(member: MemberId, topics: object) -> tuple[str, ...]:
    """``Subscription.topics`` as a sorted tuple without duplicates; a clear error otherwise."""
    if isinstance(topics, str | bytes) or not isinstance(topics, Iterable):
        raise AssignorInputError(
            f"member {member!r}: Subscription.topics must be a tuple of topic names, got {topics!r}"
        )
    names = set(topics)
    for name in names:
        if not isinstance(name, str) or not name:
            raise AssignorInputError(
                f"member {member!r}: topic names must be non-empty strings, got {name!r}"
            )
    return tuple(sorted(names))


def member_order_key(member: MemberId, subscription: Subscription) -> tuple[int, str, str]:
    """Kafka's member order for ``range`` and ``round_robin``: static members (with a
    ``group.instance.id``) first, by instance id; then dynamic members by member id. Equal
    instance ids (a misconfiguration) fall back to the member id so the order stays total."""
    if subscription.group_instance_id is not None:
        return (0, subscription.group_instance_id, member)
    return (1, member, "")


class Layout:
    """Members, subscribed topics and partitions of one :class:`GroupSubscription`, as ints.

    Building it validates the group: every subscribed topic needs a partition count
    (``AssignorInputError`` names the topics and who subscribes to them), counts are ints
    ``>= 0``. Topics nobody subscribes to are left out.
    """

    __slots__ = (
        "_claimed",
        "_limits",
        "_starts",
        "counts",
        "homogeneous",
        "member_ids",
        "member_topics",
        "objects",
        "offsets",
        "subscriptions",
        "topic_index",
        "topics",
        "total",
    )

    def __init__(self, group: GroupSubscription) -> None:
        self.member_ids: list[MemberId] = sorted(group.members)
        for member in self.member_ids:
            if not isinstance(member, str):
                raise AssignorInputError(f"member ids must be strings, got {member!r}")
        self.subscriptions: list[Subscription] = [group.members[m] for m in self.member_ids]
        # Equal subscriptions share one canonical tuple; comparing with the previous member's
        # first and keying by id() avoids re-hashing long topic tuples member after member.
        canonical: dict[object, tuple[str, ...]] = {}
        names_per_member: list[tuple[str, ...]] = []
        last_raw: object = None
        names: tuple[str, ...] | None = None
        for member, subscription in zip(self.member_ids, self.subscriptions, strict=True):
            raw = subscription.topics
            if names is None or not isinstance(raw, tuple) or raw != last_raw:
                try:
                    names = canonical.get(raw)
                except TypeError:  # an unhashable collection: validate it every time
                    names = None
                if names is None:
                    names = topic_names(member, raw)
                    if isinstance(raw, tuple):
                        canonical[raw] = names
                last_raw = raw
            names_per_member.append(names)
        shared = {id(names): names for names in names_per_member}
        distinct = set(shared.values())
        self.homogeneous: bool = len(distinct) <= 1
        self.topics: list[str] = sorted({t for names in distinct for t in names})
        _check_counts(group, self.topics, self.member_ids, names_per_member)
        self.counts: list[int] = [group.partitions_per_topic[t] for t in self.topics]
        self.topic_index: dict[str, int] = {t: i for i, t in enumerate(self.topics)}
        offsets = [0]
        for count in self.counts:
            offsets.append(offsets[-1] + count)
        self.offsets: list[int] = offsets
        self.total: int = offsets[-1]
        indices = {key: tuple(self.topic_index[t] for t in names) for key, names in shared.items()}
        self.member_topics: list[tuple[int, ...]] = [indices[id(names)] for names in names_per_member]
        self.objects: list[TopicPartition | None] = [None] * self.total
        # Per member, the numbers of its claim in the claim's order, when every claim won.
        self._claimed: list[list[int]] | None = None
        self._starts: dict[str, int] = {t: offsets[i] for i, t in enumerate(self.topics)}
        self._limits: dict[str, int] = dict(zip(self.topics, self.counts, strict=True))

    def kafka_member_order(self) -> list[int]:
        """Member indices in Kafka's order for ``range`` and ``round_robin``
        (:func:`member_order_key`)."""
        ids, subs = self.member_ids, self.subscriptions
        return sorted(range(len(ids)), key=lambda i: member_order_key(ids[i], subs[i]))

    # -- claims ---------------------------------------------------------------------------

    def owned(self) -> list[Sequence[int]]:
        """Per member, the sorted partition numbers it validly owns and may keep: the claim
        wins its partition (see the module docstring) and the member subscribes to the topic."""
        for member, subscription in zip(self.member_ids, self.subscriptions, strict=True):
            generation = subscription.generation
            if not isinstance(generation, int) or generation < UNKNOWN_GENERATION:
                raise AssignorInputError(
                    f"member {member!r}: generation must be an int >= -1 (-1: unknown), got {generation!r}"
                )
        nothing: tuple[int, ...] = ()
        if not any(s.owned_partitions for s in self.subscriptions):
            return [nothing] * len(self.subscriptions)  # a fresh group: no allocation per member
        claimed = self._resolve_claims([s.owned_partitions for s in self.subscriptions])
        result: list[Sequence[int]] = []
        topic_of = self.topic_of() if not self.homogeneous else None
        for index, claim in enumerate(claimed):
            if not claim:
                result.append(nothing)
            elif topic_of is None:
                result.append(claim)  # sorted
            else:
                allowed = set(self.member_topics[index])
                result.append([n for n in claim if topic_of[n] in allowed])
        return result

    def _resolve_claims(self, claims: Sequence[Sequence[TopicPartition]]) -> list[Sequence[int]]:
        """Per member, the sorted partition numbers of its claims that win: claims on
        partitions that do not exist are skipped; conflicts go to the highest generation, and a
        tie at the highest voids them all."""
        fast = self._distinct_claims(claims)
        if fast is not None:
            return fast
        best = [_NO_CLAIM] * self.total
        owner = [_UNOWNED] * self.total
        objects = self.objects
        base, limit = self._starts, self._limits
        claimed: list[list[int]] = []
        for index, (member, subscription) in enumerate(zip(self.member_ids, self.subscriptions, strict=True)):
            generation = subscription.generation
            numbers: list[int] = []
            claimed.append(numbers)
            try:
                for tp in claims[index]:
                    if tp.__class__ is not TopicPartition and not isinstance(tp, TopicPartition):
                        raise TypeError(f"got {tp!r}")
                    start = base.get(tp.topic)
                    if start is None:
                        continue
                    partition = tp.partition
                    if not 0 <= partition < limit[tp.topic]:
                        continue
                    number = start + partition
                    numbers.append(number)
                    objects[number] = tp
                    top = best[number]
                    if generation > top:
                        best[number] = generation
                        owner[number] = index
                    elif generation == top and owner[number] != index:
                        owner[number] = _CONTESTED
            except (AttributeError, TypeError) as exc:
                raise AssignorInputError(
                    f"member {member!r}: owned_partitions must hold TopicPartition values "
                    f"(topic: str, partition: int); {exc}"
                ) from exc
        return [sorted({n for n in mine if owner[n] == index}) for index, mine in enumerate(claimed)]

    def _distinct_claims(self, claims: Sequence[Sequence[TopicPartition]]) -> list[Sequence[int]] | None:
        """:meth:`_resolve_claims` in C-level passes over all claims at once, for the usual
        round: every claim a ``TopicPartition`` of an existing partition, and no partition
        claimed twice (so every claim wins, whatever its generation). None otherwise: then the
        loop per claim settles conflicts and names bad input."""
        try:
            offsets = [0, *accumulate(map(len, claims))]
            flat = list(chain.from_iterable(claims))
        except TypeError:  # a claim that is not a collection
            return None
        if len(flat) != offsets[-1] or not set(map(type, flat)) <= {TopicPartition}:
            return None
        topics = list(map(_get_topic, flat))
        partitions = list(map(_get_partition, flat))
        try:
            starts = list(map(self._starts.__getitem__, topics))
            # Every number below every topic's count, or else each below its own topic's count.
            if partitions and (
                min(partitions) < 0
                or (
                    max(partitions) >= min(self._limits.values())
                    and not all(map(lt, partitions, map(self._limits.__getitem__, topics)))
                )
            ):
                return None
            numbers = list(map(add, starts, partitions))
            if len(set(numbers)) != len(numbers):
                return None
            deque(map(self.objects.__setitem__, numbers, flat), maxlen=0)
        except (KeyError, TypeError):  # an unknown or unhashable topic, a partition not an int
            return None
        self._claimed = [numbers[start:stop] for start, stop in pairwise(offsets)]
        return [sorted(claim) for claim in self._claimed]

    def topic_of(self) -> list[int]:
        """Topic index of every partition number."""
        out: list[int] = []
        for index, count in enumerate(self.counts):
            out.extend(repeat(index, count))
        return out

    # -- output ---------------------------------------------------------------------------

    def fill_objects(self) -> list[TopicPartition]:
        """Every partition number's ``TopicPartition``, reusing the ones members sent."""
        objects = self.objects
        missing = list(compress(range(self.total), map(is_, objects, repeat(None))))
        if len(missing) == self.total:  # nothing to reuse: build them all
            built: list[TopicPartition] = []
            for topic, count in zip(self.topics, self.counts, strict=True):
                built += make_partitions(topic, count)
            self.objects = built  # type: ignore[assignment]
            return built
        if missing:
            topic_of = self.topic_of()
            for number in missing:
                index = topic_of[number]
                objects[number] = TopicPartition(self.topics[index], number - self.offsets[index])
        return objects  # type: ignore[return-value]  # no None is left

    def assignment(
        self, numbers: Sequence[Sequence[int]], *, followup_needed: bool = False
    ) -> GroupAssignment:
        """The :class:`GroupAssignment` of per-member *sorted* partition numbers."""
        get = self.fill_objects().__getitem__
        members: dict[MemberId, tuple[TopicPartition, ...]] = {}
        claimed = self._claimed
        for index, (member, mine) in enumerate(zip(self.member_ids, numbers, strict=True)):
            if claimed is not None and mine and mine == claimed[index]:
                kept = self.subscriptions[index].owned_partitions  # all of its claim, in order:
                if type(kept) is tuple:  # the very tuple it sent (cooperative.assign sees that)
                    members[member] = kept
                    continue
            members[member] = tuple(map(get, mine))
        keyed = PartitionNumbers(starts=self._starts, counts=self._limits, members=numbers)
        return GroupAssignment.from_sorted(members, followup_needed=followup_needed, numbers=keyed)


def _check_counts(
    group: GroupSubscription,
    topics: Sequence[str],
    member_ids: Sequence[MemberId],
    names_per_member: Sequence[tuple[str, ...]],
) -> None:
    counts = group.partitions_per_topic
    missing = [t for t in topics if t not in counts]
    if missing:
        details = []
        for topic in missing[:10]:
            who = [m for m, names in zip(member_ids, names_per_member, strict=True) if topic in names]
            shown = ", ".join(repr(m) for m in who[:3]) + (
                f" and {len(who) - 3} more" if len(who) > 3 else ""
            )
            details.append(f"{topic!r} (subscribed by {shown})")
        more = f" and {len(missing) - 10} more" if len(missing) > 10 else ""
        raise AssignorInputError(
            "no partition count for subscribed topic(s) "
            + "; ".join(details)
            + more
            + ": give every subscribed topic a count in partitions_per_topic, or drop unknown topics "
            "first with assignors.partition.metadata.prune_unknown_topics()"
        )
    for topic in topics:
        count = counts[topic]
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise AssignorInputError(f"partition count of topic {topic!r} must be an int >= 0, got {count!r}")
