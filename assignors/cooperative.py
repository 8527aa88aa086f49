"""KIP-429's leader step: turn a target assignment into what is safe to hand out this round.

The leader collects what every member claims to own (``owned``) and what the assignor wants
(``target``), and sorts every partition into KIP-429's three sets:

* **maybe-revoking** — owned and targeted. If the target owner is the current owner it keeps
  the partition; if not, the partition is *withheld* from its new owner this round, the old
  owner (whose assignment no longer lists it) revokes it and rejoins, and in the follow-up
  rebalance nobody owns it any more, so it reaches its new owner.
* **ready-to-migrate** — targeted, owned by nobody: handed out at once.
* **unknown-but-owned** — owned, targeted to nobody (a deleted topic, the leader's stale
  metadata, a topic a previous leader created): handed back to its owner, as the KIP says. The
  leader cannot tell a deleted topic from its own stale metadata, so it does not take the
  partition away; the owner drops a deleted topic's partitions itself when its metadata shows
  the topic gone (``on_partitions_lost``), and a metadata change triggers a rebalance anyway.

Conflicting claims (KIP-341). Claims carry the generation the claimant last had an assignment
in (``-1``: unknown, i.e. no marker). When several members claim one partition, the claim of
the highest generation is valid and the others are dropped (reported in
``Adjustment.dropped_claims``). When two or more claims tie at the highest generation (two
members of one generation can only both claim a partition through a bug or a zombie), *all*
of them are dropped, as Kafka's sticky assignors do ("invalidated and removed from their
previous assignment"): the partition is not handed to anyone this round — not even to a
claimant the target names — every claimant is told to revoke it, and the follow-up rebalance
assigns it cleanly. A member listing a partition twice is one claim.

``revoking`` is what each member claimed and does not get this round (whether its claim was
valid or dropped): exactly what it must revoke when the assignment arrives. ``withheld`` is
what the target gives a member but it does not get yet; ``followup_needed`` is true when
anything is withheld. Members are the union of both mappings; ``revoking`` and ``withheld``
list only members with something in them. Every tuple is sorted.

:func:`assign` is the leader's entry point: it checks that the assignor supports the protocol,
runs it, checks its result (every partition at most once, only the group's members), and
under COOPERATIVE passes the result through :func:`adjust` with the claims read by
:func:`owned_from`. The assignors ignore claims on partitions missing from
``partitions_per_topic``, so such a partition is not in the target and ``adjust`` hands it
back to its claimant (the unknown-but-owned case above).

Assignors that return user data (``GroupAssignment.user_data``, e.g. the streams assignor,
which tells each member which tasks it runs) are responsible for being cooperative-safe
themselves: they withhold moving partitions on their own, and their user data describes that
withheld state. :func:`assign` keeps their user data and still passes their result through
:func:`adjust`, with one difference: a partition of a known topic (in ``partitions_per_topic``,
below its count) that such an assignor gives to nobody was left out on purpose (its owner must
revoke it for a hand-over) and is *not* handed back to its owner. Partitions of unknown topics
are handed back as for every assignor. Should ``adjust`` still withhold a partition from a
member that got user data (the assignor was not cooperative-safe after all), that member's
user data is kept as is: it may name a task whose partitions the member does not get this
round, and the member's partition list, not its user data, is the source of truth.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain, repeat
from operator import add, attrgetter
from types import MappingProxyType
from typing import NoReturn

from assignors.partition.types import (
    GroupAssignment,
    GroupSubscription,
    MemberId,
    PartitionAssignor,
    RebalanceProtocol,
)
from streamtasks.errors import AssignorError, AssignorInputError
from topology.ids import TopicPartition

__all__ = ["Adjustment", "OwnedClaim", "adjust", "assign", "owned_from", "valid_claims"]


@dataclass(frozen=True, slots=True, kw_only=True)
class OwnedClaim:
    """The partitions a member says it owns, with the generation of its last assignment."""

    partitions: tuple[TopicPartition, ...]
    generation: int = -1  # -1: unknown (consumer protocol < v2 / no KIP-341 marker)

    def __post_init__(self) -> None:
        if not isinstance(self.generation, int) or self.generation < -1:
            raise AssignorInputError(f"claim generation must be an int >= -1, got {self.generation!r}")
        if not isinstance(self.partitions, tuple):
            object.__setattr__(self, "partitions", tuple(self.partitions))


@dataclass(frozen=True, slots=True, kw_only=True)
class Adjustment:
    """The result of :func:`adjust`; see the module docstring for each field's meaning."""

    assignment: Mapping[MemberId, tuple[TopicPartition, ...]]  # what each member gets this round
    revoking: Mapping[MemberId, tuple[TopicPartition, ...]]  # owned by member, not in its target
    withheld: Mapping[MemberId, tuple[TopicPartition, ...]]  # in member's target, still owned elsewhere
    dropped_claims: tuple[tuple[MemberId, TopicPartition], ...]  # stale claims ignored (KIP-341)
    followup_needed: bool

    def __post_init__(self) -> None:
        for name in ("assignment", "revoking", "withheld"):
            value: Mapping[MemberId, tuple[TopicPartition, ...]] = getattr(self, name)
            object.__setattr__(self, name, MappingProxyType(dict(sorted(value.items()))))


_get_topic = attrgetter("topic")
_get_partition = attrgetter("partition")
_PARTITION_LIMIT = 1 << 32


class _Keys:
    """Partitions as ints, ``topic rank << 32 | partition``, so hot loops hash ints instead of
    dataclasses and ascending keys are ascending ``TopicPartition`` order.

    Built once from several collections (each a member's claim or target): everything is
    flattened into one list so that checking and numbering run as C-level passes, then cut
    back into one key list per collection (``lists``). ``objects`` maps a key back to the
    first ``TopicPartition`` seen for it."""

    __slots__ = ("lists", "objects")

    def __init__(self, collections: Sequence[tuple[MemberId, Sequence[object], str]]) -> None:
        flat: list[object] = list(chain.from_iterable(tps for _, tps, _ in collections))
        if not all(issubclass(kind, TopicPartition) for kind in set(map(type, flat))):
            _complain(collections)
        topics = list(map(_get_topic, flat))
        names = set(topics)
        numbers = list(map(_get_partition, flat))
        try:
            if numbers and (min(numbers) < 0 or max(numbers) >= _PARTITION_LIMIT):
                _complain(collections)
        except TypeError:
            _complain(collections)
        if not set(map(type, names)) <= {str}:
            _complain(collections)
        ordered: list[str] = sorted(names)  # all str, checked above
        base = {name: rank << 32 for rank, name in enumerate(ordered)}
        keys = list(map(add, map(base.__getitem__, topics), numbers))
        self.objects: dict[int, TopicPartition] = dict(zip(keys, flat, strict=True))  # type: ignore[arg-type]
        self.lists: list[list[int]] = []
        position = 0
        for _, tps, _ in collections:
            self.lists.append(keys[position : position + len(tps)])
            position += len(tps)

    def partitions(self, keys: Iterable[int]) -> tuple[TopicPartition, ...]:
        return tuple(map(self.objects.__getitem__, sorted(keys)))


def _complain(collections: Sequence[tuple[MemberId, Sequence[object], str]]) -> NoReturn:
    """Raise the error for the first bad element (the slow path of :class:`_Keys`)."""
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


def _claims(owned: Mapping[MemberId, OwnedClaim]) -> list[tuple[MemberId, Sequence[object], str]]:
    out: list[tuple[MemberId, Sequence[object], str]] = []
    for member in sorted(owned):
        claim = owned[member]
        if not isinstance(claim, OwnedClaim):
            raise AssignorInputError(f"member {member!r}: expected an OwnedClaim, got {claim!r}")
        out.append((member, claim.partitions, "OwnedClaim.partitions"))
    return out


def _resolve(
    owned: Mapping[MemberId, OwnedClaim], claim_keys: Sequence[list[int]]
) -> tuple[dict[MemberId, set[int]], dict[int, MemberId | None]]:
    """Per member (in ``sorted(owned)`` order, matching ``claim_keys``) its distinct claimed
    keys, and per claimed key its valid owner (``None``: the top claims tie, nobody owns it).
    Members are visited highest generation first, so a key's first claimant is a top one."""
    members = sorted(owned)
    claims = {member: set(keys) for member, keys in zip(members, claim_keys, strict=True)}
    generations = {member: owned[member].generation for member in members}
    owner: dict[int, MemberId | None] = {}
    for member in sorted(members, key=lambda m: (-generations[m], m)):
        generation = generations[member]
        for key in claims[member]:
            first = owner.setdefault(key, member)
            if first is not None and first != member and generations[first] == generation:
                owner[key] = None
    return claims, owner


def valid_claims(owned: Mapping[MemberId, OwnedClaim]) -> dict[MemberId, tuple[TopicPartition, ...]]:
    """Per member (every member of ``owned``), the sorted claims that survive KIP-341's rule:
    the highest generation wins a partition; a tie at the highest generation voids all."""
    space = _Keys(_claims(owned))
    claims, owner = _resolve(owned, space.lists)
    return {
        member: space.partitions(k for k in mine if owner[k] == member) for member, mine in claims.items()
    }


def _target_owners(
    members: Sequence[MemberId], lists: Sequence[list[int]], space: _Keys, what: str
) -> dict[int, MemberId]:
    """Key -> member of a target; ``error`` if a partition is given to two members."""
    flat = list(chain.from_iterable(lists))
    owners = dict(zip(flat, chain.from_iterable(map(repeat, members, map(len, lists))), strict=True))
    if len(owners) != len(flat):
        seen: dict[int, MemberId] = {}
        for member, keys in zip(members, lists, strict=True):
            for key in keys:
                other = seen.setdefault(key, member)
                if other != member:
                    raise AssignorInputError(
                        f"{what} assigns {space.objects[key]} to both {other!r} and {member!r}"
                    )
    return owners


def adjust(
    owned: Mapping[MemberId, OwnedClaim],
    target: Mapping[MemberId, Iterable[TopicPartition]],
) -> Adjustment:
    """KIP-429's leader algorithm (module docstring). Raises ``AssignorInputError`` if the
    target gives one partition to two members or holds something other than partitions."""
    claimed = _claims(owned)
    wanted = [(member, tuple(target[member]), "the target") for member in sorted(target)]
    space = _Keys([*claimed, *wanted])
    claims, owner = _resolve(owned, space.lists[: len(claimed)])
    targets = space.lists[len(claimed) :]
    target_members = [member for member, _, _ in wanted]
    target_owner = _target_owners(target_members, targets, space, "the target")
    assignment: dict[MemberId, list[int]] = {m: [] for m in sorted({*owned, *target_members})}
    withheld: dict[MemberId, list[int]] = {}
    get_owner = owner.get
    for member, keys in zip(target_members, targets, strict=True):
        given = assignment[member]
        for key in keys:
            if get_owner(key, member) == member:
                given.append(key)  # kept, or owned by nobody (ready to migrate)
            else:
                withheld.setdefault(member, []).append(key)  # moves between owners, or contested
    for key, holder in owner.items():
        if holder is not None and key not in target_owner:
            assignment[holder].append(key)  # unknown but owned: back to its owner
    revoking: dict[MemberId, tuple[TopicPartition, ...]] = {}
    dropped: list[tuple[MemberId, TopicPartition]] = []
    for member, mine in claims.items():
        if mine:
            lost = mine.difference(assignment[member])
            if lost:
                revoking[member] = space.partitions(lost)
            dropped.extend((member, tp) for tp in space.partitions(k for k in mine if owner[k] != member))
    return Adjustment(
        assignment={member: space.partitions(set(keys)) for member, keys in assignment.items()},
        revoking=revoking,
        withheld={member: space.partitions(set(keys)) for member, keys in withheld.items()},
        dropped_claims=tuple(dropped),
        followup_needed=bool(withheld),
    )


def owned_from(group: GroupSubscription) -> dict[MemberId, OwnedClaim]:
    """Every member's claim as its subscription reports it (``owned_partitions``, ``generation``)."""
    return {
        member: OwnedClaim(
            partitions=tuple(group.members[member].owned_partitions),
            generation=group.members[member].generation,
        )
        for member in sorted(group.members)
    }


def _check_result(assignor: PartitionAssignor, group: GroupSubscription, result: object) -> GroupAssignment:
    name = getattr(assignor, "name", type(assignor).__name__)
    if not isinstance(result, GroupAssignment):
        raise AssignorError(f"assignor {name!r} returned {type(result).__name__}, not a GroupAssignment")
    strangers = sorted((set(result.members) | set(result.user_data)) - set(group.members))
    if strangers:
        raise AssignorError(
            f"assignor {name!r} assigned partitions to {strangers!r}, who are not in the group"
        )
    members = list(result.members)
    try:
        space = _Keys([(member, result.members[member], "the assignment") for member in members])
        _target_owners(members, space.lists, space, f"assignor {name!r}")
    except AssignorInputError as exc:
        raise AssignorError(str(exc)) from exc
    return result


def assign(
    assignor: PartitionAssignor, group: GroupSubscription, protocol: RebalanceProtocol
) -> GroupAssignment:
    """Run the assignor; under COOPERATIVE pass its result through adjust() (followup_needed set).

    Raises ``AssignorInputError`` if the assignor does not support ``protocol`` (or for bad
    group input, from the assignor) and ``AssignorError`` if the assignor's result is not a
    valid assignment of the group's members (a partition twice, an unknown member)."""
    try:
        protocol = RebalanceProtocol(protocol)
    except ValueError as exc:
        raise AssignorInputError(f"unknown rebalance protocol {protocol!r}") from exc
    supported = tuple(assignor.supported_protocols())
    if protocol not in supported:
        names = ", ".join(RebalanceProtocol(p).name for p in supported) or "none"
        raise AssignorInputError(
            f"assignor {assignor.name!r} does not support the {protocol.name} protocol (supports: {names})"
        )
    result = _check_result(assignor, group, assignor.assign(group))
    if protocol is RebalanceProtocol.EAGER:
        return result
    adjustment = adjust(owned_from(group), result.members)
    members: Mapping[MemberId, tuple[TopicPartition, ...]] = adjustment.assignment
    if result.user_data:
        members = _without_known_handbacks(group, result.members, members)
    return GroupAssignment(
        members=members,
        followup_needed=adjustment.followup_needed or result.followup_needed,
        user_data=result.user_data,
    )


def _without_known_handbacks(
    group: GroupSubscription,
    target: Mapping[MemberId, tuple[TopicPartition, ...]],
    adjusted: Mapping[MemberId, tuple[TopicPartition, ...]],
) -> dict[MemberId, tuple[TopicPartition, ...]]:
    """``adjusted`` without the partitions of known topics that ``adjust`` handed back to their
    owners although the target gave them to nobody (module docstring: user-data assignors)."""
    counts = group.partitions_per_topic
    out: dict[MemberId, tuple[TopicPartition, ...]] = {}
    for member, parts in adjusted.items():
        wanted = set(target.get(member, ()))
        out[member] = tuple(
            tp for tp in parts if tp in wanted or not 0 <= tp.partition < counts.get(tp.topic, 0)
        )
    return out
