"""A min-cost transportation of items between groups with fixed sizes, by cycle cancelling.

Each item sits in one of ``R`` groups; ``cost[i][r]`` is what item ``i`` costs in group ``r``.
:func:`min_cost_transport` moves items between groups, keeping every group's size, until the
total cost is the least any such arrangement has. It is the min-cost flow of the network
source -> item (capacity 1) -> group -> sink (capacity: the group's size), started from the
given (feasible, saturating) flow: a flow is optimal exactly when its residual network holds no
negative cycle, and every residual cycle runs group -> item -> group. So the search runs on the
small graph of groups alone, where the edge ``a -> b`` weighs the cheapest move of one item of
``a`` to ``b`` (``cost[i][b] - cost[i][a]``): a negative cycle there (Bellman-Ford) moves one
item along each of its edges -- distinct items, as the groups of a simple cycle are distinct --
and lowers the total by at least 1 (integer costs), so the loop ends.

Per ordered pair of groups a heap holds the moves out of ``a`` (stale entries, of items that
have left ``a``, are dropped when they surface), so one cancellation costs ``O(R^3 + R log n)``
rather than a pass over the items. Ties go to the lowest item index: deterministic.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

__all__ = ["FlowNetwork", "min_cost_transport", "transport_cost"]

_NONE = 1 << 62


def transport_cost(cost: Sequence[Sequence[int]], group: Sequence[int]) -> int:
    """The total cost of the arrangement ``group`` (item -> its group)."""
    return sum(cost[i][g] for i, g in enumerate(group))


def min_cost_transport(cost: Sequence[Sequence[int]], group: Sequence[int], num_groups: int) -> list[int]:
    """The least-cost arrangement with the same group sizes as ``group`` (item -> group index
    below ``num_groups``); items stay where moving them gains nothing."""
    where = list(group)
    r_count = num_groups
    if r_count < 2 or not where:
        return where
    heaps: list[list[list[tuple[int, int]]]] = [[[] for _ in range(r_count)] for _ in range(r_count)]
    for i, a in enumerate(where):
        _push(heaps, cost[i], i, a, r_count)
    for r in range(r_count):
        for b in range(r_count):
            heapq.heapify(heaps[r][b])
    while True:
        tops = [[_top(heaps[a][b], where, a) for b in range(r_count)] for a in range(r_count)]
        cycle = _negative_cycle(tops, r_count)
        if cycle is None:
            return where
        moves = [(tops[a][b][1], b) for a, b in cycle]  # peek all first: distinct items
        for i, b in moves:
            where[i] = b
            _push(heaps, cost[i], i, b, r_count, heap=True)


def _push(
    heaps: list[list[list[tuple[int, int]]]],
    row: Sequence[int],
    i: int,
    a: int,
    r_count: int,
    *,
    heap: bool = False,
) -> None:
    """Record the moves of item ``i`` (cost row ``row``) out of group ``a``."""
    here = row[a]
    for b in range(r_count):
        if b != a:
            entry = (row[b] - here, i)
            if heap:
                heapq.heappush(heaps[a][b], entry)
            else:
                heaps[a][b].append(entry)


def _top(h: list[tuple[int, int]], where: list[int], a: int) -> tuple[int, int]:
    """The cheapest live move in ``h`` (out of group ``a``), or ``(_NONE, -1)``."""
    while h:
        gain, i = h[0]
        if where[i] == a:
            return gain, i
        heapq.heappop(h)
    return _NONE, -1


def _negative_cycle(tops: list[list[tuple[int, int]]], r_count: int) -> list[tuple[int, int]] | None:
    """A negative cycle of the group graph as its edges ``(a, b)``, the most negative of those
    Bellman-Ford finds first, or ``None``."""
    best: list[tuple[int, int]] | None = None
    best_weight = 0
    # two-group cycles first: the common case, and cheap
    for a in range(r_count):
        for b in range(a + 1, r_count):
            w = tops[a][b][0] + tops[b][a][0]
            if w < best_weight:
                best, best_weight = [(a, b), (b, a)], w
    if best is not None:
        return best
    dist = [0] * r_count
    pred = [-1] * r_count
    last = -1
    for _ in range(r_count):
        last = -1
        for a in range(r_count):
            da = dist[a]
            row = tops[a]
            for b in range(r_count):
                w = row[b][0]
                if w < _NONE and da + w < dist[b]:
                    dist[b] = da + w
                    pred[b] = a
                    last = b
        if last < 0:
            return None
    v = last
    for _ in range(r_count):
        v = pred[v]
    cycle: list[tuple[int, int]] = []
    u = v
    while True:
        cycle.append((pred[u], u))
        u = pred[u]
        if u == v:
            break
    cycle.reverse()
    return cycle


class FlowNetwork:
    """A residual network for successive shortest paths (Dijkstra on reduced costs).

    Units enter one at a time at a node with no incoming edge (:meth:`augment`): the flow stays
    a least-cost one for the units sent so far (the Hungarian method's invariant), so sending
    every unit gives a min-cost flow. Costs must be >= 0."""

    __slots__ = ("cap", "cost", "head", "pot", "to")

    def __init__(self, num_nodes: int) -> None:
        self.head: list[list[int]] = [[] for _ in range(num_nodes)]
        self.to: list[int] = []
        self.cap: list[int] = []
        self.cost: list[int] = []
        self.pot = [0] * num_nodes

    def add_edge(self, u: int, v: int, cap: int, cost: int) -> int:
        """An edge ``u -> v``; its index (its flow is the reverse edge's capacity)."""
        e = len(self.to)
        self.to += [v, u]
        self.cap += [cap, 0]
        self.cost += [cost, -cost]
        self.head[u].append(e)
        self.head[v].append(e + 1)
        return e

    def flow(self, e: int) -> int:
        return self.cap[e ^ 1]

    def augment(self, s: int, t: int) -> bool:
        """Send one unit from ``s`` (a node no edge enters) to ``t`` along a cheapest path."""
        return self.push(s, t, 1) > 0

    def push(self, s: int, t: int, limit: int) -> int:
        """Send up to ``limit`` units from ``s`` to ``t`` along one cheapest path (as many as
        its narrowest edge takes); how many were sent (0: no path). ``s`` is the only source:
        edges back into it (flow sent before) are never on a cheapest path from it."""
        to, cap, cost, pot, head = self.to, self.cap, self.cost, self.pot, self.head
        # s has no residual edge in: a potential that keeps its edges' reduced costs >= 0
        pot[s] = max((pot[to[e]] - cost[e] for e in head[s] if cap[e] > 0), default=0)
        inf = _NONE
        dist: dict[int, int] = {s: 0}
        via: dict[int, int] = {}
        done: set[int] = set()
        heap = [(0, s)]
        while heap:
            d, u = heapq.heappop(heap)
            if u in done:
                continue
            done.add(u)
            if u == t:
                break
            base = d + pot[u]
            for e in head[u]:
                if cap[e] > 0:
                    v = to[e]
                    nd = base + cost[e] - pot[v]
                    if nd < dist.get(v, inf):
                        dist[v] = nd
                        via[v] = e
                        heapq.heappush(heap, (nd, v))
        if t not in done:
            return 0
        dt = dist[t]
        for v in done:
            pot[v] += min(dist[v], dt)
        for v in range(len(pot)):
            if v not in done:
                pot[v] += dt
        units, v = limit, t
        while v != s:
            e = via[v]
            units = min(units, cap[e])
            v = to[e ^ 1]
        v = t
        while v != s:
            e = via[v]
            cap[e] -= units
            cap[e ^ 1] += units
            v = to[e ^ 1]
        return units
