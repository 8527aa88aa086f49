"""Sticky, balanced placement of tasks onto processes by per-thread quota.

Balance is measured per thread: a process with ``c`` threads should run ``c`` times the tasks of a
one-thread process, and the measure is the spread of the per-thread loads ``tasks / c`` (largest
minus smallest), as Kafka Streams measures it. Each process gets a band of task counts,
``lo .. hi``, and any assignment within the bands has the smallest spread the thread counts
allow:

* every process has the same number of threads: ``lo = floor(T*c/C)`` and ``hi = lo + 1`` when
  ``T*c/C`` is not a whole number (``T`` tasks, ``C`` threads in all); exactly ``E = T - sum(lo)``
  processes take the extra task, and per-thread loads differ by at most ``1/c``;
* thread counts differ: that band can be coarser than need be (29 tasks on 2 + 1 threads:
  20 / 9 is within it, 10 against 9 per thread, where 19 / 10 gives 9.5 against 10), so the
  band is the per-thread one, ``[L, H]``: a process runs between ``ceil(L*c)`` and
  ``floor(H*c)`` tasks, where ``H - L`` is the smallest spread any assignment of the ``T``
  tasks has (:func:`_mixed_quotas`; ``L`` and ``H`` are fractions ``a / c``). ``E = T -
  sum(lo)`` tasks go above the floors, several to one process where its band allows.

When some processes already run more than their band (``base`` counts that must stay, e.g.
stateful actives pinned to the only caught-up process), they are set aside and the bands are
recomputed over the rest: water-filling, so the remaining processes are balanced among
themselves (with mixed thread counts, towards the smallest spread over every process).

Placement, in passes over the tasks (each in the order given):

1. a task stays with its first ``sticky`` process that is still below ``lo``;
2. then with one that is within its band and may take an extra task (while extras remain);
3. then with the first ``secondary`` candidate (previous standby, caught-up process, ...) that
   has room;
4. the rest are dealt round-robin, in process order, to the processes still below ``lo``, then
   to those that may take an extra task: with equal thread counts in process order, with mixed
   ones to the lowest per-thread load first (then the one an extra raises least, then process
   order), so that the extras raise the floor.

Keeping ``min(previous, lo)`` tasks everywhere and handing the extras to processes that had more
is what makes the number of moved tasks the smallest the bands allow; where several per-thread
bands have the same spread, the one that keeps the most tasks where they ran is chosen.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from heapq import heapify, heappop, heappush
from itertools import accumulate

from assignors.task.indexed import Rows
from streamtasks.errors import AssignorError

__all__ = ["Quotas", "balanced_fill", "compute_quotas"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Quotas:
    """Per-process ``lo`` / ``hi`` quotas and the number of tasks left to hand out above the
    ``lo`` quotas (``extras``), each to a process still below its ``hi``."""

    lo: list[int]
    hi: list[int]
    extras: int


def compute_quotas(
    total: int, capacity: Sequence[int], base: Sequence[int], *, previous: Sequence[int] | None = None
) -> Quotas:
    """Quotas for ``total`` tasks of which ``base[p]`` already sit on process ``p``.

    Processes whose ``base`` exceeds their share are set aside (their quota is their ``base``) and
    the share of the others is recomputed, until every remaining process fits. With mixed thread
    counts, ``previous[p]`` (tasks that would rather stay on ``p``) picks among per-thread bands
    of the same spread the one that keeps the most.
    """
    if len(set(capacity)) > 1:
        return _mixed_quotas(total, capacity, base, previous)
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


def _ceil(x: Fraction, c: int) -> int:
    return -((-x.numerator * c) // x.denominator)


def _floor(x: Fraction, c: int) -> int:
    return (x.numerator * c) // x.denominator


def _mixed_quotas(
    total: int, capacity: Sequence[int], base: Sequence[int], previous: Sequence[int] | None
) -> Quotas:
    """Per-thread bands (module docstring): water-filling as for equal thread counts, each round
    over the processes still inside with their share (``total`` less the set-aside bases)."""
    n = len(capacity)
    inside = list(range(n))
    aside: list[int] = []
    while True:
        share = total - sum(base[p] for p in aside)
        top = max((Fraction(base[p], capacity[p]) for p in aside), default=None)
        low, high = _band(
            share,
            [capacity[p] for p in inside],
            [base[p] for p in inside],
            top=top,
            previous=previous,
            processes=inside,
        )
        over = [p for p in inside if base[p] > _floor(high, capacity[p])]
        if not over:
            break
        aside += over
        inside = [p for p in inside if base[p] <= _floor(high, capacity[p])]
    lo = list(base)
    hi = list(base)
    for p in inside:
        lo[p] = max(base[p], _ceil(low, capacity[p]))
        hi[p] = _floor(high, capacity[p])
    return Quotas(lo=lo, hi=hi, extras=share - sum(lo[p] for p in inside))


def _band(
    share: int,
    capacity: Sequence[int],
    base: Sequence[int],
    *,
    top: Fraction | None,
    previous: Sequence[int] | None,
    processes: Sequence[int],
) -> tuple[Fraction, Fraction]:
    """The per-thread band ``(L, H)`` for ``share`` tasks on processes of ``capacity`` threads
    already running ``base`` (``top``: the highest per-thread load of the processes set aside).

    A process runs ``max(base, ceil(L*c))`` to ``floor(H*c)`` tasks. ``L`` can be at most the
    largest ``L_max`` whose floors fit in ``share``; ``H`` must be at least the smallest ``H*``
    whose ceilings hold ``share`` and at least ``ceil(L*c)/c`` everywhere. Both are fractions
    ``a / c``; every ``L`` worth trying lies in ``[L_max - 1, L_max]`` (below it the spread is
    larger than at ``L_max``). Chosen: the smallest spread over every process (with ``top``),
    then over these, then the band keeping the most of ``previous``, then the highest ``L``."""
    caps = sorted(set(capacity))
    l_max, h_min = _Bases(capacity, base).limits(share)
    candidates = sorted(
        {Fraction(a, c) for c in caps for a in range(max(0, _ceil(l_max - 1, c)), _floor(l_max, c) + 1)}
    )
    scored: list[tuple[Fraction, Fraction, Fraction, Fraction]] = []
    for low in candidates:
        high = max(h_min, *(Fraction(_ceil(low, c), c) for c in caps))
        spread = high - low
        overall = spread if top is None else max(top, high) - low
        scored.append((overall, spread, -low, high))
    scored.sort()
    best = [s for s in scored if s[:2] == scored[0][:2]]
    if len(best) > 1 and previous is not None:
        mine = [previous[p] for p in processes]
        best.sort(key=lambda s: (-_kept(share, capacity, base, mine, low=-s[2], high=s[3]), s[2]))
    return -best[0][2], best[0][3]


class _Bases:
    """The bases of one band's processes by thread count, sorted, with their prefix sums."""

    __slots__ = ("by_cap", "caps", "sums", "total_cap")

    def __init__(self, capacity: Sequence[int], base: Sequence[int]) -> None:
        self.caps = sorted(set(capacity))
        self.total_cap = sum(capacity)
        self.by_cap: dict[int, list[int]] = {c: [] for c in self.caps}
        for c, b in zip(capacity, base, strict=True):
            self.by_cap[c].append(b)
        self.sums: dict[int, list[int]] = {}
        for c in self.caps:
            self.by_cap[c].sort()
            self.sums[c] = list(accumulate(self.by_cap[c], initial=0))

    def floors(self, low: Fraction) -> int:
        """Sum of max(base, ceil(low * c)): the tasks the band's floors need."""
        need = 0
        for c in self.caps:
            k = _ceil(low, c)
            bases = self.by_cap[c]
            below = bisect_left(bases, k)
            need += k * below + self.sums[c][-1] - self.sums[c][below]
        return need

    def ceilings(self, high: Fraction) -> int:
        return sum(_floor(high, c) * len(self.by_cap[c]) for c in self.caps)

    def limits(self, share: int) -> tuple[Fraction, Fraction]:
        """``L_max`` and ``H*`` for ``share`` tasks (:func:`_band`), by bisection per thread count."""
        l_max = Fraction(0)
        h_min: Fraction | None = None
        for c in self.caps:
            a, b = 0, share * c // self.total_cap  # floors(a / c) <= share holds at a = 0
            while a < b:
                mid = (a + b + 1) // 2
                if self.floors(Fraction(mid, c)) <= share:
                    a = mid
                else:
                    b = mid - 1
            l_max = max(l_max, Fraction(a, c))
            a, b = 0, share * c  # ceilings(share) >= share
            while a < b:
                mid = (a + b) // 2
                if self.ceilings(Fraction(mid, c)) >= share:
                    b = mid
                else:
                    a = mid + 1
            h_min = Fraction(a, c) if h_min is None else min(h_min, Fraction(a, c))
        assert h_min is not None
        return l_max, h_min


def _kept(
    share: int,
    capacity: Sequence[int],
    base: Sequence[int],
    previous: Sequence[int],
    *,
    low: Fraction,
    high: Fraction,
) -> int:
    """How many of the tasks each process had (``previous``, per process of the band) the band
    ``(low, high)`` lets it keep: its floor, and the extras above it as far as they go."""
    floor_kept = extra_kept = lo_sum = 0
    for c, b, mine in zip(capacity, base, previous, strict=True):
        lo = max(b, _ceil(low, c))
        hi = max(b, _floor(high, c))
        floor_kept += min(mine, lo)
        extra_kept += max(0, min(mine, hi) - lo)
        lo_sum += lo
    return floor_kept + min(extra_kept, share - lo_sum)


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

    In passes: each task to its first sticky process below its floor; then, while extras last,
    to one between floor and ceiling; then to a ``secondary`` candidate; then round-robin over
    the processes below their floors, and the extras last (:class:`_Filling`).
    """
    if not tasks:
        return
    total = sum(counts) + len(tasks)
    start, items = sticky.start, sticky.items
    mixed = len(set(capacity)) > 1
    previous: list[int] | None = None
    if mixed:  # the tasks each process would keep, to choose among bands of the same spread
        previous = [0] * len(counts)
        for i in tasks:
            if start[i] < start[i + 1]:
                previous[items[start[i]]] += 1
    quotas = compute_quotas(total, capacity, counts, previous=previous)
    fill = _Filling(capacity, counts, owner, quotas)
    pending, rest = fill.floors(tasks, sticky)
    if pending:
        rest = fill.sticky_extras(pending, rest, sticky)
    if secondary is not None and rest:
        rest = fill.secondary(rest, secondary)
    placed = fill.round_robin(rest) if rest else 0
    if placed < len(rest) and not mixed:
        placed = fill.extras_in_order(rest, placed)
    elif placed < len(rest):
        placed = fill.extras_by_load(rest, placed)
    if placed < len(rest):
        raise AssignorError(f"internal error: {len(rest) - placed} tasks left over after filling every quota")


class _Filling:
    """The passes of :func:`balanced_fill` over its ``counts`` and ``owner`` (changed in place)
    and the extras left (``extras``: tasks that may still go above a floor)."""

    __slots__ = ("capacity", "counts", "extras", "hi", "lo", "owner")

    def __init__(self, capacity: Sequence[int], counts: list[int], owner: list[int], quotas: Quotas) -> None:
        self.capacity = capacity
        self.counts = counts
        self.owner = owner
        self.lo, self.hi = quotas.lo, quotas.hi
        self.extras = quotas.extras

    def floors(self, tasks: Sequence[int], sticky: Rows) -> tuple[list[int], list[int]]:
        """Each task to its first sticky process below its floor; the tasks whose sticky
        processes are all at their floors (pending), and those with none (the rest)."""
        start, items, counts, owner, lo = sticky.start, sticky.items, self.counts, self.owner, self.lo
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
        return pending, rest

    def sticky_extras(self, pending: list[int], waiting: list[int], sticky: Rows) -> list[int]:
        """Each pending task, while extras last, to its first sticky process between floor and
        ceiling; the tasks left, in task order (``waiting``: those set aside by :meth:`floors`)."""
        start, items, counts, owner, lo, hi = (
            sticky.start,
            sticky.items,
            self.counts,
            self.owner,
            self.lo,
            self.hi,
        )
        rest: list[int] = []
        for i in pending:
            if self.extras:
                for k in range(start[i], start[i + 1]):
                    p = items[k]
                    if lo[p] <= counts[p] < hi[p]:
                        owner[i] = p
                        counts[p] += 1
                        self.extras -= 1
                        break
                else:
                    rest.append(i)
            else:
                rest.append(i)
        # back in task order: the tasks without a previous owner were set aside in pass 1
        return sorted(rest + waiting) if waiting and rest else rest or waiting

    def secondary(self, rest: list[int], secondary: Callable[[int], Iterable[int]]) -> list[int]:
        """Each task to its first ``secondary`` candidate below its floor, else to the first
        between floor and ceiling while extras last; the tasks left."""
        counts, owner, lo, hi = self.counts, self.owner, self.lo, self.hi
        unplaced: list[int] = []
        for i in rest:
            chosen = -1
            for p in secondary(i):
                c = counts[p]
                if c < lo[p]:
                    chosen = p
                    break
                if chosen < 0 and self.extras and lo[p] <= c < hi[p]:
                    chosen = p
            if chosen < 0:
                unplaced.append(i)
                continue
            if counts[chosen] >= lo[chosen]:
                self.extras -= 1
            owner[i] = chosen
            counts[chosen] += 1
        return unplaced

    def round_robin(self, rest: list[int]) -> int:
        """The tasks, in turn, to the processes below their floors; how many were placed."""
        counts, owner, lo = self.counts, self.owner, self.lo
        placed = 0
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
        return placed

    def extras_in_order(self, rest: list[int], placed: int) -> int:
        """Equal thread counts: the extras to the processes between floor and ceiling, in
        process order; how many tasks are placed now."""
        counts, owner, lo, hi = self.counts, self.owner, self.lo, self.hi
        for p in range(len(counts)):
            if placed == len(rest) or not self.extras:
                break
            if lo[p] <= counts[p] < hi[p]:
                owner[rest[placed]] = p
                placed += 1
                counts[p] += 1
                self.extras -= 1
        return placed

    def extras_by_load(self, rest: list[int], placed: int) -> int:
        """Mixed thread counts: the extras raise the lowest per-thread loads first (then the
        ones an extra raises least): in process order they could go to the processes already
        carrying the most per thread and leave another one idle. How many tasks are placed now."""
        counts, owner, capacity, hi = self.counts, self.owner, self.capacity, self.hi
        heap = [
            (Fraction(counts[p], capacity[p]), Fraction(counts[p] + 1, capacity[p]), p)
            for p in range(len(counts))
            if self.lo[p] <= counts[p] < hi[p]
        ]
        heapify(heap)
        while heap and self.extras and placed < len(rest):
            p = heappop(heap)[2]
            owner[rest[placed]] = p
            placed += 1
            counts[p] += 1
            self.extras -= 1
            if counts[p] < hi[p]:
                heappush(heap, (Fraction(counts[p], capacity[p]), Fraction(counts[p] + 1, capacity[p]), p))
        return placed
