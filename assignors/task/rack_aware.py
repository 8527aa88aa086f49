"""KIP-925's rack-aware active task placement, as the high-availability assignor's option.

Kafka Streams' ``RackAwareTaskAssignor`` moves actives between processes, keeping how many each
process runs, to the least total cost, where a task on a process costs ``traffic_cost`` for each
of its input partitions that has no replica on the process's rack, plus ``non_overlap_cost`` when
the process is not the one the balanced assignment gave it (a min-cost flow over tasks x
processes). Strategy ``min_traffic`` does that; ``balance_subtopology`` also keeps each
subtopology's tasks spread over the processes (here: no process gets more of a subtopology's tasks
than the balanced assignment gave it, or than an even share, whichever is more).

The cost of a task depends on a process only through its rack and whether it is the task's
current process, so the ``min_traffic`` flow here runs over racks
(:func:`~assignors.task.min_cost_flow.min_cost_transport`: a task costs its cross-rack
partitions on a rack, plus ``non_overlap_cost`` off its current process's rack); a task left on
its current process's rack stays on that process, and the tasks that change rack fill, in task
order, the places the leavers freed there. That is the same least cost as the flow over
processes (a task that changes process within its rack would only pay ``non_overlap_cost`` for
nothing), on a graph of racks instead of processes. ``balance_subtopology`` needs the processes
(its caps are theirs); its flow goes through one hub per (subtopology, rack) instead of an edge
per (task, process): successive shortest paths on ``tasks x (racks + 1)`` edges.

Enabled (:func:`rack_view`) when the strategy is not ``none``, every process has a rack, and every
input partition of the tasks has known replica racks, as Kafka Streams requires.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from assignors.task.indexed import IndexedState
from assignors.task.min_cost_flow import FlowNetwork, min_cost_transport
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
    "standby_changelog_traffic",
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
    view: RackView,
    tasks: Sequence[int],
    owner: list[int],
    capacity: Sequence[int],
    *,
    traffic_cost: int,
    non_overlap_cost: int,
    trade: bool = True,
) -> None:
    """Move ``tasks`` (each owned: ``owner[i] >= 0``) between processes to the least cost
    (module docstring); ``owner`` is updated in place. Each process keeps its count of them,
    except that processes of the same capacity (``capacity``: threads per process) whose loads
    (these tasks plus the others ``owner`` gives them) differ by one may trade which of them
    carries the one more: the loads stay the same multiset, so the balance is unchanged
    (``trade=False``: every count kept, as Kafka Streams does)."""
    if not tasks:
        return
    room = _room(tasks, owner, capacity) if trade else [(c, c) for c in _counts(tasks, owner, len(capacity))]
    if view.balance_subtopology or any(hi > lo for lo, hi in room):
        _network(view, tasks, owner, room, capacity, cost=(traffic_cost, non_overlap_cost))
        return
    if view.num_racks < 2:
        return
    proc_rack, cross = view.proc_rack, view.cross
    start = [proc_rack[owner[i]] for i in tasks]
    cost = [
        [traffic_cost * c + (non_overlap_cost if r != home else 0) for r, c in enumerate(cross[i])]
        for i, home in zip(tasks, start, strict=True)
    ]
    final = min_cost_transport(cost, start, view.num_racks)
    freed: dict[int, list[int]] = {}
    arriving: dict[int, list[int]] = {}
    for i, home, r in zip(tasks, start, final, strict=True):
        if r != home:
            freed.setdefault(home, []).append(owner[i])
            arriving.setdefault(r, []).append(i)
    for r, comers in arriving.items():
        for i, p in zip(sorted(comers), sorted(freed[r]), strict=True):
            owner[i] = p


def _counts(tasks: Sequence[int], owner: list[int], num_processes: int) -> list[int]:
    count = [0] * num_processes
    for i in tasks:
        count[owner[i]] += 1
    return count


def _room(tasks: Sequence[int], owner: list[int], capacity: Sequence[int]) -> list[tuple[int, int]]:
    """Per process, the least and most of ``tasks`` it may end with (see :func:`optimize_actives`)."""
    moving = set(tasks)
    count = [0] * len(capacity)
    base = [0] * len(capacity)
    for i, p in enumerate(owner):
        if p >= 0:
            if i in moving:
                count[p] += 1
            else:
                base[p] += 1
    room = [(c, c) for c in count]
    by_class: dict[int, list[int]] = {}
    for p, c in enumerate(capacity):
        by_class.setdefault(c, []).append(p)
    for members in by_class.values():
        totals = [base[p] + count[p] for p in members]
        low = min(totals)
        extras = totals.count(low + 1)
        if max(totals) != low + 1 or not extras:
            continue
        for p in members:
            if base[p] <= low:  # it can end with ``low`` or ``low + 1`` in all
                room[p] = (low - base[p], low + 1 - base[p])
    return room


def _network(
    view: RackView,
    tasks: Sequence[int],
    owner: list[int],
    room: list[tuple[int, int]],
    capacity: Sequence[int],
    *,
    cost: tuple[int, int],
) -> None:
    """The flow over processes (:class:`FlowNetwork`): task -> rack hub -> process -> sink, plus
    task -> its process; a task pays its cross-rack partitions on a rack, and
    ``non_overlap_cost`` unless it stays on its process. A process's edge to the sink carries its
    least count; the room above it goes through one pool per capacity class holding the class's
    extra units, so that a max flow fills every least count and hands out the extras.
    ``balance_subtopology`` routes a subtopology's tasks through (subtopology, rack) hubs and
    (subtopology, process) nodes capped at ``ceil(most_c * n_s / n)``, Kafka Streams' cap."""
    proc_rack, cross = view.proc_rack, view.cross
    traffic_cost, non_overlap_cost = cost
    sub_of = view.subtopology if view.balance_subtopology else [0] * len(view.subtopology)
    n = len(tasks)
    per_sub: dict[int, int] = {}
    for i in tasks:
        per_sub[sub_of[i]] = per_sub.get(sub_of[i], 0) + 1
    procs = [p for p, (_, hi) in enumerate(room) if hi > 0]
    subs = sorted(per_sub)
    # node numbering: tasks, hubs (s, r), pairs (s, c), processes, pools, sink
    hub = {(s, r): n + k for k, (s, r) in enumerate((s, r) for s in subs for r in range(view.num_racks))}
    base = n + len(hub)
    pair = {(s, c): base + k for k, (s, c) in enumerate((s, c) for s in subs for c in procs)}
    node = {c: base + len(pair) + k for k, c in enumerate(procs)}
    pools: dict[int, list[int]] = {}  # per capacity class, its processes that may trade
    for c in procs:
        lo, hi = room[c]
        if hi > lo:
            pools.setdefault(capacity[c], []).append(c)
    pool = {key: base + len(pair) + len(procs) + k for k, key in enumerate(pools)}
    sink = base + len(pair) + len(procs) + len(pools)
    net = FlowNetwork(sink + 1)
    for (s, r), h in hub.items():
        for c in procs:
            if proc_rack[c] == r:
                net.add_edge(h, pair[s, c], n, 0)
    for (s, c), q in pair.items():
        net.add_edge(q, node[c], -(-room[c][1] * per_sub[s] // n) if view.balance_subtopology else n, 0)
    for c in procs:
        lo, hi = room[c]
        net.add_edge(node[c], sink, lo, 0)
        if hi > lo:
            net.add_edge(node[c], pool[capacity[c]], hi - lo, 0)
    for key, p in pool.items():
        # a class's pool passes exactly its extra units: the class keeps its total
        members = pools[key]
        net.add_edge(p, sink, _run_by(tasks, owner, members) - sum(room[c][0] for c in members), 0)
    direct: list[int] = []
    for k, i in enumerate(tasks):
        s, home = sub_of[i], owner[i]
        for r in range(view.num_racks):
            net.add_edge(k, hub[s, r], 1, traffic_cost * cross[i][r] + non_overlap_cost)
        direct.append(net.add_edge(k, pair[s, home], 1, traffic_cost * cross[i][proc_rack[home]]))
    for k in range(n):
        if not net.augment(k, sink):  # cannot happen: the caps add up to at least the counts
            raise AssertionError("rack-aware placement: no room left for a task")
    _decompose(tasks, owner, net, hubs=set(hub.values()), pair=pair, direct=direct)


def _run_by(tasks: Sequence[int], owner: list[int], members: list[int]) -> int:
    """How many of ``tasks`` the processes ``members`` run now (their total stays)."""
    inside = set(members)
    return sum(1 for i in tasks if owner[i] in inside)


def _decompose(
    tasks: Sequence[int],
    owner: list[int],
    net: FlowNetwork,
    *,
    hubs: set[int],
    pair: dict[tuple[int, int], int],
    direct: list[int],
) -> None:
    """Per task, the process its unit of flow reached: its own (the direct edge), or one that
    a hub's flow went on to (hub units handed out in task order, processes in index order)."""
    into_hub: dict[int, list[int]] = {}
    for k, i in enumerate(tasks):
        if net.flow(direct[k]):
            continue
        for e in net.head[k]:
            if e % 2 == 0 and net.flow(e) and net.to[e] in hubs:
                into_hub.setdefault(net.to[e], []).append(i)
    by_node = {q: c for (_, c), q in pair.items()}
    for h, comers in into_hub.items():
        slots = [
            by_node[net.to[e]]
            for e in sorted(net.head[h], key=lambda e: by_node.get(net.to[e], -1))
            if e % 2 == 0
            for _ in range(net.flow(e))
        ]
        for i, c in zip(sorted(comers), slots, strict=True):
            owner[i] = c


def cross_rack_traffic(state: ApplicationState, assignment: TaskAssignment) -> int:
    """The input partitions the actives read from another rack than their process's: a
    partition counts when it has replica racks and none is the process's rack (a process
    without rack reads everything across racks)."""
    return _read_across(state, assignment, standby=False)


def standby_changelog_traffic(state: ApplicationState, assignment: TaskAssignment) -> int:
    """The changelog partitions the standbys and warm-ups read from another rack than their
    process's (what Kafka Streams' standby optimisation weighs), counted like
    :func:`cross_rack_traffic`."""
    return _read_across(state, assignment, standby=True)


def _read_across(state: ApplicationState, assignment: TaskAssignment, *, standby: bool) -> int:
    known = state.partition_racks
    total = 0
    for p in assignment.processes:
        client = state.clients.get(p.process_id)
        rack = client.rack if client is not None else None
        for task in (*p.standby, *p.warmup) if standby else p.active:
            spec = state.tasks.get(task)
            if spec is None:
                continue
            for tp in spec.changelog_partitions if standby else spec.source_partitions:
                replicas = known.get(tp)
                if replicas and rack not in replicas:
                    total += 1
    return total
