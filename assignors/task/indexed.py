"""An integer-indexed snapshot of an :class:`~assignors.types.ApplicationState`.

The task assignors work on small integers instead of ``TaskId`` / ``UUID`` objects: process
``j`` is the ``j``-th process id in ascending order, task ``i`` the ``i``-th task id in ascending
order. The fixed orders make the assignors deterministic -- nothing depends on the iteration order
of the mappings and sets handed in -- and the flat integer lists keep them fast: per-task data is
stored as compressed rows (:class:`Rows`), a handful of long lists rather than one small list per
task, which also spares the garbage collector tens of thousands of long-lived containers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate

from assignors.types import RUNNING_LAG, ApplicationState, ProcessAssignment, ProcessId, TaskAssignment
from streamtasks.errors import AssignorInputError
from topology.ids import TaskId

__all__ = ["IndexedState", "Rows", "build_assignment", "group_rows", "index_state", "lag_rank"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Rows:
    """Compressed rows of ints: row ``i`` is ``items[start[i]:start[i + 1]]``."""

    start: list[int]
    items: list[int]

    def row(self, i: int) -> list[int]:
        return self.items[self.start[i] : self.start[i + 1]]


def group_rows(num_rows: int, row_of: Sequence[int], values: Sequence[int]) -> tuple[Rows, list[int]]:
    """Group ``values[k]`` into row ``row_of[k]``, keeping their order within a row (a stable
    sort). Also returns, for every grouped position, the index ``k`` it came from."""
    origin = sorted(range(len(row_of)), key=row_of.__getitem__)
    sizes = [0] * num_rows
    for r in row_of:
        sizes[r] += 1
    start = list(accumulate(sizes, initial=0))
    return Rows(start=start, items=[values[k] for k in origin]), origin


@dataclass(frozen=True, slots=True, kw_only=True)
class IndexedState:
    """What the assignors read, by index.

    ``prev_active`` / ``prev_standby``: per task, the processes that ran it as active / held a
    standby of it, ascending. ``lag_procs``: per stateful task, the processes reporting a lag for
    it, ascending, with the lag at the same position of ``lag_values`` (lags reported for
    stateless or unknown tasks are ignored).
    """

    process_ids: tuple[ProcessId, ...]
    tasks: tuple[TaskId, ...]
    stateful: tuple[bool, ...]
    capacity: tuple[int, ...]
    prev_active: Rows
    prev_standby: Rows
    lag_procs: Rows
    lag_values: list[int]

    @property
    def num_processes(self) -> int:
        return len(self.process_ids)

    @property
    def num_tasks(self) -> int:
        return len(self.tasks)


def index_state(state: ApplicationState) -> IndexedState:
    """Index ``state``; raises :class:`AssignorInputError` when there are tasks but no process."""
    pids = sorted(state.clients, key=lambda u: u.int)
    specs = sorted(state.tasks.values(), key=lambda s: (s.id.subtopology, s.id.partition))
    tasks = [s.id for s in specs]
    nt = len(tasks)
    if nt and not pids:
        raise AssignorInputError(f"cannot assign {nt} tasks: the application has no processes")
    position = {(t.subtopology, t.partition): i for i, t in enumerate(tasks)}
    stateful = tuple([s.is_stateful for s in specs])
    a_task: list[int] = []
    a_proc: list[int] = []
    s_task: list[int] = []
    s_proc: list[int] = []
    l_task: list[int] = []
    l_proc: list[int] = []
    l_value: list[int] = []
    capacity: list[int] = []
    for j, pid in enumerate(pids):
        client = state.clients[pid]
        capacity.append(client.capacity)
        if client.previous_active:
            a_task += [position[t.subtopology, t.partition] for t in client.previous_active]
            a_proc += [j] * len(client.previous_active)
        if client.previous_standby:
            s_task += [position[t.subtopology, t.partition] for t in client.previous_standby]
            s_proc += [j] * len(client.previous_standby)
        lags = client.task_lags
        if lags:
            found = [position.get((t.subtopology, t.partition), -1) for t in lags]
            if -1 in found or not all(map(stateful.__getitem__, found)):
                keep = [n for n, i in enumerate(found) if i >= 0 and stateful[i]]
                values = list(lags.values())
                l_task += [found[n] for n in keep]
                l_value += [values[n] for n in keep]
                l_proc += [j] * len(keep)
            else:
                l_task += found
                l_value += lags.values()
                l_proc += [j] * len(found)
    lag_procs, origin = group_rows(nt, l_task, l_proc)
    return IndexedState(
        process_ids=tuple(pids),
        tasks=tuple(tasks),
        stateful=stateful,
        capacity=tuple(capacity),
        prev_active=group_rows(nt, a_task, a_proc)[0],
        prev_standby=group_rows(nt, s_task, s_proc)[0],
        lag_procs=lag_procs,
        lag_values=[l_value[k] for k in origin],
    )


def lag_rank(lag: int, acceptable_recovery_lag: int) -> int:
    """KIP-441 ranking of a reported lag, lower is better.

    ``-1``: the process runs the task now (:data:`RUNNING_LAG`); ``0``: caught up (lag within
    ``acceptable_recovery_lag``); otherwise the lag itself (always > 0 then).
    """
    if lag == RUNNING_LAG:
        return -1
    if lag <= acceptable_recovery_lag:
        return 0
    return lag


def build_assignment(
    ix: IndexedState,
    active_owner: Sequence[int],
    standby_slots: Sequence[int] = (),
    warmups: Sequence[tuple[int, int]] = (),
    followup_rebalance_ms: int | None = None,
    *,
    movements: Mapping[int, int] | None = None,
) -> TaskAssignment:
    """Turn per-task owners back into one :class:`ProcessAssignment` per process.

    ``active_owner[i]`` is the process running task ``i`` (``-1``: unassigned);
    ``standby_slots`` holds ``k`` slots per task (task ``i`` owns ``[i*k, (i+1)*k)``), each a
    process holding a standby of it or ``-1``; ``warmups`` are ``(task, process)`` pairs;
    ``movements`` maps a task to the process it is meant to move to once caught up there.
    """
    n = ix.num_processes
    tasks = ix.tasks
    actives, _ = group_rows(
        n, [p for p in active_owner if p >= 0], [i for i, p in enumerate(active_owner) if p >= 0]
    )
    nt = len(tasks)
    k = len(standby_slots) // nt if nt else 0
    sb_proc = [p for p in standby_slots if p >= 0]
    sb_task = [s // k for s, p in enumerate(standby_slots) if p >= 0] if k else []
    standbys, _ = group_rows(n, sb_proc, sb_task)
    warm: list[list[TaskId]] = [[] for _ in range(n)] if warmups else []
    for i, p in warmups:
        warm[p].append(tasks[i])
    none: frozenset[TaskId] = frozenset()
    a_start, a_items = actives.start, actives.items
    s_start, s_items = standbys.start, standbys.items
    return TaskAssignment(
        processes=tuple(
            ProcessAssignment(
                process_id=pid,
                active=frozenset(tasks[i] for i in a_items[a_start[j] : a_start[j + 1]]),
                standby=frozenset(tasks[i] for i in s_items[s_start[j] : s_start[j + 1]]),
                warmup=frozenset(warm[j]) if warmups else none,
            )
            for j, pid in enumerate(ix.process_ids)
        ),
        followup_rebalance_ms=followup_rebalance_ms,
        movements={tasks[i]: ix.process_ids[d] for i, d in sorted((movements or {}).items())},
    )
