"""Reconciliation, Kafka's ``CurrentAssignmentBuilder``: a member's current assignment, its
target and the partitions it says it owns in, the member's next current assignment out.

Revoke before assign: while a member still owns partitions it must give up, it stays in its
epoch (UNREVOKED_PARTITIONS) and gets nothing new. Once it acknowledged the revocation (the
partitions are gone from what it reports owning) it moves to the target epoch and gets every
target partition nobody else owns; the rest wait (UNRELEASED_PARTITIONS) until their previous
owner released them, so a partition is never owned by two members.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import replace

from streamtasks.coordinator.records import CurrentMemberAssignmentRecord, TargetAssignmentMemberRecord
from streamtasks.coordinator.types import EMPTY_PARTITIONS, MemberState, TopicPartitionSet
from streamtasks.protocol.consumer_group import LEAVE_GROUP_STATIC_MEMBER_EPOCH

__all__ = ["OwnerOf", "reconcile"]

#: The member that owns a partition now (assigned or pending revocation), or None.
OwnerOf = Callable[[uuid.UUID, int], str | None]


def _owns_any(owned: TopicPartitionSet | None, partitions: TopicPartitionSet) -> bool:
    """Whether the member still owns one of ``partitions``; not knowing (None) counts as yes."""
    if owned is None:
        return True
    return any(owned.get(t) & p for t, p in partitions.items())


def reconcile(
    current: CurrentMemberAssignmentRecord,
    *,
    target_epoch: int,
    target: TargetAssignmentMemberRecord | None,
    subscribed_topic_ids: frozenset[uuid.UUID],
    owned: TopicPartitionSet | None,
    owner_of: OwnerOf,
) -> CurrentMemberAssignmentRecord:
    """The member's next current assignment (``current`` itself when nothing changes).

    ``owned``: the partitions the member reported in this heartbeat (None when it did not).
    ``subscribed_topic_ids``: topics it subscribes to now; partitions of other topics are
    revoked even before a new target says so (subscription consistency)."""
    if current.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        return current
    state = current.state
    if state is MemberState.STABLE and current.member_epoch == target_epoch:
        return _strip_unsubscribed(current, subscribed_topic_ids, owned)
    if state is MemberState.UNREVOKED_PARTITIONS and _owns_any(owned, current.pending_revocation):
        return _strip_unsubscribed(current, subscribed_topic_ids, owned)
    return _next(
        current,
        target_epoch=target_epoch,
        target=target,
        subscribed=subscribed_topic_ids,
        owned=owned,
        owner_of=owner_of,
    )


def _strip_unsubscribed(
    current: CurrentMemberAssignmentRecord,
    subscribed: frozenset[uuid.UUID],
    owned: TopicPartitionSet | None,
) -> CurrentMemberAssignmentRecord:
    kept = current.assigned.only_topics(subscribed)
    if kept is current.assigned:
        return current
    revoked = current.pending_revocation.union(current.assigned.difference(kept))
    if _owns_any(owned, revoked):
        return replace(
            current, state=MemberState.UNREVOKED_PARTITIONS, assigned=kept, pending_revocation=revoked
        )
    return replace(current, assigned=kept)


def _next(
    current: CurrentMemberAssignmentRecord,
    *,
    target_epoch: int,
    target: TargetAssignmentMemberRecord | None,
    subscribed: frozenset[uuid.UUID],
    owned: TopicPartitionSet | None,
    owner_of: OwnerOf,
) -> CurrentMemberAssignmentRecord:
    member_id = current.member_id
    wanted = EMPTY_PARTITIONS if target is None else target.partitions.only_topics(subscribed)
    kept = current.assigned.intersection(wanted)
    revoking = current.assigned.difference(kept)
    if revoking and _owns_any(owned, revoking):
        return _with(
            current,
            epoch=current.member_epoch,
            state=MemberState.UNREVOKED_PARTITIONS,
            assigned=kept,
            pending_revocation=revoking,
            target=None,
        )
    free: dict[uuid.UUID, set[int]] = {}
    unreleased = False
    for topic_id, partitions in wanted.difference(kept).items():
        for partition in partitions:
            owner = owner_of(topic_id, partition)
            if owner is None or owner == member_id:
                free.setdefault(topic_id, set()).add(partition)
            else:
                unreleased = True
    assigned = kept.union(TopicPartitionSet(free)) if free else kept
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return _with(
        current,
        epoch=target_epoch,
        state=state,
        assigned=assigned,
        pending_revocation=EMPTY_PARTITIONS,
        target=target,
    )


def _with(
    current: CurrentMemberAssignmentRecord,
    *,
    epoch: int,
    state: MemberState,
    assigned: TopicPartitionSet,
    pending_revocation: TopicPartitionSet,
    target: TargetAssignmentMemberRecord | None,
) -> CurrentMemberAssignmentRecord:
    previous = current.previous_member_epoch if epoch == current.member_epoch else current.member_epoch
    error, version, metadata = current.error, current.metadata_version, current.metadata_bytes
    if epoch != current.member_epoch:
        # Moving to the target epoch: the target's assignment metadata is final for this epoch.
        error, version, metadata = (
            (0, 0, b"")
            if target is None
            else (
                target.error,
                target.metadata_version,
                target.metadata_bytes,
            )
        )
    nxt = CurrentMemberAssignmentRecord(
        group_id=current.group_id,
        member_id=current.member_id,
        member_epoch=epoch,
        previous_member_epoch=previous,
        state=state,
        assigned=assigned,
        pending_revocation=pending_revocation,
        error=error,
        metadata_version=version,
        metadata_bytes=metadata,
    )
    return current if nxt == current else nxt
