"""Classic-protocol members of a consumer group (KIP-848 "Supporting Online Consumer Group
Upgrade"; Kafka's ``classicGroupJoinToConsumerGroup``, ``...SyncToConsumerGroup``,
``...HeartbeatToConsumerGroup``, ``...LeaveToConsumerGroup``).

A JoinGroup makes the sender a member of the consumer group: its subscription (the consumer
protocol bytes of its first protocol) gives its topics, rack and the partitions it owns; its
protocols and session timeout are kept in the member record (``ClassicMemberMetadata``). The
group's target comes from the server-side assignor (a classic member has no client-side one,
so no group with one runs client-side assignment), and the member is reconciled as a
consumer-protocol member is, with the owned partitions of its join as what it reports owning:
revoke before assign, never a partition another member still owns. Its member epoch is its
generation. The join is answered once the member can be given its next epoch, else parked
(``parked.py``); SyncGroup hands it its current assignment as consumer-protocol Assignment bytes;
Heartbeat tells it to rejoin (REBALANCE_IN_PROGRESS) while the group has moved on or it has
something to revoke or to collect; LeaveGroup removes members.

Deviation from Kafka: a group of classic members only stays a consumer group here (Kafka
converts it back to a classic group when its last consumer-protocol member leaves).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace

from streamtasks.coordinator.group import ConsumerGroup
from streamtasks.coordinator.heartbeat import needs_new_assignment, take_over
from streamtasks.coordinator.parked import (
    ParkedJoin,
    answer_join,
    can_answer,
    reconcile_classic,
    settle_parked,
)
from streamtasks.coordinator.records import (
    ClassicMemberMetadata,
    CurrentMemberAssignmentRecord,
    MemberMetadataRecord,
)
from streamtasks.coordinator.result import Result
from streamtasks.coordinator.types import MemberState, TopicPartitionSet
from streamtasks.coordinator.update import GroupUpdate, WriteContext
from streamtasks.errors import DecodeError
from streamtasks.protocol.classic_group import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from streamtasks.protocol.consumer_protocol import (
    CONSUMER_PROTOCOL_TYPE,
    HIGHEST_CONSUMER_PROTOCOL_VERSION,
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
    decode_subscription,
    encode_assignment,
)
from streamtasks.protocol.errors import KafkaErrorCode
from topology.ids import TopicPartition

__all__ = [
    "LeaveGroupMember",
    "LeaveGroupMemberResult",
    "LeaveGroupsRequest",
    "LeaveGroupsResponse",
    "heartbeat",
    "join_group",
    "leave_group",
    "on_classic_timer",
    "sync_group",
]

#: JoinGroup v4+: a dynamic member without a member id is given one and asked to rejoin with it.
_MEMBER_ID_REQUIRED_SINCE = 4


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaveGroupMember:
    """One member of a LeaveGroup (v3+ lists several; older versions name one member id)."""

    member_id: str
    instance_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaveGroupsRequest:
    group_id: str
    members: tuple[LeaveGroupMember, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaveGroupMemberResult:
    member_id: str
    instance_id: str | None
    error: KafkaErrorCode


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaveGroupsResponse:
    error: KafkaErrorCode
    members: tuple[LeaveGroupMemberResult, ...] = ()


def _join_error(code: KafkaErrorCode, member_id: str = "") -> JoinGroupResponse:
    return JoinGroupResponse(error=code, member_id=member_id)


def _owned_ids(u: GroupUpdate, owned: tuple[TopicPartition, ...]) -> TopicPartitionSet:
    """The subscription's owned partitions by topic id (partitions of unknown topics dropped)."""
    by_name = {t.name: t.topic_id for t in u.partition_metadata}
    image = u.ctx.image.by_name
    pairs: list[tuple[uuid.UUID, int]] = []
    for tp in owned:
        topic_id = by_name.get(tp.topic)
        if topic_id is None and tp.topic in image:
            topic_id = image[tp.topic].topic_id
        if topic_id is not None:
            pairs.append((topic_id, tp.partition))
    return TopicPartitionSet.from_pairs(pairs)


def join_group(
    group: ConsumerGroup | None,
    request: JoinGroupRequest,
    ctx: WriteContext,
    *,
    new_member_id: str,
    api_version: int,
    client_id: str = "",
    client_host: str = "",
) -> Result[JoinGroupResponse | None]:
    """JoinGroup. The response is None when the join is parked: a later write's
    ``Result.joins`` answers it. ``new_member_id``: the id a member without one gets (the host
    makes it; the core draws nothing at random)."""
    u = GroupUpdate(group, request.group_id, ctx)
    config = ctx.config
    if not request.group_id:
        return u.result(_join_error(KafkaErrorCode.INVALID_GROUP_ID))
    if (
        not config.classic_min_session_timeout_ms
        <= request.session_timeout_ms
        <= (config.classic_max_session_timeout_ms)
    ):
        return u.result(_join_error(KafkaErrorCode.INVALID_SESSION_TIMEOUT, request.member_id))
    unknown = not request.member_id
    member_id = new_member_id if unknown else request.member_id
    names = frozenset(p.name for p in request.protocols)
    if (
        request.protocol_type != CONSUMER_PROTOCOL_TYPE
        or not request.protocols
        or (group is not None and not group.supports_classic_protocols(names, member_id=member_id))
    ):
        return u.result(_join_error(KafkaErrorCode.INCONSISTENT_GROUP_PROTOCOL, request.member_id))
    instance_id = request.group_instance_id
    if unknown and instance_id is None and api_version >= _MEMBER_ID_REQUIRED_SINCE:
        return u.result(_join_error(KafkaErrorCode.MEMBER_ID_REQUIRED, member_id))
    try:
        subscription = decode_subscription(request.protocols[0].metadata)
    except DecodeError:
        return u.result(_join_error(KafkaErrorCode.INCONSISTENT_GROUP_PROTOCOL, request.member_id))

    found = _join_member(u, member_id, instance_id, unknown, claims=bool(subscription.owned_partitions))
    if isinstance(found, KafkaErrorCode):
        return u.result(_join_error(found, member_id))
    old_member, current = found
    member = _classic_member(
        old_member,
        group_id=u.group_id,
        member_id=member_id,
        request=request,
        subscription=subscription,
        client_id=client_id,
        client_host=client_host,
    )
    u.put_member(member)
    if old_member is None or needs_new_assignment(old_member, member):
        u.bump()
    if u.bumped or (u.group_epoch > u.assignment_epoch and u.client_request is None):
        u.assign()

    owned = _owned_ids(u, subscription.owned_partitions)
    nxt = reconcile_classic(u, member_id, owned, current=current)
    assert nxt is not None
    if can_answer(u, nxt):
        response = answer_join(u, member_id, nxt)
        u.answer_parked(member_id, response)  # an earlier copy of this join, if one is parked
        return u.result(response)
    u.put_current(nxt)
    u.park(ParkedJoin(group_id=u.group_id, member_id=member_id, owned=owned))
    now = ctx.now_ms
    u.schedule(u.join_timer(member_id), now + member.rebalance_timeout_ms)
    u.schedule(
        u.session_timer(member_id),
        now + max(request.session_timeout_ms, member.rebalance_timeout_ms),
    )
    return u.result(None)


def _join_member(
    u: GroupUpdate, member_id: str, instance_id: str | None, unknown: bool, *, claims: bool
) -> tuple[MemberMetadataRecord | None, CurrentMemberAssignmentRecord] | KafkaErrorCode:
    """The member before this join and its current assignment (a fresh one for a new member).

    ``claims``: the join's subscription names owned partitions. A dynamic member id the group
    does not have is a new member when it claims nothing (the id MEMBER_ID_REQUIRED just gave
    out, which the group does not remember); claiming partitions, it is a member the group
    removed (its session expired while its JoinGroup went unanswered) whose partitions may be
    another member's by now: UNKNOWN_MEMBER_ID, so it gives them up as lost and joins afresh,
    as a static member in that spot does (docs/protocol.md; the simulator found it, seed 97 of
    ``--protocol mixed``)."""
    fresh = CurrentMemberAssignmentRecord(
        group_id=u.group_id, member_id=member_id, member_epoch=0, previous_member_epoch=-1
    )
    holder = None if instance_id is None or u.group is None else u.group.static_member(instance_id)
    if instance_id is not None and holder is not None and holder != member_id:
        if not unknown:
            return KafkaErrorCode.FENCED_INSTANCE_ID
        held = u.current(holder)
        if held is None:
            return KafkaErrorCode.UNKNOWN_MEMBER_ID
        # A static member restarted: it replaces the holder, whichever protocol that used.
        return take_over(u, holder, member_id, held, epoch=0)
    if instance_id is not None and holder is None and not unknown:
        return KafkaErrorCode.UNKNOWN_MEMBER_ID
    old_member = u.member(member_id)
    if old_member is not None and old_member.classic is None:
        return KafkaErrorCode.UNKNOWN_MEMBER_ID  # a consumer-protocol member's id
    if old_member is None and not unknown and instance_id is None and claims:
        return KafkaErrorCode.UNKNOWN_MEMBER_ID  # removed while it waited: a zombie
    if old_member is None:
        limit = u.ctx.config.max_group_size
        if limit is not None and u.member_count() >= limit:
            return KafkaErrorCode.GROUP_MAX_SIZE_REACHED
    current = u.current(member_id)
    return old_member, fresh if current is None else current


def _classic_member(
    old: MemberMetadataRecord | None,
    *,
    group_id: str,
    member_id: str,
    request: JoinGroupRequest,
    subscription: ConsumerProtocolSubscription,
    client_id: str,
    client_host: str,
) -> MemberMetadataRecord:
    base = old or MemberMetadataRecord(group_id=group_id, member_id=member_id)
    rebalance_timeout_ms = (
        request.rebalance_timeout_ms if request.rebalance_timeout_ms > 0 else request.session_timeout_ms
    )
    updated = replace(
        base,
        instance_id=request.group_instance_id,
        rack_id=subscription.rack_id,
        client_id=client_id or base.client_id,
        client_host=client_host or base.client_host,
        subscribed_topic_names=tuple(sorted(set(subscription.topics))),
        server_assignor=None,
        client_assignors=(),
        rebalance_timeout_ms=rebalance_timeout_ms,
        classic=ClassicMemberMetadata(
            session_timeout_ms=request.session_timeout_ms,
            protocols=tuple((p.name, p.metadata) for p in request.protocols),
        ),
    )
    return base if updated == base else updated


def _classic_member_of(
    u: GroupUpdate, member_id: str, instance_id: str | None, generation_id: int
) -> tuple[MemberMetadataRecord, ClassicMemberMetadata, CurrentMemberAssignmentRecord] | KafkaErrorCode:
    """Kafka's ``validateConsumerGroupMember``, the classic-protocol check and the generation
    check of SyncGroup and Heartbeat."""
    if instance_id is not None:
        holder = None if u.group is None else u.group.static_member(instance_id)
        if holder is None:
            return KafkaErrorCode.UNKNOWN_MEMBER_ID
        if holder != member_id:
            return KafkaErrorCode.FENCED_INSTANCE_ID
    member, current = u.member(member_id), u.current(member_id)
    if member is None or current is None or member.classic is None:
        return KafkaErrorCode.UNKNOWN_MEMBER_ID
    if generation_id != current.member_epoch:
        return KafkaErrorCode.ILLEGAL_GENERATION
    return member, member.classic, current


def _must_rejoin(u: GroupUpdate, member_id: str, rebalance_timeout_ms: int) -> None:
    """The member is told to rejoin: it must within its rebalance timeout (unless already told)."""
    key = u.join_timer(member_id)
    if not u.ctx.timers.is_armed(key):
        u.schedule(key, u.ctx.now_ms + rebalance_timeout_ms)


def sync_group(
    group: ConsumerGroup | None, request: SyncGroupRequest, ctx: WriteContext
) -> Result[SyncGroupResponse]:
    u = GroupUpdate(group, request.group_id, ctx)
    found = _classic_member_of(u, request.member_id, request.group_instance_id, request.generation_id)
    if isinstance(found, KafkaErrorCode):
        return u.result(SyncGroupResponse(error=found))
    member, classic, current = found
    protocol_name = classic.protocol_name
    if (request.protocol_type is not None and request.protocol_type != CONSUMER_PROTOCOL_TYPE) or (
        request.protocol_name is not None and request.protocol_name != protocol_name
    ):
        return u.result(SyncGroupResponse(error=KafkaErrorCode.INCONSISTENT_GROUP_PROTOCOL))
    if u.group_epoch > current.member_epoch and current.state is not MemberState.UNREVOKED_PARTITIONS:
        _must_rejoin(u, request.member_id, member.rebalance_timeout_ms)
        return u.result(SyncGroupResponse(error=KafkaErrorCode.REBALANCE_IN_PROGRESS))
    u.cancel(u.sync_timer(request.member_id))
    u.schedule(u.session_timer(request.member_id), ctx.now_ms + classic.session_timeout_ms)
    return u.result(
        SyncGroupResponse(
            error=KafkaErrorCode.NONE,
            protocol_type=CONSUMER_PROTOCOL_TYPE,
            protocol_name=protocol_name,
            assignment=_assignment_bytes(u, classic, current.assigned),
        )
    )


def _assignment_bytes(u: GroupUpdate, classic: ClassicMemberMetadata, assigned: TopicPartitionSet) -> bytes:
    """The member's partitions as a consumer-protocol Assignment, at the version of its
    subscription (Kafka's choice), with empty user data."""
    metadata = classic.protocols[0][1] if classic.protocols else b""
    version = int.from_bytes(metadata[:2], "big", signed=True) if len(metadata) >= 2 else 0
    version = min(max(version, 0), HIGHEST_CONSUMER_PROTOCOL_VERSION)
    names = {t.topic_id: t.name for t in u.partition_metadata}
    partitions = []
    for item in assigned.to_wire():
        topic = names.get(item.topic_id)
        if topic is None:
            known = u.ctx.image.by_id.get(item.topic_id)
            if known is None:
                continue
            topic = known.name
        partitions += [TopicPartition(topic, p) for p in item.partitions]
    return encode_assignment(
        ConsumerProtocolAssignment(assigned_partitions=tuple(partitions), user_data=b""), version
    )


def _waiting_on_unreleased(u: GroupUpdate, member_id: str, current: CurrentMemberAssignmentRecord) -> bool:
    """Kafka's ``waitingOnUnreleasedPartition``: a target partition the member does not have
    yet is still owned by another member."""
    target = u.target(member_id)
    if current.state is not MemberState.UNRELEASED_PARTITIONS or target is None:
        return False
    for topic_id, partitions in target.partitions.difference(current.assigned).items():
        for partition in partitions:
            owner = u.owner_of(topic_id, partition)
            if owner is not None and owner != member_id:
                return True
    return False


def heartbeat(
    group: ConsumerGroup | None, request: HeartbeatRequest, ctx: WriteContext
) -> Result[HeartbeatResponse]:
    u = GroupUpdate(group, request.group_id, ctx)
    found = _classic_member_of(u, request.member_id, request.group_instance_id, request.generation_id)
    if isinstance(found, KafkaErrorCode):
        return u.result(HeartbeatResponse(error=found))
    member, classic, current = found
    parked = request.member_id in u.parked_joins()
    if not parked:  # a parked member's session runs to its join deadline
        u.schedule(u.session_timer(request.member_id), ctx.now_ms + classic.session_timeout_ms)
    if (
        parked
        or current.member_epoch < u.group_epoch
        or current.state is MemberState.UNREVOKED_PARTITIONS
        or (
            current.state is MemberState.UNRELEASED_PARTITIONS
            and not _waiting_on_unreleased(u, request.member_id, current)
        )
    ):
        if not parked:
            _must_rejoin(u, request.member_id, member.rebalance_timeout_ms)
        return u.result(HeartbeatResponse(error=KafkaErrorCode.REBALANCE_IN_PROGRESS))
    return u.result(HeartbeatResponse(error=KafkaErrorCode.NONE))


def leave_group(
    group: ConsumerGroup | None, request: LeaveGroupsRequest, ctx: WriteContext
) -> Result[LeaveGroupsResponse]:
    """LeaveGroup: each listed classic member is removed (by member id, or by instance id for a
    static member, where an empty member id is an administrative removal)."""
    u = GroupUpdate(group, request.group_id, ctx)
    if group is None:
        return u.result(LeaveGroupsResponse(error=KafkaErrorCode.UNKNOWN_MEMBER_ID))
    results = []
    removed = False
    for who in request.members:
        member_id, error = who.member_id, KafkaErrorCode.NONE
        if who.instance_id is not None:
            holder = group.static_member(who.instance_id)
            if holder is None or holder in u.removed:
                error = KafkaErrorCode.UNKNOWN_MEMBER_ID
            elif member_id and member_id != holder:
                error = KafkaErrorCode.FENCED_INSTANCE_ID
            else:
                member_id = holder
        if error is KafkaErrorCode.NONE:
            member = u.member(member_id)
            if member is None or member.classic is None:
                error = KafkaErrorCode.UNKNOWN_MEMBER_ID
            else:
                u.remove_member(member_id)
                removed = True
        results.append(LeaveGroupMemberResult(member_id=member_id, instance_id=who.instance_id, error=error))
    if removed:
        u.bump()
        u.assign()
    return u.result(LeaveGroupsResponse(error=KafkaErrorCode.NONE, members=tuple(results)))


def on_classic_timer(u: GroupUpdate, member_id: str, *, join: bool) -> None:
    """A classic member's JOIN timer (``join``) or SYNC timer fired. A parked join is answered
    with what the member can have now; a member that did not rejoin or sync in time is
    removed."""
    member = u.member(member_id)
    if member is None or member.classic is None:
        return
    if join and member_id in u.parked_joins():
        settle_parked(u, force=member_id)
        return
    u.remove_member(member_id)
    u.bump()
    u.assign()
