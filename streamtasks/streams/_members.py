"""From tasks per process to tasks per member (threads), and the cooperative hand-over.

Pure helpers of :class:`~streamtasks.streams.assignor.StreamsPartitionAssignor`; see
``docs/streams.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from assignors.cooperative import adjust
from assignors.partition.types import MemberId
from assignors.types import ProcessAssignment, TaskAssignment
from streamtasks.streams._clients import GroupView, MemberView
from topology.ids import TaskId, TopicPartition, partition_order, task_order
from topology.model import TaskInfo

__all__ = ["MemberTasks", "spread", "spread_over_members", "withhold_moving"]


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberTasks:
    """The tasks of one member this round."""

    active: frozenset[TaskId] = frozenset()
    standby: frozenset[TaskId] = frozenset()
    warmup: frozenset[TaskId] = frozenset()


def spread(
    tasks: Iterable[TaskId],
    members: Sequence[MemberId],
    prefer: Callable[[TaskId], Sequence[MemberId]],
) -> dict[MemberId, frozenset[TaskId]]:
    """Balance ``tasks`` over ``members`` (every member ends with ``q`` or ``q + 1`` tasks),
    sticky: a task goes to the first of ``prefer(task)`` (members of ``members``) that has room.

    Deterministic: tasks in id order, ties broken by the order of ``members``.
    """
    ordered = sorted(set(tasks), key=task_order)
    q, r = divmod(len(ordered), len(members))
    position = {m: i for i, m in enumerate(members)}
    out: dict[MemberId, set[TaskId]] = {m: set() for m in members}
    extras = 0
    pending: list[TaskId] = []
    for task in ordered:  # 1: preferred members up to the floor quota
        home = next((m for m in prefer(task) if m in out and len(out[m]) < q), None)
        if home is None:
            pending.append(task)
        else:
            out[home].add(task)
    rest: list[TaskId] = []
    for task in pending:  # 2: preferred members one above it, while extra slots remain
        home = next((m for m in prefer(task) if m in out and len(out[m]) == q), None) if extras < r else None
        if home is None:
            rest.append(task)
        else:
            out[home].add(task)
            extras += 1
    for task in rest:  # 3: least loaded
        home = min(members, key=lambda m: (len(out[m]), position[m]))
        out[home].add(task)
    return {m: frozenset(ts) for m, ts in out.items()}


def _preference(
    views: Sequence[MemberView], order: tuple[str, ...]
) -> Callable[[TaskId], tuple[MemberId, ...]]:
    """Members (of one process) that own / run / hold state for a task, in ``order``."""

    def prefer(task: TaskId) -> tuple[MemberId, ...]:
        seen: dict[MemberId, None] = {}
        for field in order:
            for v in views:
                if task in getattr(v, field):
                    seen.setdefault(v.member_id, None)
        return tuple(seen)

    return prefer


def spread_over_members(view: GroupView, assignment: TaskAssignment) -> dict[MemberId, MemberTasks]:
    """Tasks per decodable member (sorted by member id): each process's tasks spread over its
    members. Actives stick to the member that owns their partitions, then to one that runs or
    holds them; standbys and warm-ups to one that holds state for them."""
    by_process = {p.process_id: p for p in assignment.processes}
    out: dict[MemberId, MemberTasks] = {}
    for pid, members in view.processes.items():
        mine = by_process.get(pid, ProcessAssignment(process_id=pid))
        views = tuple(view.members[m] for m in members)
        prefer_active = _preference(views, ("owned", "running", "state"))
        prefer_replica = _preference(views, ("state", "running", "owned"))
        actives = spread(mine.active, members, prefer_active)
        replicas = spread(mine.standby | mine.warmup, members, prefer_replica)
        # A standby on the process a task is meant to move to is that task's warm-up (KIP-441).
        warming = mine.warmup | {t for t in mine.standby if assignment.movements.get(t) == pid}
        for m in members:
            out[m] = MemberTasks(
                active=actives[m],
                standby=replicas[m] - warming,
                warmup=replicas[m] & warming,
            )
    return dict(sorted(out.items()))


def withhold_moving(
    planned: Mapping[MemberId, MemberTasks],
    view: GroupView,
    tasks: Mapping[TaskId, TaskInfo],
    group_members: Sequence[MemberId],
) -> tuple[dict[MemberId, MemberTasks], bool]:
    """KIP-429: an active task with a partition another member still validly owns (or that
    several members claim at one generation) is withheld from its new owner this round; a
    stateful one becomes its standby meanwhile, unless a claimant is in the same process (one
    state directory). Returns the tasks per member and whether anything was withheld."""
    target: dict[MemberId, list[TopicPartition]] = {
        m: sorted((tp for t in planned[m].active for tp in tasks[t].source_partitions), key=partition_order)
        if m in planned
        else []
        for m in group_members
    }
    adjustment = adjust(view.claims, target)
    partition_task = {tp: t.id for t in tasks.values() for tp in t.source_partitions}
    claimants: dict[TaskId, set[MemberId]] = {}
    for member, claim in view.claims.items():
        for tp in claim.partitions:
            claimants.setdefault(partition_task[tp], set()).add(member)
    out = dict(planned)
    for member, parts in adjustment.withheld.items():
        moving = frozenset(partition_task[tp] for tp in parts)
        current = planned[member]
        pid = view.members[member].process_id
        shadow = frozenset(
            t
            for t in moving
            if tasks[t].is_stateful
            and not any(c in view.members and view.members[c].process_id == pid for c in claimants.get(t, ()))
        )
        out[member] = MemberTasks(
            active=current.active - moving,
            standby=current.standby | shadow,
            warmup=current.warmup,
        )
    return out, bool(adjustment.withheld)
