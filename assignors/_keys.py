"""Partitions as ints for :mod:`assignors.cooperative`'s hot loops (internal).

A :class:`Numbering` keys topic ``t``'s partition ``p`` as ``base[t] + p``, with ``p`` below
``limits[t]``: hot loops hash ints instead of dataclasses, ascending keys are ascending
``TopicPartition`` order (topics are numbered in name order), and the keys are dense small ints.
(``rank << 32 | partition`` made keys of different topics collide in the low bits that set and
dict slots are chosen by: a set of 100,000 of them took 8x longer.) Two key spaces agree only if
they share a numbering: a space built ``like`` a numbering keeps it when its partitions fit it,
and otherwise makes a wider one for both (the caller then renumbers the other space). An
assignor's own numbering (:class:`~assignors.partition.types.PartitionNumbers`) is one too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate, chain, islice, pairwise
from operator import add, attrgetter, is_, lt
from typing import NoReturn

from assignors.partition.types import GroupAssignment, MemberId
from streamtasks.errors import AssignorInputError
from topology.ids import TopicPartition

__all__ = [
    "Collection",
    "Numbering",
    "PartitionKeys",
    "Side",
    "in_member_order",
    "keyed_claims",
    "numbered_side",
    "targeted_keys",
]

#: A member, its partitions, and what they are (for error messages: "the target", ...).
Collection = tuple[MemberId, Sequence[object], str]

_get_topic = attrgetter("topic")
_get_partition = attrgetter("partition")
_PARTITION_LIMIT = 1 << 32


@dataclass(frozen=True, slots=True)
class Numbering:
    """Topic ``t``'s partition ``p`` is key ``base[t] + p``, for ``0 <= p < limits[t]``."""

    base: Mapping[str, int]
    limits: Mapping[str, int]

    @classmethod
    def of(cls, names: Iterable[str], stride: int) -> Numbering:
        """Topics in name order, ``stride`` keys each."""
        ordered = sorted(names)
        return cls({name: rank * stride for rank, name in enumerate(ordered)}, dict.fromkeys(ordered, stride))

    def fits(self, names: set[str], topics: list[str], numbers: list[int], top: int) -> bool:
        """Whether every partition (``topics[i]``, ``numbers[i]``, all ``>= 0``, the largest
        ``top``; ``names``: the distinct topics) has a key here."""
        if not names.issubset(self.base):
            return False
        limits = self.limits
        return top < min(map(limits.__getitem__, names), default=0) or all(
            map(lt, numbers, map(limits.__getitem__, topics))
        )

    def widened(self, names: set[str], top: int) -> Numbering:
        """A numbering for these topics and partition numbers up to ``top`` and for every
        partition this one keys."""
        return Numbering.of(names.union(self.base), max(top + 1, *self.limits.values(), 1))


class PartitionKeys:
    """The keys of several collections (each a member's claim or target), checked and numbered
    in C-level passes over everything flattened into one list (``keys``); collection ``i``'s
    keys are ``keys[offsets[i]:offsets[i + 1]]`` (``lists`` cuts them apart, on first use).
    ``objects`` maps a key back to the first ``TopicPartition`` seen for it (also built on first
    use). Raises ``AssignorInputError`` naming the first element that is not a
    ``TopicPartition`` with a ``str`` topic and a partition in ``[0, 2**32)``."""

    __slots__ = ("_flat", "_lists", "_numbers", "_objects", "_topics", "keys", "numbering", "offsets")

    def __init__(self, collections: Sequence[Collection], like: Numbering | None = None) -> None:
        flat: list[object] = list(chain.from_iterable(tps for _, tps, _ in collections))
        if not all(issubclass(kind, TopicPartition) for kind in set(map(type, flat))):
            _complain(collections)
        topics = list(map(_get_topic, flat))
        names = set(topics)
        numbers = list(map(_get_partition, flat))
        top = 0
        try:
            if numbers:
                top = max(numbers)
                if min(numbers) < 0 or top >= _PARTITION_LIMIT:
                    _complain(collections)
        except TypeError:
            _complain(collections)
        if not set(map(type, names)) <= {str}:
            _complain(collections)
        if like is None:
            like = Numbering.of(names, top + 1)
        elif not like.fits(names, topics, numbers, top):
            like = like.widened(names, top)
        self._flat: list[TopicPartition] = flat  # type: ignore[assignment]  # checked above
        self._topics: list[str] = topics
        self._numbers: list[int] = numbers
        self.offsets: list[int] = [0, *accumulate(len(tps) for _, tps, _ in collections)]
        self.numbering: Numbering = like
        self.keys: list[int] = []
        self._lists: list[list[int]] | None = None
        self._objects: dict[int, TopicPartition] | None = None
        self.renumber(like)

    def renumber(self, numbering: Numbering) -> None:
        """Key everything again with ``numbering`` (which must fit everything seen here)."""
        self.keys = list(map(add, map(numbering.base.__getitem__, self._topics), self._numbers))
        self.numbering = numbering
        self._lists = self._objects = None

    @property
    def lists(self) -> list[list[int]]:
        """Each collection's keys."""
        if self._lists is None:
            keys, offsets = self.keys, self.offsets
            self._lists = [keys[start:stop] for start, stop in pairwise(offsets)]
        return self._lists

    @property
    def objects(self) -> dict[int, TopicPartition]:
        if self._objects is None:
            self._objects = dict(zip(self.keys, self._flat, strict=True))
        return self._objects

    def partitions(self, keys: Iterable[int]) -> tuple[TopicPartition, ...]:
        """The sorted partitions of ``keys`` (keys of this space)."""
        return tuple(map(self.objects.__getitem__, sorted(keys)))


def _complain(collections: Sequence[Collection]) -> NoReturn:
    """Raise the error for the first bad element (the slow path of :class:`PartitionKeys`)."""
    for member, tps, what in collections:
        for tp in tps:
            if not isinstance(tp, TopicPartition):
                problem = f"must hold TopicPartition values, got {tp!r}"
            elif not isinstance(tp.topic, str):
                problem = f"holds {tp!r}, whose topic is not a string"
            elif not isinstance(tp.partition, int) or not 0 <= tp.partition < _PARTITION_LIMIT:
                problem = f"holds {tp!r}, whose partition is not an int in [0, 2**32)"
            else:
                continue
            raise AssignorInputError(f"member {member!r}: {what} {problem}")
    raise AssignorInputError("bad partitions")  # pragma: no cover - the caller found one


@dataclass(frozen=True, slots=True)
class Side:
    """The claims or the target, keyed: ``members`` in member-id order, each one's
    ``partitions`` as given, and its keys ``keys[offsets[i]:offsets[i + 1]]``."""

    members: list[MemberId]
    partitions: list[Sequence[object]]
    keys: list[int]
    offsets: list[int]

    @classmethod
    def of(cls, collections: Sequence[Collection], space: PartitionKeys, first: int = 0) -> Side:
        """``collections``, keyed in ``space`` from its collection ``first`` on."""
        return cls(
            [member for member, _, _ in collections],
            [tps for _, tps, _ in collections],
            space.keys,
            space.offsets[first : first + len(collections) + 1],
        )

    def size(self) -> int:
        return self.offsets[-1] - self.offsets[0]

    def flat(self) -> Iterable[int]:
        return islice(self.keys, self.offsets[0], self.offsets[-1])

    def lists(self) -> list[list[int]]:
        keys = self.keys
        return [keys[start:stop] for start, stop in pairwise(self.offsets)]


def targeted_keys(side: Side, space: PartitionKeys, what: str) -> set[int]:
    """Every key of a target; ``AssignorInputError`` if a partition is given to two members."""
    targeted = set(side.flat())
    if len(targeted) != side.size():  # listed twice: by one member (allowed) or by two?
        seen: dict[int, MemberId] = {}
        for member, keys in zip(side.members, side.lists(), strict=True):
            for key in keys:
                other = seen.setdefault(key, member)
                if other != member:
                    raise AssignorInputError(
                        f"{what} assigns {space.objects[key]} to both {other!r} and {member!r}"
                    )
    return targeted


def numbered_side(result: GroupAssignment) -> tuple[Numbering, Side, set[int]] | None:
    """``result`` keyed by the numbers its assignor computed it on, if it carries them, they
    match its members and partition counts, and no number is given twice."""
    numbers = result.numbers
    if numbers is None:
        return None
    tuples: list[Sequence[object]] = list(result.members.values())
    if list(map(len, numbers.members)) != list(map(len, tuples)):
        return None
    keys = list(chain.from_iterable(numbers.members))
    targeted = set(keys)
    if len(targeted) != len(keys):
        return None
    side = Side(list(result.members), tuples, keys, [0, *accumulate(map(len, numbers.members))])
    return Numbering(numbers.starts, numbers.counts), side, targeted


def keyed_claims(
    claimed: Sequence[Collection], targets: Side, numbering: Numbering
) -> tuple[Side, list[bool]] | None:
    """``claimed`` keyed with ``numbering``, the target's, and per claim whether it is its
    member's target object for object; None if a claim names a topic or partition number
    beyond the numbering. Such a claim (an assignor built on the partition layout hands a kept
    partition back as the object it was claimed as) takes the target's keys: only the other
    claims are looked at."""
    position = {member: index for index, member in enumerate(targets.members)}
    tkeys, toffsets = targets.keys, targets.offsets
    lists: list[list[int] | None] = []
    same: list[bool] = []
    others: list[Collection] = []
    for member, tps, what in claimed:
        j = position.get(member)
        if j is not None:
            target = targets.partitions[j]
            if target is tps or (len(target) == len(tps) and all(map(is_, target, tps))):
                lists.append(tkeys[toffsets[j] : toffsets[j + 1]])
                same.append(True)
                continue
        lists.append(None)
        same.append(False)
        others.append((member, tps, what))
    keyed = PartitionKeys(others, like=numbering)
    if keyed.numbering is not numbering:
        return None
    rest = iter(keyed.lists)
    full = [next(rest) if keys is None else keys for keys in lists]
    side = Side(
        [member for member, _, _ in claimed],
        [tps for _, tps, _ in claimed],
        list(chain.from_iterable(full)),
        [0, *accumulate(map(len, full))],
    )
    return side, same


def in_member_order(side: Side) -> Side:
    """``side`` with its members sorted (they are, unless ``GroupAssignment.from_sorted`` was
    given members out of order)."""
    if side.members == sorted(side.members):
        return side
    ordered = sorted(zip(side.members, side.partitions, side.lists(), strict=True))
    return Side(
        [member for member, _, _ in ordered],
        [tps for _, tps, _ in ordered],
        list(chain.from_iterable(keys for _, _, keys in ordered)),
        [0, *accumulate(len(keys) for _, _, keys in ordered)],
    )
