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
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["NO_LAG", "RUNNING_RANK", "Ranked", "SwapPartners"]

#: The rank of a process reporting no lag for a task.
NO_LAG = 1 << 62
#: The rank of a process running the task (``RUNNING_LAG``).
RUNNING_RANK = -1

_Key = tuple[bool, int, int]


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
        start, items = ranked.start, ranked.items
        n = num_processes
        for j in tasks:
            p = destination[j]
            self._pool[j] = p
            for k in range(start[j], start[j + 1]):
                self._naming.setdefault(p * n + items[k], []).append(j)
            if ranked.nobody_caught_up(j) and ranked.rank_of(j, p) >= NO_LAG:
                self._free.setdefault(p, ([0], []))[1].append(j)

    def discard(self, task: int) -> None:
        """``task`` leaves its pool (it was taken, or pinned elsewhere)."""
        self._pool.pop(task, None)

    def take(self, p: int, d: int, *, move_running: bool) -> int:
        """The best partner in ``p``'s pool for a place on ``d``, removed from the pool; -1: none."""
        best = self._best_naming(p, d, move_running)
        free = self._best_free(p, d)
        if free >= 0 and (best is None or (False, NO_LAG, free) < best[0]):
            self.discard(free)
            return free
        if best is None:
            return -1
        self.discard(best[1])
        return best[1]

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
