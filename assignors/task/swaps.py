"""The high-availability assignor's swap partners, found through an index instead of a scan.

Before pinning a stateful task ``i`` on a caught-up process ``p`` (its destination ``d`` is not
caught up), :class:`~assignors.task.high_availability.HighAvailabilityTaskAssignor` looks for a
task ``j`` destined to ``p`` that can take ``i``'s place on ``d`` (:meth:`SwapPartners.take`):
one caught up on ``d``, or one nobody is caught up on whose state on ``d`` is no further behind
than on ``p``; a task running on ``p`` only when ``move_running``. The best is the least by
``(runs on p, rank on d, task)``.

Scanning the pool of ``p`` for every pin costs tasks x tasks / processes per assignment (a few
processes and 20,000 tasks: seconds). The answer splits in two parts that are cheap to find:

- tasks whose lag rows name ``d``: their key does not change during the assignment, so each
  ``(pool, d)`` pair keeps its eligible tasks sorted by key, built on first use;
- tasks whose rows name neither ``d`` nor (below the no-lag rank) ``p``, nobody being caught up
  on them: all share the key ``(False, no lag, task)``; the first of the pool's ascending list
  of such tasks (``p`` is fixed per pool) that does not name ``d`` is the best of them.

A task leaves its pool when it is taken or pinned (:meth:`SwapPartners.discard`) and never
joins another: pools are the destinations at the first pin. Tasks that left are skipped (and
dropped from the front of a list) when met.

When no pool of a caught-up process has a partner for ``d``, :meth:`SwapPartners.chain` looks
for a chain of them: a task of ``p``'s pool that can take a place on ``q1``, one of ``q1``'s
that can take a place on ``q2``, ..., one that can take the place on ``d`` (each hop by the rule
of :meth:`SwapPartners.take`). It searches backwards from ``d``, breadth first (the shortest
chain: the fewest tasks shifted), through the pools that may hold a partner for a process: those
with a task whose rows name it, and those with a task nobody is caught up on that names neither
(a partner for any process). Both are kept as sets of pools; a pool stays in them after its
tasks left (the partner query then answers none), so they cost nothing to maintain.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

__all__ = ["NO_LAG", "RUNNING_RANK", "Hop", "Ranked", "SwapPartners"]

#: The rank of a process reporting no lag for a task.
NO_LAG = 1 << 62
#: The rank of a process running the task (``RUNNING_LAG``).
RUNNING_RANK = -1

_Key = tuple[bool, int, int]
#: One hop of a chain: ``(task, from process, to process)``.
Hop = tuple[int, int, int]


@dataclass(frozen=True, slots=True, kw_only=True)
class Ranked:
    """Per task, the processes reporting a lag sorted by (rank, process), with their ranks."""

    start: list[int]
    items: list[int]
    ranks: list[int]

    def rank_of(self, task: int, process: int) -> int:
        """``process``'s rank for ``task`` (:data:`NO_LAG` when it reports none)."""
        items = self.items
        for k in range(self.start[task], self.start[task + 1]):
            if items[k] == process:
                return self.ranks[k]
        return NO_LAG

    def names(self, task: int, process: int) -> bool:
        """``process`` reports a lag for ``task``."""
        return process in self.items[self.start[task] : self.start[task + 1]]

    def nobody_caught_up(self, task: int) -> bool:
        first = self.start[task]
        return first == self.start[task + 1] or self.ranks[first] > 0


class SwapPartners:
    """The pools of swap partners: ``tasks`` by ``destination`` (module docstring)."""

    def __init__(self, ranked: Ranked, tasks: Iterable[int], destination: Sequence[int], num_processes: int):
        self._ranked = ranked
        self._n = num_processes
        self._pool: dict[int, int] = {}
        #: (pool * processes + process) -> tasks of the pool whose rows name the process, ascending.
        self._naming: dict[int, list[int]] = {}
        #: (pool * processes + d) -> [next index, (key, task) eligible for d, by key]; built on use.
        self._by_key: dict[int, tuple[list[int], list[tuple[_Key, int]]]] = {}
        #: pool -> [next index, tasks nobody is caught up on whose rows do not rank the pool].
        self._free: dict[int, tuple[list[int], list[int]]] = {}
        #: process -> pools with a task whose rows name it (its possible partners, with _free).
        self._named_by: dict[int, set[int]] = {}
        #: pool -> the processes its tasks' rows name (where they may go, with _free).
        self._names: dict[int, set[int]] = {}
        #: (d, move_running) -> every process that could reach d when a search last ran out.
        self._reachable: dict[tuple[int, bool], frozenset[int]] = {}
        #: (d, move_running) -> the tree of the last search that ran out.
        self._trees: dict[tuple[int, bool], dict[int, tuple[int, int]]] = {}
        #: Processes no chain can reach (a search ran out without finding any): it stays so.
        self.unreachable: set[int] = set()
        start, items = ranked.start, ranked.items
        n = num_processes
        for j in tasks:
            p = destination[j]
            self._pool[j] = p
            for k in range(start[j], start[j + 1]):
                self._naming.setdefault(p * n + items[k], []).append(j)
            if ranked.nobody_caught_up(j) and ranked.rank_of(j, p) >= NO_LAG:
                self._free.setdefault(p, ([0], []))[1].append(j)
        for slot in self._naming:
            p, named = divmod(slot, n)
            self._named_by.setdefault(named, set()).add(p)
            self._names.setdefault(p, set()).add(named)

    def discard(self, task: int) -> None:
        """``task`` leaves its pool (it was taken, or pinned elsewhere)."""
        self._pool.pop(task, None)

    def take(self, p: int, d: int, *, move_running: bool) -> int:
        """The best partner in ``p``'s pool for a place on ``d``, removed from the pool; -1: none."""
        best = self._best_naming(p, d, move_running)
        free = self._best_free(p, d)
        j = free if free >= 0 and (best is None or (False, NO_LAG, free) < best[0]) else -1
        if j < 0 and best is not None:
            j = best[1]
        if j >= 0:
            self._pool.pop(j, None)
        return j

    def peek(self, p: int, d: int, *, move_running: bool) -> int:
        """The partner :meth:`take` would give, left in the pool; -1: none."""
        best = self._best_naming(p, d, move_running)
        free = self._best_free(p, d)
        if free >= 0 and (best is None or (False, NO_LAG, free) < best[0]):
            return free
        return -1 if best is None else best[1]

    def chain(self, d: int, *, starts: Sequence[int], move_running: bool) -> list[Hop] | None:
        """The shortest chain from one of ``starts`` (best first on a tie) to ``d``: hops
        ``(task, from, to)`` in order, the first from a start, the last to ``d``, each task the
        partner :meth:`peek` gives; ``None`` when there is none. Nothing is taken."""
        reachable = self._reachable.get((d, True)) or self._reachable.get((d, move_running))
        if reachable is not None and (len(reachable) == 1 or not any(p in reachable for p in starts)):
            return None
        wanted = {p: rank for rank, p in enumerate(starts) if p != d}
        if not wanted:
            return None
        parent = self._reach(d, move_running=move_running, until=wanted)
        found = [p for p in wanted if p in parent]
        if not found:
            return None
        depth = {p: self._depth(parent, p) for p in found}
        p = min(found, key=lambda q: (depth[q], wanted[q]))
        return self._path(parent, p)

    def feeders(self, d: int, *, move_running: bool) -> dict[int, list[Hop]]:
        """Every process with a chain to ``d`` (shortest, as :meth:`chain` finds it): its hops."""
        reachable = self._reachable.get((d, True)) or self._reachable.get((d, move_running))
        if reachable is not None and len(reachable) == 1:
            return {}
        parent = self._trees.get((d, move_running))
        if parent is None or not all(self._in_pool(j, q) for q, (_, j) in parent.items() if j >= 0):
            parent = self._reach(d, move_running=move_running, until=None)
        return {p: self._path(parent, p) for p in parent if p != d}

    def targets(self, p: int) -> list[int]:
        """The processes a task of ``p``'s pool may take a place on, ascending (a superset)."""
        if p in self._free:
            return [q for q in range(self._n) if q != p]
        return sorted(self._names.get(p, set()) - {p})

    def _reach(
        self, d: int, *, move_running: bool, until: Mapping[int, int] | None
    ) -> dict[int, tuple[int, int]]:
        """Backwards breadth-first search from ``d``: process -> (next process, partner task);
        ``d`` maps to itself. Stops after the first layer that reaches one of ``until``. A search
        that ran to its end is remembered: pools only lose tasks, so no process outside it can
        reach ``d`` later either."""
        parent: dict[int, tuple[int, int]] = {d: (d, -1)}
        layer = [d]
        loose = self._free.keys()
        every_loose = sorted(loose)
        named_by = self._named_by
        peek = self.peek
        while layer:
            following: list[int] = []
            for r in layer:
                senders = named_by.get(r)
                for q in sorted(senders | loose) if senders else every_loose:
                    if q in parent:
                        continue
                    j = peek(q, r, move_running=move_running)
                    if j >= 0:
                        parent[q] = (r, j)
                        following.append(q)
            if until is not None and any(q in until for q in following):
                return parent
            layer = following
        self._reachable[d, move_running] = frozenset(parent)
        # with its partners still in their pools a search gives this tree again (pools only lose
        # tasks, so no edge appears and each partner stays the best)
        self._trees[d, move_running] = parent
        if move_running and len(parent) == 1:
            self.unreachable.add(d)
        return parent

    @staticmethod
    def _depth(parent: Mapping[int, tuple[int, int]], p: int) -> int:
        depth = 0
        while parent[p][1] >= 0:
            p = parent[p][0]
            depth += 1
        return depth

    @staticmethod
    def _path(parent: Mapping[int, tuple[int, int]], p: int) -> list[Hop]:
        hops: list[Hop] = []
        while parent[p][1] >= 0:
            r, j = parent[p]
            hops.append((j, p, r))
            p = r
        return hops

    def _in_pool(self, task: int, p: int) -> bool:
        return self._pool.get(task, -1) == p

    def _best_naming(self, p: int, d: int, move_running: bool) -> tuple[_Key, int] | None:
        slot = p * self._n + d
        entry = self._by_key.get(slot)
        if entry is None:
            entry = self._by_key[slot] = ([0], self._eligible(p, d))
        head, keyed = entry
        k = head[0]
        while k < len(keyed) and not self._in_pool(keyed[k][1], p):
            k += 1
        head[0] = k
        for key, j in keyed[k:]:
            if key[0] and not move_running:
                return None  # sorted: only tasks running on p are left
            if self._in_pool(j, p):
                return key, j
        return None

    def _eligible(self, p: int, d: int) -> list[tuple[_Key, int]]:
        ranked = self._ranked
        out = []
        for j in self._naming.get(p * self._n + d, ()):
            rank_d = ranked.rank_of(j, d)
            rank_p = ranked.rank_of(j, p)
            if rank_d > 0 and (not ranked.nobody_caught_up(j) or rank_d > rank_p):
                continue
            out.append(((rank_p == RUNNING_RANK, rank_d, j), j))
        out.sort()
        return out

    def _best_free(self, p: int, d: int) -> int:
        entry = self._free.get(p)
        if entry is None:
            return -1
        head, tasks = entry
        k = head[0]
        while k < len(tasks) and not self._in_pool(tasks[k], p):
            k += 1
        head[0] = k
        ranked = self._ranked
        for j in tasks[k:]:
            if self._in_pool(j, p) and not ranked.names(j, d):
                return j
        return -1
