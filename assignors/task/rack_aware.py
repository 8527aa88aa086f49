"""KIP-925's rack-aware active task placement, as the high-availability assignor's option.

Kafka Streams' ``RackAwareTaskAssignor`` moves actives between processes, keeping how many each
process runs, to the least total cost, where a task on a process costs ``traffic_cost`` for each
of its input partitions that has no replica on the process's rack, plus ``non_overlap_cost`` when
the process is not the one the balanced assignment gave it (a min-cost flow over tasks x
processes). Strategy ``min_traffic`` does that; ``balance_subtopology`` also keeps each
subtopology's tasks spread over the processes (here: no process gets more of a subtopology's tasks
than the balanced assignment gave it, or than an even share, whichever is more).

The cost of a task depends on a process only through its rack and whether it is the task's
current process, so the flow here runs over racks (:func:`~assignors.task.min_cost_flow.min_cost_transport`:
a task costs its cross-rack partitions on a rack, plus ``non_overlap_cost`` off its current
process's rack); a task left on its current process's rack stays on that process, and the tasks
that change rack fill, in task order, the places the leavers freed there. That is the same
least cost as the flow over processes (a task that changes process within its rack would only
pay ``non_overlap_cost`` for nothing), on a graph of racks instead of processes.

Enabled (:func:`rack_view`) when the strategy is not ``none``, every process has a rack, and every
input partition of the tasks has known replica racks, as Kafka Streams requires.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from assignors.task.indexed import IndexedState
from assignors.task.min_cost_flow import min_cost_transport
from assignors.types import ApplicationState, TaskAssignment

__all__ = [
    "STATEFUL_NON_OVERLAP_COST",
    "STATEFUL_TRAFFIC_COST",
    "STATELESS_NON_OVERLAP_COST",
    "STATELESS_TRAFFIC_COST",
    "RackView",
    "cross_rack_traffic",
    "optimize_actives",
    "rack_view",
]

#: Kafka Streams' defaults (``rack.aware.assignment.traffic_cost`` / ``non_overlap_cost`` unset)
#: and the fixed weights it gives stateless tasks.
STATEFUL_TRAFFIC_COST = 10
STATEFUL_NON_OVERLAP_COST = 1
STATELESS_TRAFFIC_COST = 1
STATELESS_NON_OVERLAP_COST = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class RackView:
    """Per process its rack's index; per task, per rack, its input partitions with no replica
    there; per task its subtopology's index (``balance_subtopology``); the strategy."""

    proc_rack: list[int]
    num_racks: int
    cross: list[list[int]]
    subtopology: list[int]
    balance_subtopology: bool


def rack_view(state: ApplicationState, ix: IndexedState) -> RackView | None:
    """The racks the optimisation weighs, or ``None`` when it is off or cannot run (a process
    without rack, an input partition without replica racks)."""
    strategy = state.configs.rack_aware_assignment_strategy
    if strategy == "none" or not ix.num_tasks:
        return None
    racks: list[str] = []
    for pid in ix.process_ids:
        rack = state.clients[pid].rack
        if rack is None:
            return None
        racks.append(rack)
    names = sorted(set(racks))
    index = {r: k for k, r in enumerate(names)}
    known = state.partition_racks
    cross: list[list[int]] = []
    for task in ix.tasks:
        row = [0] * len(names)
        for tp in state.tasks[task].source_partitions:
            replicas = known.get(tp)
            if not replicas:
                return None
            for r, name in enumerate(names):
                if name not in replicas:
                    row[r] += 1
        cross.append(row)
    subs = sorted({t.subtopology for t in ix.tasks})
    sub_index = {s: k for k, s in enumerate(subs)}
    return RackView(
        proc_rack=[index[r] for r in racks],
        num_racks=len(names),
        cross=cross,
        subtopology=[sub_index[t.subtopology] for t in ix.tasks],
        balance_subtopology=strategy == "balance_subtopology",
    )


def optimize_actives(
    view: RackView, tasks: Sequence[int], owner: list[int], *, traffic_cost: int, non_overlap_cost: int
) -> None:
    """Move ``tasks`` (each owned: ``owner[i] >= 0``) between processes to the least cost, every
    process keeping its count of them -- with ``balance_subtopology``, its count of each
    subtopology's -- (module docstring); ``owner`` is updated in place."""
    if view.num_racks < 2:
        return
    proc_rack, cross = view.proc_rack, view.cross
    by_sub: dict[int, list[int]] = {}
    for i in tasks:
        by_sub.setdefault(_sub(view, i), []).append(i)
    rack_of: dict[int, int] = {}
    for group in by_sub.values():
        start = [proc_rack[owner[i]] for i in group]
        cost = [
            [traffic_cost * c + (non_overlap_cost if r != home else 0) for r, c in enumerate(cross[i])]
            for i, home in zip(group, start, strict=True)
        ]
        final = min_cost_transport(cost, start, view.num_racks)
        rack_of.update(zip(group, final, strict=True))
    _place(view, owner, rack_of)


def _sub(view: RackView, i: int) -> int:
    return view.subtopology[i] if view.balance_subtopology else 0


def _place(view: RackView, owner: list[int], rack_of: dict[int, int]) -> None:
    """Tasks left on their process's rack stay; the others take, in task order, the places the
    leavers (of their subtopology, with ``balance_subtopology``) freed on their new rack,
    processes in index order."""
    proc_rack = view.proc_rack
    freed: dict[tuple[int, int], list[int]] = {}
    arriving: dict[tuple[int, int], list[int]] = {}
    for i, r in rack_of.items():
        home = proc_rack[owner[i]]
        if r != home:
            sub = _sub(view, i)
            freed.setdefault((home, sub), []).append(owner[i])
            arriving.setdefault((r, sub), []).append(i)
    for key, comers in arriving.items():
        for i, p in zip(sorted(comers), sorted(freed[key]), strict=True):
            owner[i] = p


def cross_rack_traffic(state: ApplicationState, assignment: TaskAssignment) -> int:
    """The input partitions the actives read from another rack than their process's: a
    partition counts when it has replica racks and none is the process's rack (a process
    without rack reads everything across racks)."""
    known = state.partition_racks
    total = 0
    for p in assignment.processes:
        client = state.clients.get(p.process_id)
        rack = client.rack if client is not None else None
        for task in p.active:
            spec = state.tasks.get(task)
            if spec is None:
                continue
            for tp in spec.source_partitions:
                replicas = known.get(tp)
                if replicas and rack not in replicas:
                    total += 1
    return total
