"""KIP-925's rack-aware standby placement: standbys read their changelogs on their rack.

Kafka Streams' ``RackAwareTaskAssignor.optimizeStandbyTasks`` (run by its high-availability
assignor after placing the standbys, when the rack-aware strategy is on and standbys are
configured) swaps standbys between pairs of processes on different racks, up to four rounds
over every pair, each swap a min-cost flow over the two processes keeping their standby counts:
a standby costs ``traffic_cost`` per changelog partition with no replica on its process's rack,
plus ``non_overlap_cost`` off the process it had. Moves must keep a standby off a process
holding the task, and (with ``rack_aware_assignment_tags``) not lower the number of distinct
tag values among the task's copies.

:func:`optimize_standbys` solves the whole problem in one min-cost flow instead of pairs: every
standby may go to any process that does not hold the task, each process keeps its standby
count (processes of one capacity whose counts differ by one may trade the one more), and with
tags each task keeps the same number of standbys on each tag signature (so the same distinct
values; stricter than Kafka's rule). A standby costs what it costs in Kafka, ``non_overlap_cost``
only off a process that holds state for the task. The least cost over these placements is never
above what pairwise swaps from the same start reach. Beyond :data:`MAX_PAIRS` (standby,
process) pairs it is skipped.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence

from assignors.task.indexed import IndexedState
from assignors.task.min_cost_flow import FlowNetwork
from assignors.task.rack_aware import RackView
from assignors.task.rack_joint import add_balanced_sinks, class_ranges
from assignors.types import ApplicationState

__all__ = ["MAX_PAIRS", "changelog_cross", "optimize_standbys"]

#: Above this many (standby, process) pairs the flow is not run (it would take seconds to
#: minutes in Python: one shortest path per standby over every pair); the standbys stay where
#: step 5 placed them.
MAX_PAIRS = 40_000


def changelog_cross(state: ApplicationState, ix: IndexedState, view: RackView) -> list[list[int]] | None:
    """Per task, per rack of ``view``, its changelog partitions with no replica there; ``None``
    when a stateful task's changelog partition has no known racks (the optimisation is off)."""
    names = sorted({state.clients[pid].rack or "" for pid in ix.process_ids})
    known = state.partition_racks
    out: list[list[int]] = []
    for i, task in enumerate(ix.tasks):
        row = [0] * view.num_racks
        if ix.stateful[i]:
            for tp in state.tasks[task].changelog_partitions:
                replicas = known.get(tp)
                if not replicas:
                    return None
                for r, name in enumerate(names):
                    row[r] += name not in replicas
        out.append(row)
    return out


def optimize_standbys(
    slots: list[int],
    k: int,
    *,
    owner: Sequence[int],
    capacity: Sequence[int],
    rack_cost: Callable[[int, int], int],
    zone: Sequence[Hashable],
    fixed: Callable[[int], set[int]],
    blocked: Callable[[int], set[int]],
    holds_state: Callable[[int, int], bool],
    non_overlap_cost: int,
) -> None:
    """Move the standbys in ``slots`` (task ``i`` owns ``slots[i*k:(i+1)*k]``, ``-1``: empty)
    to the least cost (module docstring), in place. ``rack_cost(i, p)``: the traffic cost of a
    standby of ``i`` on ``p``; ``zone[p]``: the tag signature a standby keeps (one value: any);
    ``fixed(i)``: processes whose standby of ``i`` stays (warm-ups under way); ``blocked(i)``:
    processes that must not get one (besides ``owner[i]``)."""
    if k == 0:
        return
    num_p = len(capacity)
    count = [0] * num_p
    moving: dict[int, list[int]] = {}
    for i in range(len(slots) // k):
        held = [p for p in slots[i * k : (i + 1) * k] if p >= 0]
        stay = fixed(i)
        free = [p for p in held if p not in stay]
        if free:
            moving[i] = free
            for p in free:
                count[p] += 1
    if not moving or sum(len(v) for v in moving.values()) * num_p > MAX_PAIRS:
        return
    ranges = class_ranges(count, capacity)
    copies = sum(len(v) for v in moving.values())
    zones = sorted(set(zone), key=repr)
    zone_index = {z: n for n, z in enumerate(zones)}
    # nodes: copies, then per task one node per zone it has standbys in, processes, pools, sink
    zone_node: dict[tuple[int, int], int] = {}
    next_node = copies
    for i, held in moving.items():
        for p in held:
            key = (i, zone_index[zone[p]])
            if key not in zone_node:
                zone_node[key] = next_node
                next_node += 1
    proc = next_node
    pool = {c: proc + num_p + n for n, c in enumerate(sorted(ranges[1]))}
    sink = proc + num_p + len(pool)
    net = FlowNetwork(sink + 1)
    add_balanced_sinks(net, range(proc, proc + num_p), ranges, capacity, pool=pool, sink=sink)
    copy = 0
    task_edges: dict[int, list[int]] = {}
    for i, held in moving.items():
        banned = {owner[i], *blocked(i), *(p for p in slots[i * k : (i + 1) * k] if p >= 0 and p not in held)}
        per_zone: dict[int, int] = {}
        for p in held:
            z = zone_index[zone[p]]
            per_zone[z] = per_zone.get(z, 0) + 1
            net.add_edge(copy, zone_node[i, z], 1, 0)
            copy += 1
        edges = task_edges.setdefault(i, [])
        for z in per_zone:
            node = zone_node[i, z]
            for p in range(num_p):
                if p in banned or zone_index[zone[p]] != z:
                    continue
                move = 0 if p in held else (non_overlap_cost if any(holds_state(i, q) for q in held) else 0)
                edges.append(net.add_edge(node, proc + p, 1, rack_cost(i, p) + move))
    for c in range(copies):
        if not net.augment(c, sink):  # cannot happen: the start is a flow of every copy
            raise AssertionError("rack-aware standbys: no room left for a standby")
    for i, edges in task_edges.items():
        held = moving[i]
        now = sorted(net.to[e] - proc for e in edges if net.flow(e))
        it = iter(now)
        row = slots[i * k : (i + 1) * k]
        for n, p in enumerate(row):
            if p >= 0 and p in held:
                slots[i * k + n] = next(it)
