"""KIP-925's ``min_traffic`` placement of stateful and stateless actives in one flow.

Kafka Streams places the stateful actives (a min-cost flow keeping each process's count), then
fills the stateless ones onto the least loaded processes and runs a second flow over them
keeping those counts. The second flow only sees the counts the first one left: which processes
carry the one more stateful task decides how many stateless tasks each takes, and so which
stateless tasks can read on their rack. :func:`optimize_jointly` weighs both kinds at once.

The balance it keeps, per capacity class (processes with the same thread count):

* stateful actives: the class's counts stay the same multiset; when they differ by one, any
  process of the class may carry the one more (the same number of them do);
* all actives: the same, for the totals (stateful + stateless) of each process.

So the stateful spread and the active spread are those of the balanced start. Kafka Streams'
two phases end with counts of the same shape (balanced stateful counts, then stateless onto the
least loaded processes), so on processes of one capacity its answer is one of the placements
this flow weighs.

The network (successive shortest paths, :class:`~assignors.task.min_cost_flow.FlowNetwork`):
a stateful task goes through a stateful hub per rack to a process's stateful node ``S_p``, or
straight to its current process's; ``S_p -> T_p`` carries the process's least stateful count
at no cost and its one more at a cost ``big`` above any placement's, so that every least count
is met and the one more goes where it gains most (the number of them is fixed by the total); a
stateless task goes through a stateless hub per rack to ``T_p``; ``T_p -> sink`` carries the
least total, and the room above it goes through one pool per class passing exactly the class's
extra units. A task costs ``traffic_cost`` per input partition with no replica on the rack
(the same weight for both kinds: the measure is partitions read across racks), plus, for a
stateful task off its current process, ``non_overlap_cost`` when it is *anchored* (some process
ran it or holds state for it; moving a task nobody has state for costs nothing).
"""

from __future__ import annotations

from collections.abc import Sequence

from assignors.task.min_cost_flow import FlowNetwork
from assignors.task.rack_aware import RackView

__all__ = ["add_balanced_sinks", "class_ranges", "optimize_jointly"]


def class_ranges(
    counts: Sequence[int], capacity: Sequence[int]
) -> tuple[list[tuple[int, int]], dict[int, int]]:
    """Per process the least and most it may end with, and per capacity class whose counts
    differ by exactly one, how many of its processes carry the one more."""
    by_class: dict[int, list[int]] = {}
    for p, c in enumerate(capacity):
        by_class.setdefault(c, []).append(p)
    ranges = [(n, n) for n in counts]
    extras: dict[int, int] = {}
    for c, members in by_class.items():
        values = [counts[p] for p in members]
        low = min(values)
        if max(values) == low + 1:
            extras[c] = values.count(low + 1)
            for p in members:
                ranges[p] = (low, low + 1)
    return ranges, extras


def add_balanced_sinks(
    net: FlowNetwork,
    nodes: Sequence[int],
    ranges: tuple[list[tuple[int, int]], dict[int, int]],
    capacity: Sequence[int],
    *,
    pool: dict[int, int],
    sink: int,
) -> None:
    """Edges from each process's node to ``sink``: its least count, and the room above it
    through its class's pool (``pool``: class -> node), which passes exactly the class's
    units of one more (``ranges``: :func:`class_ranges`)."""
    room, extra = ranges
    for p, node in enumerate(nodes):
        lo, hi = room[p]
        net.add_edge(node, sink, lo, 0)
        if hi > lo:
            net.add_edge(node, pool[capacity[p]], hi - lo, 0)
    for c, node in pool.items():
        net.add_edge(node, sink, extra[c], 0)


def optimize_jointly(
    view: RackView,
    stateful: Sequence[int],
    stateless: Sequence[int],
    owner: list[int],
    capacity: Sequence[int],
    *,
    traffic_cost: int,
    non_overlap_cost: int,
    anchored: Sequence[bool],
) -> None:
    """Move the actives ``stateful`` and ``stateless`` (each owned: ``owner[i] >= 0``) between
    processes to the least cost with the balance kept (module docstring); ``owner`` is updated
    in place. ``anchored[i]``: whether moving stateful task ``i`` pays ``non_overlap_cost``."""
    if view.num_racks < 2 or not (stateful or stateless):
        return
    num_p = len(capacity)
    count_s = [0] * num_p
    count_t = [0] * num_p
    for i in stateful:
        count_s[owner[i]] += 1
        count_t[owner[i]] += 1
    for i in stateless:
        count_t[owner[i]] += 1
    room_s, extra_s = class_ranges(count_s, capacity)
    if len(extra_s) > 1:  # one flow cannot keep two classes' numbers of the one more apart
        keep = min(extra_s, key=lambda c: (-capacity.count(c), c))
        room_s = [r if capacity[p] == keep else (count_s[p], count_s[p]) for p, r in enumerate(room_s)]
    ranges_t = class_ranges(count_t, capacity)
    proc_rack, cross, racks = view.proc_rack, view.cross, view.num_racks
    n_s = len(stateful)
    # tasks alike (kind, cross-rack row, the process an anchored one would leave) form a class
    classes: dict[tuple[bool, tuple[int, ...], int], list[int]] = {}
    for kind, group in ((True, stateful), (False, stateless)):
        for i in group:
            home = owner[i] if kind and anchored[i] and non_overlap_cost else -1
            classes.setdefault((kind, tuple(cross[i]), home), []).append(i)
    n = len(classes)
    # nodes: source, classes, stateful hubs, stateless hubs, S_p, T_p, pools, sink
    source, hub_s, hub_l = n, n + 1, n + 1 + racks
    node_s, node_t = n + 1 + 2 * racks, n + 1 + 2 * racks + num_p
    pool = {c: node_t + num_p + k for k, c in enumerate(sorted(ranges_t[1]))}
    sink = node_t + num_p + len(pool)
    net = FlowNetwork(sink + 1)
    big = 1 + sum(traffic_cost * max(cross[i]) + non_overlap_cost for i in (*stateful, *stateless))
    for p in range(num_p):
        r = proc_rack[p]
        net.add_edge(hub_s + r, node_s + p, n_s, 0)
        net.add_edge(hub_l + r, node_t + p, len(stateless), 0)
        lo, hi = room_s[p]
        net.add_edge(node_s + p, node_t + p, lo, 0)
        if hi > lo:
            net.add_edge(node_s + p, node_t + p, hi - lo, big)
    add_balanced_sinks(net, range(node_t, node_t + num_p), ranges_t, capacity, pool=pool, sink=sink)
    out: list[list[int]] = []  # per class: its edge home (or -1), then its edges to the hubs
    for c, ((kind, row, home), members) in enumerate(classes.items()):
        size = len(members)
        net.add_edge(source, c, size, 0)
        move = non_overlap_cost if home >= 0 else 0
        hub = hub_s if kind else hub_l
        edges = [
            net.add_edge(c, node_s + home, size, traffic_cost * row[proc_rack[home]]) if home >= 0 else -1
        ]
        edges += [net.add_edge(c, hub + r, size, traffic_cost * row[r] + move) for r in range(racks)]
        out.append(edges)
    left = n_s + len(stateless)
    while left:
        sent = net.push(source, sink, left)
        if not sent:  # cannot happen: the start is a flow of every task
            raise AssertionError("rack-aware placement: no room left for a task")
        left -= sent
    _read_back(net, list(classes.values()), out, owner, hubs=(hub_l, node_s, node_t))


def _read_back(
    net: FlowNetwork,
    classes: list[list[int]],
    out: list[list[int]],
    owner: list[int],
    *,
    hubs: tuple[int, int, int],
) -> None:
    """The flow's answer into ``owner``: per class, its tasks in order (those staying first,
    then into the hubs in rack order); per hub, its tasks in order to its units, processes in
    order. ``hubs``: the first stateless hub, the first stateful and stateless process nodes."""
    hub_l, node_s, node_t = hubs
    comers: dict[int, list[int]] = {}
    for c, members in enumerate(classes):
        edges, rest = out[c], sorted(members)
        if edges[0] >= 0:
            rest = rest[net.flow(edges[0]) :]
        for e in edges[1:]:
            units = net.flow(e)
            comers.setdefault(net.to[e], []).extend(rest[:units])
            rest = rest[units:]
    for h, arriving in comers.items():
        slots = [
            net.to[e] - (node_s if h < hub_l else node_t)
            for e in sorted((e for e in net.head[h] if e % 2 == 0), key=lambda e: net.to[e])
            for _ in range(net.flow(e))
        ]
        for i, p in zip(sorted(arriving), slots, strict=True):
            owner[i] = p
