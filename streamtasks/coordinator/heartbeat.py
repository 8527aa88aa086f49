"""The ConsumerGroupHeartbeat write (seed KIP-848 "Request Handling", Kafka's
``GroupMetadataManager.consumerGroupHeartbeat``): validate, find or create the member, check
its epoch, record what changed, bump the group epoch when a new assignment is needed, compute
or request it, reconcile the member, and answer."""

from __future__ import annotations

import uuid
from dataclasses import replace

from streamtasks.coordinator.group import ConsumerGroup
from streamtasks.coordinator.reconcile import reconcile
from streamtasks.coordinator.records import (
    CurrentMemberAssignmentRecord,
    MemberMetadataRecord,
    TargetAssignmentMemberRecord,
)
from streamtasks.coordinator.result import Result
from streamtasks.coordinator.types import EMPTY_PARTITIONS, MemberState, TopicPartitionSet
from streamtasks.coordinator.update import GroupUpdate, WriteContext
from streamtasks.protocol.consumer_group import (
    JOIN_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    HeartbeatAssignment,
)
from streamtasks.protocol.errors import KafkaErrorCode

__all__ = ["heartbeat", "identity_problem", "needs_new_assignment", "take_over", "validate_heartbeat"]

Response = ConsumerGroupHeartbeatResponse


def _error(code: KafkaErrorCode, message: str, member_id: str | None = None) -> Response:
    return Response(
        error=code, error_message=message, member_id=member_id, member_epoch=0, heartbeat_interval_ms=0
    )


def identity_problem(group_id: str, member_id: str, instance_id: str | None, epoch: int) -> str | None:
    """What every heartbeat (consumer or streams group) must get right, or None: a group id, a
    member id, no empty instance id, an epoch of -2 or more, and -2 only for a static member."""
    if not group_id:
        return "GroupId can't be empty."
    if not member_id:
        return "MemberId can't be empty (the member generates it)."
    if instance_id == "":
        return "InstanceId can't be empty."
    if epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        return f"MemberEpoch {epoch} is invalid."
    if epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH and instance_id is None:
        return "InstanceId can't be null when leaving temporarily (MemberEpoch -2)."
    return None


def validate_heartbeat(request: ConsumerGroupHeartbeatRequest, ctx: WriteContext) -> Response | None:
    """The seed's request validation (INVALID_REQUEST) and the assignor check
    (UNSUPPORTED_ASSIGNOR); None when the request may be handled."""
    bad = KafkaErrorCode.INVALID_REQUEST
    epoch = request.member_epoch
    problem = identity_problem(request.group_id, request.member_id, request.instance_id, epoch)
    if problem is not None:
        return _error(bad, problem)
    # An empty regex is no regex: Apache Kafka 4.x reads "" as "not subscribed by pattern", and
    # librdkafka sends it beside its topic names.
    if request.subscribed_topic_regex:
        if request.subscribed_topic_names is not None:
            return _error(bad, "SubscribedTopicNames and SubscribedTopicRegex can't be used together.")
        return _error(bad, "SubscribedTopicRegex is not supported by this coordinator.")
    if epoch == JOIN_GROUP_MEMBER_EPOCH:
        if request.rebalance_timeout_ms <= 0:
            return _error(bad, "RebalanceTimeoutMs must be larger than zero when joining.")
        if request.subscribed_topic_names is None:
            return _error(bad, "SubscribedTopicNames must be set when joining.")
        if request.topic_partitions:
            return _error(bad, "TopicPartitions must be empty when joining.")
    elif request.rebalance_timeout_ms != -1 and request.rebalance_timeout_ms <= 0:
        return _error(bad, "RebalanceTimeoutMs must be -1 (unchanged) or larger than zero.")
    assignors = request.client_assignors or ()
    if request.server_assignor is not None and assignors:
        return _error(bad, "ServerAssignor and ClientAssignors can't be used together.")
    names = set()
    for a in assignors:
        if not a.name or a.name in names:
            return _error(bad, f"Assignor name {a.name!r} is empty or listed twice.")
        names.add(a.name)
        if a.minimum_version < -1 or a.maximum_version < 0 or a.maximum_version < a.minimum_version:
            return _error(
                bad, f"Assignor {a.name!r}: invalid version range {a.minimum_version}-{a.maximum_version}."
            )
        if not a.minimum_version <= a.metadata_version <= a.maximum_version:
            return _error(
                bad, f"Assignor {a.name!r}: MetadataVersion {a.metadata_version} is outside its range."
            )
    server = request.server_assignor
    if server is not None and (server not in ctx.config.server_assignors or server not in ctx.assignors):
        return _error(KafkaErrorCode.UNSUPPORTED_ASSIGNOR, f"Assignor {server!r} is not supported.")
    return None


def heartbeat(
    group: ConsumerGroup | None,
    request: ConsumerGroupHeartbeatRequest,
    ctx: WriteContext,
    *,
    client_id: str = "",
    client_host: str = "",
) -> Result[Response]:
    invalid = validate_heartbeat(request, ctx)
    u = GroupUpdate(group, request.group_id, ctx)
    if invalid is not None:
        return u.result(invalid)
    epoch, member_id = request.member_epoch, request.member_id
    known = u.member(member_id)
    if known is not None and known.classic is not None:
        # Kafka's rule: a member id of the classic protocol is unknown to this API.
        return u.result(
            _error(KafkaErrorCode.UNKNOWN_MEMBER_ID, "Member uses the classic protocol.", member_id)
        )
    if epoch == LEAVE_GROUP_MEMBER_EPOCH:
        return _leave(u, request)
    if epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        return _leave_temporarily(u, request)
    found = _join_or_check_epoch(u, request)
    if isinstance(found, Response):
        return u.result(found)
    old_member, current, frozen = found

    member = _updated_member(old_member, request, u.group_id, client_id, client_host)
    u.put_member(member)
    if old_member is None or needs_new_assignment(old_member, member):
        u.bump()
    if u.bumped or (u.group_epoch > u.assignment_epoch and u.client_request is None):
        # (the second case: nobody was asked for a client-side assignment: this member is)
        u.assign(asker=member_id)

    owned = (
        None if request.topic_partitions is None else TopicPartitionSet.from_wire(request.topic_partitions)
    )
    target = u.target(member_id)
    subscribed = u.topic_ids(member.subscribed_topic_names)
    nxt = (
        current
        if frozen
        else reconcile(
            current,
            target_epoch=u.assignment_epoch,
            target=target,
            subscribed_topic_ids=subscribed,
            owned=owned,
            owner_of=u.owner_of,
        )
    )
    before = u.current(member_id)
    u.put_current(nxt)
    joining = epoch == JOIN_GROUP_MEMBER_EPOCH
    should_compute = _arm_timers(
        u,
        ctx,
        member_id,
        before,
        nxt,
        rebalance_timeout_ms=member.rebalance_timeout_ms,
        revocation_restarts=joining and not frozen,
    )
    changed = nxt is not before or (owned is not None and owned != nxt.assigned)
    return u.result(
        Response(
            error=KafkaErrorCode.NONE,
            member_id=member_id,
            member_epoch=nxt.member_epoch,
            heartbeat_interval_ms=ctx.config.heartbeat_interval_ms,
            assignment=_assignment(nxt, target, subscribed) if joining or changed else None,
            should_compute_assignment=should_compute,
        )
    )


def _join_or_check_epoch(
    u: GroupUpdate, request: ConsumerGroupHeartbeatRequest
) -> tuple[MemberMetadataRecord | None, CurrentMemberAssignmentRecord, bool] | Response:
    """Who sends a heartbeat of epoch 0 or more: (its record before this heartbeat, its current
    assignment, frozen), frozen for a join from a member still in the group past epoch 0 (answered
    with its current epoch and assignment, which it does not change: see :func:`_join`); or the
    error to answer: an unknown member, or a fenced epoch (the member stays in the group)."""
    epoch, member_id = request.member_epoch, request.member_id
    if epoch == JOIN_GROUP_MEMBER_EPOCH:
        joined = _join(u, request)
        if isinstance(joined, Response):
            return joined
        old_member, current = joined
        frozen = (
            old_member is not None
            and u.group is not None
            and current is u.group.current(member_id)
            and current.member_epoch > 0
        )
        return old_member, current, frozen
    old_member, existing = u.member(member_id), u.current(member_id)
    if old_member is None or existing is None:
        return _error(KafkaErrorCode.UNKNOWN_MEMBER_ID, "Unknown member.", member_id)
    owned = (
        None if request.topic_partitions is None else TopicPartitionSet.from_wire(request.topic_partitions)
    )
    if not _epoch_is_valid(existing, epoch, owned):
        # FENCED_MEMBER_EPOCH, and nothing else (Apache Kafka's rule): the member stays, with its
        # epoch and partitions, until it rejoins at epoch 0 (answered with both, see _join) or
        # its session expires. Removing it here let a stray copy of an old heartbeat (a network
        # duplicate, whose answer the member discards) free a live member's partitions, and a
        # late copy of its join re-create it empty at the epoch it still held (sim seed 9872133).
        return _error(
            KafkaErrorCode.FENCED_MEMBER_EPOCH,
            f"Member epoch {epoch} is not the expected {existing.member_epoch}.",
            member_id,
        )
    return old_member, existing, False


def _arm_timers(
    u: GroupUpdate,
    ctx: WriteContext,
    member_id: str,
    before: CurrentMemberAssignmentRecord | None,
    nxt: CurrentMemberAssignmentRecord,
    *,
    rebalance_timeout_ms: int,
    revocation_restarts: bool,
) -> bool:
    """The member's session timer (restarted), its revocation timer (armed while it has
    partitions to revoke: restarted when its assignment moved or ``revocation_restarts``,
    cancelled once it has none) and the group's assignment timer when this member is the one
    asked to compute the assignment; returns whether it is (``should_compute_assignment``)."""
    now = ctx.now_ms
    u.schedule(u.session_timer(member_id), now + ctx.config.session_timeout_ms)
    revocation = u.revocation_timer(member_id)
    if nxt.state is MemberState.UNREVOKED_PARTITIONS:
        if revocation_restarts or before is None or before is not nxt:
            u.schedule(revocation, now + rebalance_timeout_ms)
    elif before is None or before.state is MemberState.UNREVOKED_PARTITIONS:
        u.cancel(revocation)
    should_compute = u.client_request is not None and u.client_request.member_id == member_id
    if should_compute and not u.assignment_timer_armed:
        u.schedule(u.assignment_timer, now + rebalance_timeout_ms)
    return should_compute


def _epoch_is_valid(
    current: CurrentMemberAssignmentRecord, epoch: int, owned: TopicPartitionSet | None
) -> bool:
    if epoch == current.member_epoch:
        return True
    # The response that moved the member to its epoch may have been lost: it comes back with
    # the previous epoch, owning no more than it was given in the new one.
    return epoch == current.previous_member_epoch and owned is not None and owned.issubset(current.assigned)


def _join(
    u: GroupUpdate, request: ConsumerGroupHeartbeatRequest
) -> tuple[MemberMetadataRecord | None, CurrentMemberAssignmentRecord] | Response:
    member_id, gid = request.member_id, u.group_id
    old_member = u.member(member_id)
    instance_id = request.instance_id
    holder = u.group.static_member(instance_id) if u.group is not None and instance_id is not None else None
    if holder is not None and holder != member_id:
        held = u.current(holder)
        holder_member = u.member(holder)
        classic_holder = holder_member is not None and holder_member.classic is not None
        if held is None or (held.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH and not classic_holder):
            return _error(
                KafkaErrorCode.UNRELEASED_INSTANCE_ID,
                f"Instance id {instance_id!r} is still held by member {holder!r}.",
                member_id,
            )
        # (a classic holder is replaced at once, as Kafka does when either side is classic,
        # at the epoch it is in: it never left with -2)
        return take_over(u, holder, member_id, held, epoch=held.member_epoch if classic_holder else None)
    if old_member is None:
        limit = u.ctx.config.max_group_size
        if limit is not None and u.member_count() >= limit:
            return _error(
                KafkaErrorCode.GROUP_MAX_SIZE_REACHED, f"The group is full ({limit} members).", member_id
            )
        fresh = CurrentMemberAssignmentRecord(
            group_id=gid, member_id=member_id, member_epoch=0, previous_member_epoch=-1
        )
        return None, fresh
    existing = u.current(member_id)
    if existing is not None and existing.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        return take_over(u, member_id, member_id, existing)
    if existing is not None:
        # A join from a member that is still in the group: the retry of a join whose response
        # was lost, or a late copy of an old join while the member owns (and may be revoking)
        # partitions. Never a reset, and past epoch 0 not even a reconciliation: the response
        # repeats the member's epoch and assignment, and a late copy, whose response nobody
        # reads, changes nothing the member would have to learn from it.
        return old_member, existing
    return old_member, CurrentMemberAssignmentRecord(
        group_id=gid, member_id=member_id, member_epoch=0, previous_member_epoch=-1
    )


def take_over(
    u: GroupUpdate,
    old_id: str,
    new_id: str,
    held: CurrentMemberAssignmentRecord,
    *,
    epoch: int | None = None,
) -> tuple[MemberMetadataRecord | None, CurrentMemberAssignmentRecord]:
    """A static member rejoins: the new member takes the old one's place and partitions, at
    the epoch it had before it left (or ``epoch``: 0 when a classic member replaces it)."""
    old_member = u.member(old_id)
    restored_epoch = held.previous_member_epoch if epoch is None else epoch
    restored = replace(
        held,
        member_id=new_id,
        member_epoch=restored_epoch,
        previous_member_epoch=restored_epoch,
    )
    if old_id != new_id:
        target = u.target(old_id)
        u.remove_member(old_id)
        u.removed.discard(old_id)
        u.aliases[old_id] = new_id
        if target is not None:
            u.emit(replace(target, member_id=new_id))
        u.rename_client_request(old_id, new_id)
        u.emit(restored)
        old_member = None if old_member is None else replace(old_member, member_id=new_id)
    return old_member, restored


def _updated_member(
    old: MemberMetadataRecord | None,
    request: ConsumerGroupHeartbeatRequest,
    group_id: str,
    client_id: str,
    client_host: str,
) -> MemberMetadataRecord:
    base = old or MemberMetadataRecord(group_id=group_id, member_id=request.member_id)
    changes: dict[str, object] = {}
    if base.classic is not None:  # a consumer-protocol member took a classic member's place
        changes["classic"] = None
    if request.instance_id is not None:
        changes["instance_id"] = request.instance_id
    if request.rack_id is not None:
        changes["rack_id"] = request.rack_id
    if request.rebalance_timeout_ms > 0:
        changes["rebalance_timeout_ms"] = request.rebalance_timeout_ms
    if request.subscribed_topic_names is not None:
        changes["subscribed_topic_names"] = tuple(sorted(set(request.subscribed_topic_names)))
    if request.server_assignor is not None:
        changes["server_assignor"] = request.server_assignor
        changes["client_assignors"] = ()
    if request.client_assignors is not None:
        changes["client_assignors"] = request.client_assignors
        if request.client_assignors:
            changes["server_assignor"] = None
    if client_id and client_id != base.client_id:
        changes["client_id"] = client_id
    if client_host and client_host != base.client_host:
        changes["client_host"] = client_host
    if not changes:
        return base
    updated = replace(base, **changes)  # type: ignore[arg-type]
    return base if updated == base else updated


def needs_new_assignment(old: MemberMetadataRecord, new: MemberMetadataRecord) -> bool:
    """What bumps the group epoch: subscription, assignor, assignor metadata or reason, rack."""
    return (
        old.subscribed_topic_names != new.subscribed_topic_names
        or old.server_assignor != new.server_assignor
        or old.client_assignors != new.client_assignors
        or old.rack_id != new.rack_id
    )


def _assignment(
    current: CurrentMemberAssignmentRecord,
    target: TargetAssignmentMemberRecord | None,
    subscribed: frozenset[uuid.UUID],
) -> HeartbeatAssignment:
    pending = EMPTY_PARTITIONS
    if current.state is MemberState.UNRELEASED_PARTITIONS and target is not None:
        pending = target.partitions.only_topics(subscribed).difference(current.assigned)
    return HeartbeatAssignment(
        topic_partitions=current.assigned.to_wire(),
        pending_topic_partitions=pending.to_wire(),
        error=current.error,
        metadata_version=current.metadata_version,
        metadata_bytes=current.metadata_bytes,
    )


def _leave(u: GroupUpdate, request: ConsumerGroupHeartbeatRequest) -> Result[Response]:
    member_id = request.member_id
    if u.member(member_id) is None:
        return u.result(_error(KafkaErrorCode.UNKNOWN_MEMBER_ID, "Unknown member.", member_id))
    u.remove_member(member_id)
    u.bump()
    u.assign()
    return u.result(
        Response(
            error=KafkaErrorCode.NONE,
            member_id=member_id,
            member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
            heartbeat_interval_ms=0,
        )
    )


def _leave_temporarily(u: GroupUpdate, request: ConsumerGroupHeartbeatRequest) -> Result[Response]:
    """Epoch -2: the static member keeps its partitions (nobody else gets them) until it
    rejoins or its session times out."""
    member_id = request.member_id
    member, current = u.member(member_id), u.current(member_id)
    if member is None or current is None or member.instance_id != request.instance_id:
        return u.result(_error(KafkaErrorCode.UNKNOWN_MEMBER_ID, "Unknown static member.", member_id))
    if current.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        u.put_current(
            replace(
                current,
                member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH,
                previous_member_epoch=current.member_epoch,
            )
        )
    u.schedule(u.session_timer(member_id), u.ctx.now_ms + u.ctx.config.session_timeout_ms)
    u.cancel(u.revocation_timer(member_id))
    request_ = u.client_request
    if request_ is not None and request_.member_id == member_id:
        u.ask_member(previous=member_id, skip_previous=True)
    return u.result(
        Response(
            error=KafkaErrorCode.NONE,
            member_id=member_id,
            member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH,
            heartbeat_interval_ms=0,
        )
    )
