"""Reconciliation of a streams member (Kafka's streams ``CurrentAssignmentBuilder``): its current
assignment, its target and the tasks it says it owns in, its next current assignment out.

Revoke before assign, for active tasks: while a member still owns active tasks its target
drops, it stays in its epoch (UNREVOKED_TASKS) and gets nothing new. Once the tasks are gone
from what it reports, it moves to the target epoch and gets every target active task no other
member owns; the rest wait (UNRELEASED_TASKS) until their owner released them, so an active
task is never owned by two members. Standby and warm-up tasks need no hand-over: a member
gets its target's at once when it moves to the target epoch (while revoking it keeps only
those its target still has), and a standby or warm-up whose task its target makes active stays
a warm-up while the task waits for its previous owner (the hand-over loses no restoring)."""

from __future__ import annotations

from collections.abc import Callable

from streamtasks.coordinator.streams.records import (
    NO_TASKS,
    StreamsCurrentAssignmentRecord,
    StreamsMemberState,
    StreamsTargetMemberRecord,
    TaskSet,
)
from streamtasks.membership.streams.records import Task
from streamtasks.protocol.consumer_group import LEAVE_GROUP_STATIC_MEMBER_EPOCH

__all__ = ["OwnerOf", "reconcile"]

#: The member that owns an active task now, or None.
OwnerOf = Callable[[Task], str | None]


def reconcile(
    current: StreamsCurrentAssignmentRecord,
    *,
    target_epoch: int,
    target: StreamsTargetMemberRecord | None,
    owned_active: TaskSet | None,
    owner_of: OwnerOf,
) -> StreamsCurrentAssignmentRecord:
    """The member's next current assignment (``current`` itself when nothing changes).
    ``owned_active``: the active tasks the member reported now (None: it did not say)."""
    if current.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        return current
    state = current.state
    if state is StreamsMemberState.STABLE and current.member_epoch == target_epoch:
        return current
    if state is StreamsMemberState.UNREVOKED_TASKS and _owns_any(owned_active, current.pending_revocation):
        return current
    want_active = NO_TASKS if target is None else target.active
    kept = current.active & want_active
    revoking = current.active - kept
    if revoking and _owns_any(owned_active, revoking):
        return _with(
            current,
            epoch=current.member_epoch,
            state=StreamsMemberState.UNREVOKED_TASKS,
            active=kept,
            standby=current.standby & (NO_TASKS if target is None else target.standby),
            warmup=current.warmup & (NO_TASKS if target is None else target.warmup),
            pending=revoking,
        )
    free = {t for t in want_active - kept if owner_of(t) in (None, current.member_id)}
    # a task still held by its previous owner stays warming up here until it is released
    waiting = (want_active - kept - free) & (current.warmup | current.standby)
    return _with(
        current,
        epoch=target_epoch,
        state=StreamsMemberState.UNRELEASED_TASKS
        if len(free) < len(want_active - kept)
        else StreamsMemberState.STABLE,
        active=kept | free,
        standby=NO_TASKS if target is None else target.standby,
        warmup=(NO_TASKS if target is None else target.warmup) | waiting,
        pending=NO_TASKS,
    )


def _owns_any(owned: TaskSet | None, tasks: TaskSet) -> bool:
    """Whether the member still owns one of ``tasks``; not knowing (None) counts as yes."""
    return owned is None or not owned.isdisjoint(tasks)


def _with(
    current: StreamsCurrentAssignmentRecord,
    *,
    epoch: int,
    state: StreamsMemberState,
    active: TaskSet,
    standby: TaskSet,
    warmup: TaskSet,
    pending: TaskSet,
) -> StreamsCurrentAssignmentRecord:
    previous = current.previous_member_epoch if epoch == current.member_epoch else current.member_epoch
    nxt = StreamsCurrentAssignmentRecord(
        group_id=current.group_id,
        member_id=current.member_id,
        member_epoch=epoch,
        previous_member_epoch=previous,
        state=state,
        active=frozenset(active),
        standby=frozenset(standby - active),
        warmup=frozenset(warmup - active),
        pending_revocation=frozenset(pending),
    )
    return current if nxt == current else nxt
