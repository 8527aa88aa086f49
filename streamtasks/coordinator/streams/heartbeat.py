"""The StreamsGroupHeartbeat write (Kafka's ``GroupMetadataManager.streamsGroupHeartbeat``):
validate, find or create the member (static members take over their instance's tasks), check
its epoch, record what changed (topology, member metadata, task offsets, the topics seen),
bump the group epoch when a new target is owed, compute it with the task assignor, reconcile
the member, and answer with its tasks, the statuses and where the other members' partitions
are."""

from __future__ import annotations

from dataclasses import replace

from streamtasks.coordinator.heartbeat import identity_problem
from streamtasks.coordinator.streams.assign import caught_up_warmups
from streamtasks.coordinator.streams.configured import validate_topology
from streamtasks.coordinator.streams.reconcile import reconcile
from streamtasks.coordinator.streams.records import (
    StreamsCurrentAssignmentRecord,
    StreamsCurrentAssignmentTombstone,
    StreamsGroupRecord,
    StreamsMemberRecord,
    StreamsMemberState,
    StreamsMemberTombstone,
    StreamsTargetMemberTombstone,
    StreamsTopologyRecord,
)
from streamtasks.coordinator.streams.target import DELAYED, arm_initial_delay, update_target
from streamtasks.coordinator.streams.write import StreamsResult, StreamsWrite
from streamtasks.coordinator.timers import CancelTimer, ScheduleTimer, TimerKey, TimerKind
from streamtasks.membership.streams.records import task_ids, tasks_of
from streamtasks.protocol.consumer_group import (
    JOIN_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
)
from streamtasks.protocol.errors import KafkaErrorCode
from streamtasks.protocol.streams_group import (
    EndpointToPartitions,
    StreamsGroupHeartbeatRequest,
    StreamsGroupHeartbeatResponse,
    StreamsGroupStatus,
    StreamsStatus,
    TopicPartitions,
)

__all__ = ["heartbeat"]

Request = StreamsGroupHeartbeatRequest
Response = StreamsGroupHeartbeatResponse
E = KafkaErrorCode


def _error(code: KafkaErrorCode, message: str, member_id: str = "", epoch: int = 0) -> Response:
    return Response(
        error=code, error_message=message, member_id=member_id, member_epoch=epoch, heartbeat_interval_ms=0
    )


def _validate(r: Request) -> Response | None:
    bad = E.INVALID_REQUEST
    problem = identity_problem(r.group_id, r.member_id, r.instance_id, r.member_epoch)
    if problem is not None:
        return _error(bad, problem)
    if r.member_epoch == JOIN_GROUP_MEMBER_EPOCH:
        if r.rebalance_timeout_ms <= 0:
            return _error(bad, "RebalanceTimeoutMs must be larger than zero when joining.")
        if r.topology is None:
            return _error(bad, "Topology must be set when joining.")
        if not r.process_id:
            return _error(bad, "ProcessId can't be empty when joining.")
        why = validate_topology(r.topology)
        if why is not None:
            return _error(E.STREAMS_INVALID_TOPOLOGY, why)
    elif r.rebalance_timeout_ms != -1 and r.rebalance_timeout_ms <= 0:
        return _error(bad, "RebalanceTimeoutMs must be -1 (unchanged) or larger than zero.")
    return None


def heartbeat(
    w: StreamsWrite, r: Request, *, client_id: str = "", client_host: str = ""
) -> StreamsResult[Response]:
    invalid = _validate(r)
    if invalid is not None:
        return w.result(invalid)
    g, mid = w.g, r.member_id
    if r.member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
        if g.member(mid) is None:
            return w.result(_error(E.UNKNOWN_MEMBER_ID, "Unknown member.", mid))
        w.remove_member(mid)
        return w.result(_answer(w, mid, LEAVE_GROUP_MEMBER_EPOCH))
    if r.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        return w.result(_leave_temporarily(w, r))
    if r.member_epoch == JOIN_GROUP_MEMBER_EPOCH:
        refused = _join(w, r)
        if refused is not None:
            return w.result(refused)
    else:
        refused = _check_epoch(w, r)
        if refused is not None:
            return w.result(refused)
    member = g.member(mid)
    assert member is not None
    stale = _topology(w, r, member)
    if isinstance(stale, Response):
        return w.result(stale)
    _member_metadata(w, r, member, client_id, client_host)
    if r.shutdown_application and g.meta is not None and g.meta.shutdown_requested_by is None:
        w.emit(replace(g.meta, shutdown_requested_by=mid))
    w.check_metadata()
    configured = w.configured()
    delayed = w.initial_delay
    if not delayed and (g.epoch > g.target_epoch or g.target_meta is None):
        delayed = not update_target(w, configured)
    before = g.current(mid)
    assert before is not None
    joined = r.member_epoch == JOIN_GROUP_MEMBER_EPOCH
    owned = None if r.active_tasks is None or joined else tasks_of(r.active_tasks)
    after = reconcile(
        before, target_epoch=g.target_epoch, target=g.target(mid), owned_active=owned, owner_of=g.owner
    )
    if after is not before:
        w.emit(after)
    _timers(w, mid, before, after, member.rebalance_timeout_ms)
    sent = _tasks_owed(r, before, after)
    statuses = list(configured.statuses)
    if delayed:
        statuses.append(DELAYED)
    if stale:
        statuses.append(
            StreamsStatus(
                status_code=int(StreamsGroupStatus.STALE_TOPOLOGY),
                status_detail=f"The member's topology epoch is older than the group's "
                f"({g.topology.epoch if g.topology else 0}).",
            )
        )
    if g.meta is not None and g.meta.shutdown_requested_by is not None:
        statuses.append(
            StreamsStatus(
                status_code=int(StreamsGroupStatus.SHUTDOWN_APPLICATION),
                status_detail=f"Member {g.meta.shutdown_requested_by} asked the application to shut down.",
            )
        )
    return w.result(
        _answer(w, mid, after.member_epoch, r=r, tasks=after if sent else None, statuses=tuple(statuses))
    )


def _leave_temporarily(w: StreamsWrite, r: Request) -> Response:
    """A static member leaves for a while: it keeps its tasks (nobody else gets them) until it
    comes back with a new member id or its session times out."""
    current = w.g.current(r.member_id)
    if current is None:
        return _error(E.UNKNOWN_MEMBER_ID, "Unknown member.", r.member_id)
    w.emit(
        replace(
            current, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH, previous_member_epoch=current.member_epoch
        )
    )
    w.timers.append(CancelTimer(key=TimerKey(TimerKind.REVOCATION, r.group_id, r.member_id)))
    return _answer(w, r.member_id, LEAVE_GROUP_STATIC_MEMBER_EPOCH)


def _join(w: StreamsWrite, r: Request) -> Response | None:
    g, mid, gid = w.g, r.member_id, r.group_id
    was_empty = not g.members
    if g.meta is None:
        w.emit(StreamsGroupRecord(group_id=gid, epoch=0))
    if g.member(mid) is not None:
        # A join from a member still in the group (a late or repeated join, or a fenced member
        # rejoining): it is answered with its epoch and tasks, and is taken to own them; a
        # static member back under its member id takes up its epoch again.
        current = g.current(mid)
        if current is not None and current.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            w.emit(replace(current, member_epoch=max(current.previous_member_epoch, 0)))
        return None
    previous = g.static_member(r.instance_id) if r.instance_id is not None else None
    if previous is not None:
        old = g.current(previous)
        if old is not None and old.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            return _error(
                E.UNRELEASED_INSTANCE_ID, f"Instance {r.instance_id} is in use by another member.", mid
            )
        _take_over(w, previous, r)
        return None
    if w.config.max_group_size is not None and len(g.members) >= w.config.max_group_size:
        return _error(
            E.GROUP_MAX_SIZE_REACHED,
            f"The group has reached its maximum size ({w.config.max_group_size}).",
            mid,
        )
    w.emit(
        StreamsMemberRecord(
            group_id=gid,
            member_id=mid,
            process_id=r.process_id or "",
            rebalance_timeout_ms=r.rebalance_timeout_ms,
            topology_epoch=r.topology.epoch if r.topology else 0,
            instance_id=r.instance_id,
        )
    )
    w.emit(
        StreamsCurrentAssignmentRecord(group_id=gid, member_id=mid, member_epoch=0, previous_member_epoch=0)
    )
    w.bump()
    if was_empty:
        arm_initial_delay(w)
    return None


def _take_over(w: StreamsWrite, previous: str, r: Request) -> None:
    """The static member is back under a new member id: it gets the old one's tasks and epoch."""
    g, gid, mid = w.g, r.group_id, r.member_id
    old_member, old_current, old_target = g.member(previous), g.current(previous), g.target(previous)
    assert old_member is not None
    w.emit(StreamsCurrentAssignmentTombstone(group_id=gid, member_id=previous))
    if old_target is not None:
        w.emit(StreamsTargetMemberTombstone(group_id=gid, member_id=previous))
    w.emit(StreamsMemberTombstone(group_id=gid, member_id=previous))
    for kind in (TimerKind.SESSION, TimerKind.REVOCATION):
        w.timers.append(CancelTimer(key=TimerKey(kind, gid, previous)))
    w.emit(replace(old_member, member_id=mid))
    if old_target is not None:
        w.emit(replace(old_target, member_id=mid))
    epoch = g.target_epoch if old_current is None else old_current.previous_member_epoch
    if old_current is not None:
        # back at the epoch it had before it left, with the tasks it had
        w.emit(replace(old_current, member_id=mid, member_epoch=max(epoch, 0)))
    else:
        w.emit(
            StreamsCurrentAssignmentRecord(
                group_id=gid, member_id=mid, member_epoch=0, previous_member_epoch=0
            )
        )
    if g.meta is not None and g.meta.shutdown_requested_by == previous:
        w.emit(replace(g.meta, shutdown_requested_by=mid))


def _check_epoch(w: StreamsWrite, r: Request) -> Response | None:
    """Kafka's epoch rule: ahead of the coordinator, or behind it other than by one lost
    response (the previous epoch, owning no task it no longer may), is fenced; a fenced member
    is not removed."""
    current = w.g.current(r.member_id)
    if current is None or w.g.member(r.member_id) is None:
        return _error(E.UNKNOWN_MEMBER_ID, "Unknown member.", r.member_id)
    epoch = r.member_epoch
    owned = None if r.active_tasks is None else tasks_of(r.active_tasks)
    if epoch > current.member_epoch or (
        epoch < current.member_epoch
        and (
            epoch != current.previous_member_epoch
            or owned is None
            or not owned <= current.active | current.pending_revocation
        )
    ):
        # FENCED_MEMBER_EPOCH and nothing else (Apache Kafka's rule for streams groups as for
        # consumer groups): the member stays, with its epoch and tasks, until it rejoins at epoch 0
        # (answered with both: see _join) or its session expires. A stray copy of an old heartbeat
        # (a network duplicate whose answer the member never reads) must not free the tasks of a
        # member that is still working on them.
        return _error(
            E.FENCED_MEMBER_EPOCH,
            f"Member epoch {epoch} is not the expected {current.member_epoch}.",
            r.member_id,
        )
    return None


def _topology(w: StreamsWrite, r: Request, member: StreamsMemberRecord) -> Response | bool:
    """Take a newer topology; True when the member's is older than the group's (STALE_TOPOLOGY)."""
    g, t = w.g, r.topology
    if t is not None:
        if g.topology is None or t.epoch > g.topology.epoch:
            w.emit(StreamsTopologyRecord(group_id=r.group_id, topology=t))
            w.bump()
        elif t.epoch == g.topology.epoch and t != g.topology:
            return _error(
                E.STREAMS_INVALID_TOPOLOGY_EPOCH,
                f"Topology epoch {t.epoch} is in use with a different topology.",
                r.member_id,
            )
    epoch = t.epoch if t is not None else member.topology_epoch
    return g.topology is not None and epoch < g.topology.epoch


def _member_metadata(
    w: StreamsWrite, r: Request, member: StreamsMemberRecord, client_id: str, client_host: str
) -> None:
    """Record what the member reported; a new group epoch when its placement changed, or when
    its report brought one of its warm-ups within the acceptable recovery lag (the lag-triggered
    hand-over: the target is computed now, not at the next probing rebalance)."""
    reported = r.task_offsets is not None or r.task_end_offsets is not None
    acceptable = w.config.acceptable_recovery_lag
    was = caught_up_warmups(w.g, acceptable) if reported else frozenset()
    _record_metadata(w, r, member, client_id, client_host)
    if reported and caught_up_warmups(w.g, acceptable) - was:
        w.bump()


def _record_metadata(
    w: StreamsWrite, r: Request, member: StreamsMemberRecord, client_id: str, client_host: str
) -> None:
    joining = r.member_epoch == JOIN_GROUP_MEMBER_EPOCH
    nxt = replace(
        member,
        rebalance_timeout_ms=r.rebalance_timeout_ms
        if r.rebalance_timeout_ms > 0
        else member.rebalance_timeout_ms,
        topology_epoch=r.topology.epoch if r.topology is not None else member.topology_epoch,
        process_id=r.process_id if r.process_id else member.process_id,
        rack_id=r.rack_id if joining else member.rack_id,
        user_endpoint=r.user_endpoint if joining or r.user_endpoint is not None else member.user_endpoint,
        client_tags=r.client_tags if r.client_tags is not None else member.client_tags,
        client_id=client_id or member.client_id,
        client_host=client_host or member.client_host,
        task_offsets=r.task_offsets if r.task_offsets is not None else member.task_offsets,
        task_end_offsets=r.task_end_offsets if r.task_end_offsets is not None else member.task_end_offsets,
    )
    if nxt == member:
        return
    w.emit(nxt)
    placed = (member.process_id, member.rack_id, member.client_tags, member.topology_epoch)
    if placed != (nxt.process_id, nxt.rack_id, nxt.client_tags, nxt.topology_epoch):
        w.bump()


def _timers(
    w: StreamsWrite,
    mid: str,
    before: StreamsCurrentAssignmentRecord,
    after: StreamsCurrentAssignmentRecord,
    rebalance_timeout_ms: int,
) -> None:
    gid = w.g.group_id
    w.timers.append(
        ScheduleTimer(
            key=TimerKey(TimerKind.SESSION, gid, mid), deadline_ms=w.now_ms + w.config.session_timeout_ms
        )
    )
    revocation = TimerKey(TimerKind.REVOCATION, gid, mid)
    revoking = after.state is StreamsMemberState.UNREVOKED_TASKS
    if revoking and (
        before.state is not StreamsMemberState.UNREVOKED_TASKS
        or after.pending_revocation != before.pending_revocation
    ):
        w.timers.append(ScheduleTimer(key=revocation, deadline_ms=w.now_ms + rebalance_timeout_ms))
    elif not revoking and before.state is StreamsMemberState.UNREVOKED_TASKS:
        w.timers.append(CancelTimer(key=revocation))


def _tasks_owed(
    r: Request, before: StreamsCurrentAssignmentRecord, after: StreamsCurrentAssignmentRecord
) -> bool:
    """Whether the answer carries the member's tasks. Kafka's streams coordinator sends them on
    a join and when the heartbeat changed them; its consumer coordinator also on a full request
    (the member reported what it owns, as it does after an error) and, with that, whenever the
    answered epoch is not the one the member sent (a member accepted at its previous epoch, its
    owned tasks a subset, learns its assignment with the new epoch). All four apply here."""
    return (
        r.member_epoch == JOIN_GROUP_MEMBER_EPOCH
        or r.member_epoch != after.member_epoch
        or r.active_tasks is not None
        or r.standby_tasks is not None
        or r.warmup_tasks is not None
        or (before.active, before.standby, before.warmup) != (after.active, after.standby, after.warmup)
    )


def _endpoints(w: StreamsWrite) -> tuple[EndpointToPartitions, ...]:
    """Every member's user endpoint with the source partitions of its target tasks."""
    g = w.g
    sources = {s.subtopology_id: s.source_topics for s in (g.topology.subtopologies if g.topology else ())}

    def parts(tasks: frozenset[tuple[str, int]]) -> tuple[TopicPartitions, ...]:
        by_topic: dict[str, set[int]] = {}
        for sub, p in tasks:
            for topic in sources.get(sub, ()):
                by_topic.setdefault(topic, set()).add(p)
        return tuple(
            TopicPartitions(topic=t, partitions=tuple(sorted(ps))) for t, ps in sorted(by_topic.items())
        )

    out = []
    for mid, member in sorted(g.members.items()):
        target = g.target(mid)
        if member.user_endpoint is None or target is None:
            continue
        out.append(
            EndpointToPartitions(
                user_endpoint=member.user_endpoint,
                active_partitions=parts(target.active),
                standby_partitions=parts(target.standby),
            )
        )
    return tuple(out)


def _answer(
    w: StreamsWrite,
    mid: str,
    epoch: int,
    *,
    r: Request | None = None,
    tasks: StreamsCurrentAssignmentRecord | None = None,
    statuses: tuple[StreamsStatus, ...] = (),
) -> Response:
    c = w.config
    endpoint_epoch = w.g.target_epoch
    endpoints = None
    if r is not None and r.endpoint_information_epoch != endpoint_epoch and w.g.has_endpoints:
        endpoints = _endpoints(w)
    return Response(
        error=E.NONE,
        member_id=mid,
        member_epoch=epoch,
        heartbeat_interval_ms=c.heartbeat_interval_ms,
        acceptable_recovery_lag=c.acceptable_recovery_lag,
        task_offset_interval_ms=c.task_offset_interval_ms,
        status=statuses,
        active_tasks=task_ids(tasks.active) if tasks is not None else None,
        standby_tasks=task_ids(tasks.standby) if tasks is not None else None,
        warmup_tasks=task_ids(tasks.warmup) if tasks is not None else None,
        endpoint_information_epoch=endpoint_epoch if endpoints is not None else 0,
        partitions_by_user_endpoint=endpoints,
    )
