"""Sticky, balanced placement of tasks onto processes by per-thread quota.

Balance is measured per thread: a process with ``c`` threads should run ``c`` times the tasks of a
one-thread process. For ``T`` tasks on processes of total capacity ``C`` a process with ``c``
threads gets a quota of ``lo = floor(T*c/C)`` tasks, or ``hi = lo + 1`` when ``T*c/C`` is not a
whole number; exactly ``E = T - sum(lo)`` processes take the extra task. Any assignment within these
quotas has tasks-per-thread that differ by at most one between any two processes.

When some processes already run more than their share (``base`` counts that must stay, e.g.
stateful actives pinned to the only caught-up process), they are set aside and the quotas are
recomputed over the rest: water-filling, so the remaining processes are balanced among
themselves.

Placement, in passes over the tasks (each in the order given):

1. a task stays with its first ``sticky`` process that is still below ``lo``;
2. then with one that is at ``lo`` and may take an extra task (while extras remain);
3. then with the first ``secondary`` candidate (previous standby, caught-up process, ...) that
   has room;
4. the rest are dealt round-robin, in process order, to the processes still below ``lo``, then
   to those that may take an extra task: lowest ``lo/c`` first (raise the floor), then lowest
   ``hi/c``, then process order. With mixed capacities the quotas alone allow an idle process
   beside ones that run a full thread's worth more (4 tasks on 2+2+1+1 threads: 2/2/0/0 is
   within them, 1/1/1/1 is the balanced answer).

Keeping ``min(previous, lo)`` tasks everywhere and handing the extras to processes that had more
is what makes the number of moved tasks the smallest any balanced assignment allows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from assignors.task.indexed import Rows
from streamtasks.errors import AssignorError

__all__ = ["Quotas", "balanced_fill", "compute_quotas"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Quotas:
    """Per-process ``lo`` / ``hi`` quotas and the number of extra (``hi``) slots left to hand out."""

    lo: list[int]
    hi: list[int]
    extras: int


def compute_quotas(total: int, capacity: Sequence[int], base: Sequence[int]) -> Quotas:
    """Quotas for ``total`` tasks of which ``base[p]`` already sit on process ``p``.

    Processes whose ``base`` exceeds their share are set aside (their quota is their ``base``) and
    the share of the others is recomputed, until every remaining process fits.
    """
    n = len(capacity)
    inside = [True] * n
    lo = [0] * n
    hi = [0] * n
    while True:
        cap = 0
        share = total
        for p in range(n):
            if inside[p]:
                cap += capacity[p]
            else:
                share -= base[p]
        if cap == 0:
            break
        lo_sum = 0
        for p in range(n):
            if inside[p]:
                q, r = divmod(share * capacity[p], cap)
                lo[p] = q
                hi[p] = q + 1 if r else q
                lo_sum += q
        over = [p for p in range(n) if inside[p] and base[p] > hi[p]]
        if not over:
            at_hi = [p for p in range(n) if inside[p] and base[p] > lo[p]]
            if len(at_hi) <= share - lo_sum:
                extras = share - lo_sum - len(at_hi)
                for p in range(n):
                    if not inside[p]:
                        lo[p] = hi[p] = base[p]
                return Quotas(lo=lo, hi=hi, extras=extras)
            over = at_hi
        for p in over:
            inside[p] = False
    for p in range(n):
        lo[p] = hi[p] = base[p]
    return Quotas(lo=lo, hi=hi, extras=0)


def balanced_fill(
    tasks: Sequence[int],
    capacity: Sequence[int],
    counts: list[int],
    owner: list[int],
    *,
    sticky: Rows,
    secondary: Callable[[int], Iterable[int]] | None = None,
) -> None:
    """Place ``tasks`` (ascending indices into ``owner`` / ``sticky``); update ``owner`` and ``counts``.

    ``counts[p]`` holds the tasks process ``p`` already runs (they stay); row ``i`` of ``sticky``
    lists the processes task ``i`` would rather stay on, best first; ``secondary(i)`` is asked for further
    candidates for a task that could not stay.
    """
    if not tasks:
        return
    total = sum(counts) + len(tasks)
    quotas = compute_quotas(total, capacity, counts)
    lo, hi = quotas.lo, quotas.hi
    extras = quotas.extras

    start, items = sticky.start, sticky.items
    pending: list[int] = []
    rest: list[int] = []
    for i in tasks:
        first, end = start[i], start[i + 1]
        if first == end:
            rest.append(i)
            continue
        for k in range(first, end):
            p = items[k]
            if counts[p] < lo[p]:
                owner[i] = p
                counts[p] += 1
                break
        else:
            pending.append(i)

    if pending:
        waiting = rest
        rest = []
        for i in pending:
            if extras:
                for k in range(start[i], start[i + 1]):
                    p = items[k]
                    if counts[p] == lo[p] < hi[p]:
                        owner[i] = p
                        counts[p] += 1
                        extras -= 1
                        break
                else:
                    rest.append(i)
            else:
                rest.append(i)
        # back in task order: the tasks without a previous owner were set aside in pass 1
        rest = sorted(rest + waiting) if waiting and rest else rest or waiting

    if secondary is not None and rest:
        unplaced: list[int] = []
        for i in rest:
            chosen = -1
            for p in secondary(i):
                c = counts[p]
                if c < lo[p]:
                    chosen = p
                    break
                if chosen < 0 and extras and c == lo[p] < hi[p]:
                    chosen = p
            if chosen < 0:
                unplaced.append(i)
                continue
            if counts[chosen] >= lo[chosen]:
                extras -= 1
            owner[i] = chosen
            counts[chosen] += 1
        rest = unplaced

    placed = 0
    if rest:
        ring = [p for p in range(len(counts)) if counts[p] < lo[p]]
        while ring and placed < len(rest):
            again: list[int] = []
            for p in ring:
                if placed == len(rest):
                    break
                owner[rest[placed]] = p
                placed += 1
                counts[p] += 1
                if counts[p] < lo[p]:
                    again.append(p)
            ring = again
    if placed < len(rest):
        # The extras raise the lowest per-thread loads first (then the ones an extra raises least):
        # with mixed capacities "process order" could give them to the processes already carrying
        # the most per thread and leave another one idle.
        takers = [p for p in range(len(counts)) if counts[p] == lo[p] < hi[p]]
        if len({capacity[p] for p in takers}) > 1:
            takers.sort(key=lambda p: (lo[p] / capacity[p], hi[p] / capacity[p], p))
        for p in takers:
            if placed == len(rest) or not extras:
                break
            if counts[p] == lo[p] < hi[p]:
                owner[rest[placed]] = p
                placed += 1
                counts[p] += 1
                extras -= 1
    if placed < len(rest):
        raise AssignorError(f"internal error: {len(rest) - placed} tasks left over after filling every quota")
