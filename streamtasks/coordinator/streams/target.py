"""When a streams group's target is computed, and writing it (Apache Kafka 4.4's
``GroupMetadataManager.maybeUpdateStreamsTargetAssignment``).

A target is owed when the group epoch is ahead of the assignment epoch. It is not computed
while the group's initial rebalance delay runs (armed when a member joins the empty group; its
timer computes the owed target when it fires), nor before ``assignment_interval_ms`` has passed
since the last computation (the first heartbeat after that computes it; there is no timer).
Meanwhile members reconcile towards the last target (nothing, during the initial delay) and
their heartbeats carry ASSIGNMENT_DELAYED. Both settings 0: computed at every bump."""

from __future__ import annotations

from streamtasks.coordinator.streams.assign import compute_target
from streamtasks.coordinator.streams.configured import ConfiguredTopology
from streamtasks.coordinator.streams.records import (
    StreamsTargetMemberRecord,
    StreamsTargetMemberTombstone,
    StreamsTargetMetadataRecord,
)
from streamtasks.coordinator.streams.write import StreamsWrite
from streamtasks.coordinator.timers import CancelTimer, ScheduleTimer, TimerKey, TimerKind
from streamtasks.protocol.streams_group import StreamsGroupStatus, StreamsStatus

__all__ = ["DELAYED", "arm_initial_delay", "interval_elapsed", "new_target", "update_target"]

#: Kafka's status for a heartbeat whose target was not computed (delay or interval).
DELAYED = StreamsStatus(
    status_code=int(StreamsGroupStatus.ASSIGNMENT_DELAYED),
    status_detail="The assignment was delayed by the coordinator.",
)


def arm_initial_delay(w: StreamsWrite) -> None:
    """A member joins the empty group: the initial rebalance delay starts, unless it runs."""
    delay = w.config.initial_rebalance_delay_ms
    if delay > 0 and not w.initial_delay:
        w.initial_delay = True
        key = TimerKey(TimerKind.INITIAL_REBALANCE, w.g.group_id)
        w.timers.append(ScheduleTimer(key=key, deadline_ms=w.now_ms + delay))


def interval_elapsed(w: StreamsWrite) -> bool:
    """Kafka's ``canComputeNextTargetAssignment``: never computed (timestamp 0), no interval,
    or the interval has passed since the last computation."""
    interval = w.config.assignment_interval_ms
    last = 0 if w.g.target_meta is None else w.g.target_meta.assignment_timestamp_ms
    return last == 0 or interval == 0 or w.now_ms >= last + interval


def update_target(w: StreamsWrite, configured: ConfiguredTopology) -> bool:
    """Compute the owed target now if neither the initial delay nor the interval holds it
    back; False when it is delayed."""
    if w.initial_delay or not interval_elapsed(w):
        return False
    new_target(w, configured)
    return True


def new_target(w: StreamsWrite, configured: ConfiguredTopology) -> None:
    """Compute the target for the group epoch with the task assignor and write what changed."""
    g, gid = w.g, w.g.group_id
    computed = (
        compute_target(g, configured, w.assignor, w.config.assignment_configs(), w.now_ms)
        if configured.ready
        else None
    )
    for mid in sorted(g.members):
        want = computed.members.get(mid) if computed is not None else None
        record = StreamsTargetMemberRecord(
            group_id=gid,
            member_id=mid,
            active=want.active if want else frozenset(),
            standby=want.standby if want else frozenset(),
            warmup=want.warmup if want else frozenset(),
        )
        if g.target(mid) != record:
            w.emit(record)
    for mid in sorted(set(g.targets) - set(g.members)):
        w.emit(StreamsTargetMemberTombstone(group_id=gid, member_id=mid))
    followup = computed.followup_ms if computed is not None else None
    w.emit(
        StreamsTargetMetadataRecord(
            group_id=gid,
            assignment_epoch=g.epoch,
            assignor_name=w.assignor.name,
            followup_ms=followup,
            assignment_timestamp_ms=w.now_ms if w.config.assignment_interval_ms > 0 else 0,
        )
    )
    key = TimerKey(TimerKind.PROBING, gid)
    w.timers.append(
        CancelTimer(key=key) if followup is None else ScheduleTimer(key=key, deadline_ms=followup)
    )
