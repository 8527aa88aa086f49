"""The leader's step (KIP-429 "Consumer Coordinator Algorithm" 2a-2f), pure.

decode every member's subscription → build the assignor input → run the selected assignor →
under COOPERATIVE withhold what changes owner (:func:`assignors.cooperative.assign`) → encode
one assignment per member.

* Protocol: the highest one the *selected* assignor supports. In a mixed group (KIP-429's
  upgrade path, "cooperative_sticky, range" members next to "cooperative_sticky" members) the
  coordinator can only have selected an assignor that every member offers; EAGER members claim
  nothing, so adjusting their (empty) claims is harmless, and COOPERATIVE members' claims must
  be respected whatever protocol the leader itself follows.
* Claims (KIP-341): a member's owned partitions and the generation it owned them under. For
  an assignor whose claims travel in its user data (the eager ``sticky`` assignor's KIP-341
  userdata) the assignor reads them itself (its ``read_subscription`` hook,
  :mod:`assignors.partition.hooks`). With
  ``generation_marker=False`` every claim's generation is forced to -1: the leader cannot tell
  a stale claim from a current one.
* Legacy pre-KIP-341 mode (simulation only): with ``generation_marker=False`` and an assignor
  whose claims travel in its user data (the eager ``sticky`` assignor) the leader behaves as
  Kafka's sticky assignor did before KIP-341 (KAFKA-7026): it trusts every claim, so a
  partition that several members claim stays assigned to every claimant
  (:func:`legacy_trust_claims`). That assigns one partition to two members in one generation —
  the duplicate the marker prevents. It exists so the simulator can show the bug; the default
  (marker on) never takes this path.
* User data: each member's assignment carries the assignor's user data for it
  (``GroupAssignment.user_data``), none when the assignor gave it none.
* A subscription that cannot be decoded does not stop the round: that member gets an empty
  assignment and the problem is reported. An assignor failure gives every member back its
  valid claims (nothing moves) and asks for a follow-up rebalance.
* Topics without a partition count are left out of the assignor input and reported; a
  metadata update that brings them triggers the leader's rejoin.
* Speed: subscriptions are read and assignments written group-wise (``SubscriptionDecoder``,
  ``AssignmentEncoder``), and the cyclic garbage collector is paused for the step
  (:func:`_collector_paused`).
"""

from __future__ import annotations

import gc
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from itertools import repeat
from operator import attrgetter
from types import MappingProxyType

from assignors.cooperative import assign as cooperative_assign
from assignors.cooperative import owned_from, valid_claims
from assignors.partition.hooks import claims_in_user_data, read_subscription
from assignors.partition.metadata import prune_unknown_topics
from assignors.partition.types import GroupSubscription, MemberId, PartitionAssignor, Subscription
from streamtasks.errors import AssignorError, DecodeError
from streamtasks.membership.classic.foreign import ForeignProtocolAssignor
from streamtasks.membership.classic.leader_result import LeaderResult
from streamtasks.protocol.classic_group import JoinGroupMember, SyncGroupAssignment
from streamtasks.protocol.consumer_bulk import AssignmentEncoder, SubscriptionDecoder
from streamtasks.protocol.consumer_protocol import HIGHEST_CONSUMER_PROTOCOL_VERSION
from topology.bulk import bulk
from topology.ids import TopicPartition

__all__ = ["DecodedGroup", "decode_members", "lead", "legacy_trust_claims"]

_member_id = attrgetter("member_id")


@dataclass(frozen=True, slots=True, kw_only=True)
class DecodedGroup:
    """Every member's subscription as the leader reads it."""

    subscriptions: Mapping[MemberId, Subscription]
    #: Consumer protocol version each decodable member sent.
    versions: Mapping[MemberId, int]
    #: Members whose subscription bytes could not be decoded (sorted).
    undecodable: tuple[MemberId, ...]
    problems: tuple[str, ...]

    @property
    def topics(self) -> tuple[str, ...]:
        """Every topic some member subscribes to, sorted: what the leader monitors."""
        # Members decoded from equal topic arrays share one tuple: read each tuple once.
        distinct = {id(s.topics): s.topics for s in self.subscriptions.values()}
        return tuple(sorted(set().union(*distinct.values())))


def _claims_from_user_data(
    assignor: PartitionAssignor, member: MemberId, sub: Subscription, problems: list[str]
) -> Subscription:
    try:
        return read_subscription(assignor, sub)
    except DecodeError as exc:
        problems.append(f"member {member!r}: {assignor.name} userdata ignored: {exc}")
        return replace(sub, owned_partitions=(), generation=-1)


def decode_members(
    members: Iterable[JoinGroupMember], *, assignor: PartitionAssignor | None, generation_marker: bool
) -> DecodedGroup:
    """Decode the JoinGroup response's member list (any consumer protocol version) as
    ``assignor``, the selected one, reads it (``None``: as the consumer protocol has it)."""
    in_user_data = assignor is not None and claims_in_user_data(assignor)
    subs: dict[MemberId, Subscription] = {}
    versions: dict[MemberId, int] = {}
    bad: list[MemberId] = []
    problems: list[str] = []
    ordered = sorted(members, key=_member_id)
    decoded = SubscriptionDecoder().decode_all_for_assignor(
        [(member.metadata, member.group_instance_id) for member in ordered]
    )
    for member, read in zip(ordered, decoded, strict=True):
        if isinstance(read, DecodeError):
            bad.append(member.member_id)
            problems.append(f"member {member.member_id!r}: undecodable subscription: {read}")
            continue
        version, sub = read
        if sub.generation < -1:  # forged or corrupt: no valid claim can carry it
            problems.append(
                f"member {member.member_id!r}: claims partitions under generation {sub.generation}; "
                "claims ignored"
            )
            sub = replace(sub, owned_partitions=(), generation=-1)
        if in_user_data:
            assert assignor is not None
            sub = _claims_from_user_data(assignor, member.member_id, sub, problems)
        if not generation_marker:
            sub = replace(sub, generation=-1)
        subs[member.member_id] = sub
        versions[member.member_id] = version
    return DecodedGroup(
        subscriptions=MappingProxyType(subs),
        versions=MappingProxyType(versions),
        undecodable=tuple(bad),
        problems=tuple(problems),
    )


def legacy_trust_claims(
    parts: Mapping[MemberId, Iterable[TopicPartition]], group: GroupSubscription
) -> dict[MemberId, tuple[TopicPartition, ...]]:
    """LEGACY, simulation only: Kafka's sticky assignor before KIP-341 (KAFKA-7026).

    Without a generation marker the old assignor started from every member's reported
    assignment as it was: a partition two members claimed stayed in both claimants' lists
    (only one was recorded as its owner, so moving it took it from that one alone). Modelled
    here as: every partition claimed by two or more members (that exist and that the claimant
    subscribes to) is assigned to exactly its claimants, whatever ``parts`` (the assignor,
    which voided the tied claims) did with it — so it is assigned to several members in one
    generation. Partitions only one member claims are left as ``parts`` has them. Never used
    with the marker on.
    """
    claimants: dict[TopicPartition, set[MemberId]] = {}
    for member, sub in group.members.items():
        topics = set(sub.topics)
        for tp in sub.owned_partitions:
            count = group.partitions_per_topic.get(tp.topic)
            if tp.topic in topics and count is not None and 0 <= tp.partition < count:
                claimants.setdefault(tp, set()).add(member)
    contested = {tp: who for tp, who in claimants.items() if len(who) > 1}
    out = {member: {tp for tp in mine if tp not in contested} for member, mine in parts.items()}
    for tp, who in contested.items():
        for member in who:
            out.setdefault(member, set()).add(tp)
    return {member: tuple(sorted(mine)) for member, mine in sorted(out.items())}


def lead(
    members: Iterable[JoinGroupMember],
    *,
    assignor: PartitionAssignor,
    partitions_per_topic: Mapping[str, int],
    generation_marker: bool = True,
) -> LeaderResult:
    """Compute and encode the group's assignment (module docstring), with the cyclic garbage
    collector paused (:func:`_collector_paused`). An assignor that owns its wire format
    (:class:`~streamtasks.membership.classic.foreign.ForeignProtocolAssignor`) leads itself."""
    if isinstance(assignor, ForeignProtocolAssignor):
        return assignor.lead_foreign(tuple(members), partitions_per_topic)
    with _collector_paused():
        return _lead(
            members,
            assignor=assignor,
            partitions_per_topic=partitions_per_topic,
            generation_marker=generation_marker,
        )


@contextmanager
def _collector_paused() -> Iterator[None]:
    """CPython's cyclic garbage collector paused, if it runs, until the block ends.

    A leader step of a big group allocates objects that outlive it -- at 10,000 members x
    100,000 partitions about 200,000 (partitions, tuples, subscriptions) -- and makes no
    reference cycles. With the collector running, those allocations set off young
    collections, and full ones over the whole process heap, which found nothing to free and
    took about half of the step (``benchmarks/assignors.py``, the leader table, measures the
    step both ways). Reference counting still frees what the step drops; the collector
    runs again when the block ends. Not re-entrant across threads: a thread that enables the
    collector meanwhile keeps it enabled."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _lead(
    members: Iterable[JoinGroupMember],
    *,
    assignor: PartitionAssignor,
    partitions_per_topic: Mapping[str, int],
    generation_marker: bool,
) -> LeaderResult:
    members = tuple(members)
    decoded = decode_members(members, assignor=assignor, generation_marker=generation_marker)
    problems = list(decoded.problems)
    topics = decoded.topics
    counts = {t: partitions_per_topic[t] for t in topics if t in partitions_per_topic}
    group, unknown = prune_unknown_topics(
        GroupSubscription(members=decoded.subscriptions, partitions_per_topic=counts)
    )
    if unknown:
        problems.append(f"no partition count for topics {list(unknown)}; left out of this assignment")
    protocol = max(assignor.supported_protocols())
    parts: Mapping[MemberId, tuple[TopicPartition, ...]] = {}
    user_data: Mapping[MemberId, bytes] = {}
    followup = False
    if group.members:
        try:
            result = cooperative_assign(assignor, group, protocol)
            parts, followup, user_data = result.members, result.followup_needed, result.user_data
        except AssignorError as exc:
            problems.append(f"assignor {assignor.name!r} failed, every member keeps its claims: {exc}")
            parts, followup = valid_claims(owned_from(group)), True
        if not generation_marker and claims_in_user_data(assignor):
            parts = legacy_trust_claims(parts, group)  # pre-KIP-341, simulation only
    # Every member of the JoinGroup response, in member-id order.
    ids = sorted(dict.fromkeys(m.member_id for m in members))
    # Already sorted: GroupAssignment sorts (from_sorted's callers guarantee it), and so do
    # valid_claims and legacy_trust_claims.
    mine = list(map(dict(parts).get, ids, repeat(())))
    highest = HIGHEST_CONSUMER_PROTOCOL_VERSION
    versions = map(min, map(dict(decoded.versions).get, ids, repeat(highest)), repeat(highest))
    data = AssignmentEncoder().encode_all(mine, list(map(dict(user_data).get, ids)), list(versions))
    encoded = bulk(SyncGroupAssignment, len(ids), {"member_id": ids, "assignment": data})
    assignment = dict(zip(ids, mine, strict=True))
    return LeaderResult(
        assignments=tuple(encoded),
        assignment=MappingProxyType(assignment),
        group_topics=topics,
        followup_needed=followup,
        problems=tuple(problems),
    )
