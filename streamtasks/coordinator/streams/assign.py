"""Computing a streams group's target assignment with one of streamtasks' task assignors
(KIP-924 shaped, ``assignors/task``): the group's members become the assignor's processes
(members sharing a process id are one process, one thread each), their current tasks its
previous owners, their reported task offsets its lags; the assignor's tasks per process are
then spread over that process' members, sticky and balanced."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from assignors.task.indexed import lag_rank
from assignors.types import (
    INT64_MAX,
    RUNNING_LAG,
    ApplicationState,
    AssignmentConfigs,
    ClientState,
    TaskAssignor,
    TaskSpec,
)
from streamtasks.coordinator.streams.configured import ConfiguredTopology
from streamtasks.coordinator.streams.group import StreamsGroup
from streamtasks.coordinator.streams.records import NO_TASKS, TaskSet
from streamtasks.membership.streams.records import Task
from topology.ids import TaskId

__all__ = ["MemberTarget", "TargetComputation", "caught_up_warmups", "compute_target", "process_uuid"]

_NAMESPACE = uuid.UUID("5f0c6d3e-8f53-4a53-9a8e-5b2f3c1a7d10")


def process_uuid(process_id: str) -> uuid.UUID:
    """A member's process id as the assignor's UUID (Kafka Streams sends a UUID; any other
    string maps to a name-based UUID)."""
    try:
        return uuid.UUID(process_id)
    except ValueError:
        return uuid.uuid5(_NAMESPACE, process_id)


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberTarget:
    active: TaskSet = NO_TASKS
    standby: TaskSet = NO_TASKS
    warmup: TaskSet = NO_TASKS


@dataclass(frozen=True, slots=True, kw_only=True)
class TargetComputation:
    members: Mapping[str, MemberTarget]
    followup_ms: int | None


def _offsets_by_task(items: Iterable[tuple[Task, int]]) -> dict[Task, int]:
    out: dict[Task, int] = {}
    for task, offset in items:
        out[task] = max(offset, out.get(task, offset))
    return out


def _lags(group: StreamsGroup, tasks: frozenset[Task]) -> dict[str, dict[Task, int]]:
    """Per process id, the lag of each task it reported an offset for: the highest end offset
    any member reported (else the highest offset) minus the process' offset."""
    members = group.members.values()
    end = _offsets_by_task(
        ((o.subtopology_id, o.partition), o.offset) for m in members for o in m.task_end_offsets
    )
    best = _offsets_by_task(
        ((o.subtopology_id, o.partition), o.offset) for m in members for o in m.task_offsets
    )
    lags: dict[str, dict[Task, int]] = {}
    for m in members:
        mine = lags.setdefault(m.process_id, {})
        for o in m.task_offsets:
            task = (o.subtopology_id, o.partition)
            if task not in tasks or o.offset < 0:
                continue
            top = end.get(task, best.get(task, o.offset))
            lag = min(max(0, top - o.offset), INT64_MAX)
            mine[task] = min(lag, mine.get(task, lag))
    return lags


def caught_up_warmups(group: StreamsGroup, acceptable_recovery_lag: int) -> frozenset[tuple[str, Task]]:
    """The (member, task) pairs whose warm-up is caught up: the member's process reports a lag
    for the task that the assignor ranks as caught up (``lag_rank``: within
    ``acceptable_recovery_lag``), the same lags and rule :func:`compute_target` hands the
    assignor."""
    members = group.members
    # the group's index of current warm-ups (every reporting heartbeat asks: no walk of the group)
    warming = {mid: tasks for mid, tasks in group.warming.items() if mid in members}
    if not warming:
        return frozenset()
    lags = _lags(group, frozenset().union(*warming.values()))
    out: set[tuple[str, Task]] = set()
    for mid, tasks in warming.items():
        mine = lags.get(group.members[mid].process_id, {})
        out.update((mid, t) for t in tasks if t in mine and lag_rank(mine[t], acceptable_recovery_lag) == 0)
    return frozenset(out)


def compute_target(
    group: StreamsGroup,
    configured: ConfiguredTopology,
    assignor: TaskAssignor,
    configs: AssignmentConfigs,
    now_ms: int,
) -> TargetComputation:
    """Every member's target (members with an empty one included)."""
    subs = sorted(configured.partitions)
    index = {s: i for i, s in enumerate(subs)}
    all_tasks = configured.tasks()

    # one TaskId per task, built once (lags and previous tasks are within all_tasks)
    tid = {t: TaskId(index[t[0]], t[1]) for t in all_tasks}.__getitem__

    def task(t: TaskId) -> Task:
        return (subs[t.subtopology], t.partition)

    by_process: dict[str, list[str]] = {}
    for member in group.members.values():
        by_process.setdefault(member.process_id, []).append(member.member_id)
    uuid_of = {pid: process_uuid(pid) for pid in by_process}  # one uuid5 per process
    lags = _lags(group, all_tasks)
    clients: list[ClientState] = []
    for pid, member_ids in sorted(by_process.items()):
        active: set[Task] = set()
        standby: set[Task] = set()
        for mid in member_ids:
            current = group.current(mid)
            if current is not None:
                active |= current.active | current.pending_revocation
                standby |= current.standby | current.warmup
        active &= all_tasks
        standby = (standby & all_tasks) - active
        task_lags = {tid(t): lag for t, lag in lags.get(pid, {}).items()}
        task_lags.update({tid(t): RUNNING_LAG for t in active})
        first = group.members[member_ids[0]]
        clients.append(
            ClientState(
                process_id=uuid_of[pid],
                capacity=len(member_ids),
                rack=first.rack_id,
                client_tags={kv.key: kv.value for kv in first.client_tags},
                previous_active=frozenset(map(tid, active)),
                previous_standby=frozenset(map(tid, standby)),
                task_lags=task_lags,
            )
        )
    if not clients:
        return TargetComputation(members={}, followup_ms=None)
    stateful = configured.stateful
    specs = [TaskSpec(id=tid(t), is_stateful=t[0] in stateful) for t in sorted(all_tasks)]
    state = ApplicationState.build(specs, clients, configs, now_ms)
    result = assignor.assign(state)
    targets: dict[str, MemberTarget] = {}
    for pid, member_ids in by_process.items():
        try:
            got = result.for_process(uuid_of[pid])
        except KeyError:
            got = None
        spread = _spread(
            group,
            sorted(member_ids),
            (
                frozenset(map(task, got.active)) if got else NO_TASKS,
                frozenset(map(task, got.standby)) if got else NO_TASKS,
                frozenset(map(task, got.warmup)) if got else NO_TASKS,
            ),
        )
        targets.update(spread)
    return TargetComputation(members=targets, followup_ms=result.followup_rebalance_ms)


def _spread(
    group: StreamsGroup, member_ids: list[str], kinds: tuple[TaskSet, TaskSet, TaskSet]
) -> dict[str, MemberTarget]:
    """One process' tasks over its members: each kind balanced (counts differ by at most one),
    a task staying with the member that has it when that member is within its share."""
    if len(member_ids) == 1:  # the usual process of one thread: everything goes to it
        active, standby, warmup = kinds
        return {member_ids[0]: MemberTarget(active=active, standby=standby, warmup=warmup)}
    got: dict[str, list[set[Task]]] = {m: [set(), set(), set()] for m in member_ids}
    for k, tasks in enumerate(kinds):
        quota = -(-len(tasks) // len(member_ids))
        holders = _holders(group, member_ids, k)
        rest: list[Task] = []
        for t in sorted(tasks):
            holder = holders.get(t)
            if holder is not None and len(got[holder][k]) < quota:
                got[holder][k].add(t)
            else:
                rest.append(t)
        for t in rest:
            target = min(member_ids, key=lambda m: (len(got[m][k]), t in got[m][0], m))
            got[target][k].add(t)
    return {
        m: MemberTarget(active=frozenset(a), standby=frozenset(s), warmup=frozenset(w))
        for m, (a, s, w) in got.items()
    }


def _holders(group: StreamsGroup, member_ids: list[str], kind: int) -> dict[Task, str]:
    """Per task of the kind (0 active and pending revocation, 1 standby, 2 warm-up), the first
    of ``member_ids`` whose current assignment has it."""
    out: dict[Task, str] = {}
    for m in reversed(member_ids):  # the first member wins: it is written last
        current = group.current(m)
        if current is None:
            continue
        if kind == 0:
            have = current.active | current.pending_revocation
        else:
            have = current.standby if kind == 1 else current.warmup
        out.update(dict.fromkeys(have, m))
    return out
