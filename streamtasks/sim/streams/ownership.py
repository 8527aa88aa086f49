"""Who holds which task, kept up to date one holder at a time: what the streams-group checks
need to know after every event without walking every process (:mod:`streamtasks.sim.streams.checks`).

A holder (a process, or a member's target) has a process id, the tasks it runs as active and the
ones it keeps beside them (standbys and warm-ups). The index answers, in constant time, whether
the holders are *clean* (no task active on two holders, no holder keeping a task a holder of its
process id runs as active) and how many tasks of a given set no holder runs as active. Replacing
a holder costs the size of its tasks (and a look at the few other holders of its process id).
"""

from __future__ import annotations

from dataclasses import dataclass

from streamtasks.membership.streams.records import Task

__all__ = ["Holding", "OwnershipIndex"]


@dataclass(frozen=True, slots=True)
class Holding:
    process_id: str
    active: frozenset[Task]
    beside: frozenset[Task]


class OwnershipIndex:
    """Holdings by key, with the counts that decide :attr:`clean` and :attr:`missing`."""

    def __init__(self) -> None:
        self._held: dict[str, Holding] = {}
        #: how many holders run each task as active (tasks no holder runs are absent)
        self._owners: dict[Task, int] = {}
        self._doubled = 0  # tasks with two or more active holders
        #: per process id: its holders, and how many of them run each task as active
        self._keys_of: dict[str, set[str]] = {}
        self._active_of: dict[str, dict[Task, int]] = {}
        self._beside_active: set[str] = set()  # holders keeping a task their process runs
        self._tasks: frozenset[Task] = frozenset()
        self._missing = 0

    @property
    def clean(self) -> bool:
        return not self._doubled and not self._beside_active

    @property
    def holders(self) -> int:
        return len(self._held)

    @property
    def missing(self) -> int:
        """How many tasks of :meth:`expect`'s set no holder runs as active."""
        return self._missing

    def expect(self, tasks: frozenset[Task]) -> None:
        """The tasks :attr:`missing` counts (counted again only when the set is another)."""
        if tasks is not self._tasks:
            self._tasks = tasks
            self._missing = sum(1 for t in tasks if t not in self._owners)

    def keys(self) -> list[str]:
        return list(self._held)

    def put(self, key: str, holding: Holding | None) -> None:
        """Replace what ``key`` holds (``None``: it holds nothing)."""
        old = self._held.get(key)
        if old == holding:
            return
        if old is not None:
            del self._held[key]
            self._keys_of[old.process_id].discard(key)
            self._count(old.process_id, old.active, -1)
            self._beside_active.discard(key)
            self._recheck(old.process_id)
        if holding is not None:
            self._held[key] = holding
            self._keys_of.setdefault(holding.process_id, set()).add(key)
            self._count(holding.process_id, holding.active, 1)
            self._recheck(holding.process_id)

    def _count(self, process_id: str, tasks: frozenset[Task], by: int) -> None:
        owners, expected = self._owners, self._tasks
        of_process = self._active_of.setdefault(process_id, {})
        for task in tasks:
            n = owners.get(task, 0) + by
            if n:
                owners[task] = n
            else:
                del owners[task]
            if (n == 2 and by > 0) or (n == 1 and by < 0):
                self._doubled += by
            if task in expected and ((n == 1 and by > 0) or (n == 0 and by < 0)):
                self._missing -= by
            m = of_process.get(task, 0) + by
            if m:
                of_process[task] = m
            else:
                del of_process[task]

    def _recheck(self, process_id: str) -> None:
        running = self._active_of.get(process_id, {})
        for key in self._keys_of.get(process_id, ()):
            if any(t in running for t in self._held[key].beside):
                self._beside_active.add(key)
            else:
                self._beside_active.discard(key)
