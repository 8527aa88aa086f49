"""Step 2 of the high-availability assignor (:mod:`assignors.task.high_availability`): pin a
stateful active whose destination is not caught up on a caught-up process, unless a swap or a
chain of swaps takes its place, then repair what the pins left (the module docstring of
``high_availability`` tells the rules)."""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

from assignors.task.indexed import IndexedState
from assignors.task.swaps import RUNNING_RANK, Hop, Ranked, SwapPartners

__all__ = ["Pins"]


class Pins:
    """Step 2: keeps each stateful active whose destination is not caught up on a caught-up
    process, unless a swap or a chain of them takes its place (module docstring); then
    repairs the pins. ``owner``: where each task runs; ``moving``: the pending movements
    (task -> destination); ``caught_count``: per pending movement, its caught-up processes.

    Before pinning a task on a caught-up process p, it looks there for a task destined to p
    that can take the task's place on d instead (caught up on d, or nobody is caught up on it
    and d is no further behind than p): the two swap destinations, the balance is unchanged
    and nothing is pending. ``pools``: the tasks destined to each process that may still swap
    (built at the first pin; assignors.task.swaps)."""

    __slots__ = (
        "capacity", "caught_count", "counts", "destination", "ix", "moving", "n_stateful", "owner",
        "pinned", "pools", "ranked", "stateful", "total_capacity",
    )  # fmt: skip

    def __init__(
        self, ix: IndexedState, ranked: Ranked, stateful: list[int], destination: list[int], counts: list[int]
    ) -> None:
        self.ix = ix
        self.ranked = ranked
        self.stateful = stateful
        self.destination = destination
        self.counts = counts
        self.capacity = ix.capacity
        self.owner = list(destination)
        self.moving: dict[int, int] = {}
        self.caught_count: dict[int, int] = {}
        self.pools: SwapPartners | None = None
        self.pinned: list[int] = []
        self.total_capacity = sum(self.capacity)
        self.n_stateful = len(stateful)

    def pin(self, caught: int, i: int) -> None:
        """Pin task ``i`` (``caught``: its caught-up processes) or find it a partner."""
        r_procs, r_rank, first = self.ranked.items, self.ranked.ranks, self.ranked.start[i]
        counts, capacity = self.counts, self.capacity
        d = self.destination[i]
        if any(r_procs[k] == d for k in range(first, first + caught)):
            return  # it took another task's place on a process caught up on it
        candidates = sorted(
            ((counts[r_procs[k]] + 1) / capacity[r_procs[k]], r_rank[k], r_procs[k])
            for k in range(first, first + caught)
        )
        if self.pools is None:
            self.pools = SwapPartners(self.ranked, self.stateful, self.destination, self.ix.num_processes)
        pools = self.pools
        pools.discard(i)  # placed below, not d's to give away
        starts = [p for _, _, p in candidates]
        over = self._swap(i, d, starts, pools)
        if over is None or (d not in pools.unreachable and self._chain(i, d, starts, over, pools)):
            return
        best = starts[0]
        self.owner[i] = best
        counts[best] += 1
        counts[d] -= 1
        self.moving[i] = d
        self.caught_count[i] = caught
        self.pinned.append(i)

    def _swap(self, i: int, d: int, starts: list[int], pools: SwapPartners) -> list[bool] | None:
        """A direct partner for ``i`` on one of ``starts`` (``None``: swapped); else, per start,
        whether the pin would take it beyond its share."""
        counts, capacity = self.counts, self.capacity
        over: list[bool] = []
        for p in starts:
            # a task running on p gives up its place only if the pin would take p beyond
            # its per-thread share (ceil(stateful * c / threads))
            over.append(counts[p] * self.total_capacity >= self.n_stateful * capacity[p])
            j = pools.take(p, d, move_running=over[-1])
            if j >= 0:
                # i takes j's place on p (caught up: no movement), j takes i's room on d
                self.destination[i] = self.owner[i] = p
                self.destination[j] = self.owner[j] = d
                return None
        return over

    def _chain(self, i: int, d: int, starts: list[int], over: list[bool], pools: SwapPartners) -> bool:
        """No direct partner: a chain of them through other pools, the shortest, unless it moves
        more running tasks than it brings home (one more for a start the pin would take beyond
        its share, as a swap does). Whether one was taken."""
        hops = pools.chain(d, starts=starts, move_running=False)
        if hops is None:
            hops = pools.chain(d, starts=starts, move_running=True)
            if hops is not None and _extra_moves(self.ix, hops) > over[starts.index(hops[0][1])]:
                hops = None
        if hops is None:
            return False
        self.destination[i] = self.owner[i] = hops[0][1]
        self.counts[hops[0][1]] += 1
        self.counts[d] -= 1
        _shift(hops, pools, self.destination, self.owner, self.counts)
        return True

    def repair(self) -> None:
        """Repair the pins (:func:`_repair`); forget the caught-up counts of tasks no longer
        moving."""
        if not self.pinned:
            return
        assert self.pools is not None
        _repair(
            self.pinned,
            self.pools,
            self.ranked,
            counts=self.counts,
            capacity=self.capacity,
            destination=self.destination,
            owner=self.owner,
            moving=self.moving,
            n_stateful=self.n_stateful,
        )
        for i in [i for i in self.caught_count if i not in self.moving]:
            del self.caught_count[i]


class _Loads:
    """Per-thread loads of the stateful actives while pins are repaired, and whether moving one
    task from ``q`` to ``r`` evens them: a smaller spread (max minus min per thread over every
    process), or the same spread and a smaller sum of ``n * n / c`` (loads drawn together).
    Loads are ordered by ``n / c`` as floats (equal fractions give equal floats, different ones
    with these small terms different floats) and compared exactly as fractions."""

    __slots__ = ("capacity", "counts", "total_capacity")

    def __init__(self, counts: list[int], capacity: Sequence[int]) -> None:
        self.counts = counts
        self.capacity = capacity
        self.total_capacity = sum(capacity)

    def beyond_share(self, q: int, n_stateful: int) -> bool:
        """``q`` runs more than ``ceil(n_stateful * c / threads)`` tasks."""
        return (self.counts[q] - 1) * self.total_capacity >= n_stateful * self.capacity[q]

    def load(self, p: int) -> float:
        return self.counts[p] / self.capacity[p]

    def extremes(self) -> tuple[list[int], list[int], Fraction]:
        """The three most loaded processes, the three least loaded, and the spread."""
        loads = [n / c for n, c in zip(self.counts, self.capacity, strict=True)]
        order = sorted(range(len(loads)), key=loads.__getitem__)
        top, bottom = order[:-4:-1], order[:3]
        counts, capacity = self.counts, self.capacity
        spread = Fraction(counts[top[0]], capacity[top[0]]) - Fraction(counts[bottom[0]], capacity[bottom[0]])
        return top, bottom, spread

    def may_narrow(self, d: int) -> bool:
        """Whether one task more on ``d`` can be part of a move that makes the spread smaller:
        ``d`` has the lowest load, or a single process has the highest."""
        loads = [n / c for n, c in zip(self.counts, self.capacity, strict=True)]
        high = max(loads)
        return loads[d] == min(loads) or loads.count(high) == 1

    def may_even(self, q: int, r: int, extremes: tuple[list[int], list[int], Fraction]) -> bool:
        """A quick test that :meth:`evens` needs: the loads drawn together, or r at the lowest
        load or q at the highest (only a smaller spread will do otherwise)."""
        counts, capacity = self.counts, self.capacity
        if counts[q] == 0:
            return False
        if (2 * counts[r] + 1) * capacity[q] < (2 * counts[q] - 1) * capacity[r]:
            return True
        top, bottom, spread = extremes
        low_p, high_p = bottom[0], top[0]
        return spread != 0 and (
            counts[r] * capacity[low_p] == counts[low_p] * capacity[r]
            or counts[q] * capacity[high_p] == counts[high_p] * capacity[q]
        )

    def evens(
        self, q: int, r: int, extremes: tuple[list[int], list[int], Fraction]
    ) -> tuple[Fraction, Fraction] | None:
        """(spread after, change of sum n * n / c) if moving a task from q to r evens the loads."""
        if not self.may_even(q, r, extremes):
            return None
        counts, capacity = self.counts, self.capacity
        top, bottom, spread = extremes
        # loads as (numerator, denominator), compared by cross-multiplying
        high = after_q = (counts[q] - 1, capacity[q])
        low = after_r = (counts[r] + 1, capacity[r])
        if after_r[0] * after_q[1] > after_q[0] * after_r[1]:
            high, low = after_r, after_q
        for p in top:
            if p not in (q, r):
                if counts[p] * high[1] > high[0] * capacity[p]:
                    high = (counts[p], capacity[p])
                break
        for p in bottom:
            if p not in (q, r):
                if counts[p] * low[1] < low[0] * capacity[p]:
                    low = (counts[p], capacity[p])
                break
        after_num, after_den = high[0] * low[1] - low[0] * high[1], high[1] * low[1]
        wider = after_num * spread.denominator - spread.numerator * after_den
        if wider > 0:
            return None
        change_num = (2 * counts[r] + 1) * capacity[q] - (2 * counts[q] - 1) * capacity[r]
        if wider < 0 or change_num < 0:
            return Fraction(after_num, after_den), Fraction(change_num, capacity[q] * capacity[r])
        return None


def _repair(
    pinned: Sequence[int],
    pools: SwapPartners,
    ranked: Ranked,
    *,
    counts: list[int],
    capacity: Sequence[int],
    destination: list[int],
    owner: list[int],
    moving: dict[int, int],
    n_stateful: int,
) -> None:
    """Even out what the pins left (see assign, step 2), in three passes."""
    loads = _Loads(counts, capacity)
    # 1. A pin that later pins took beyond the share gets the swap it was refused: a task of
    #    the process, also a running one, takes its place on the destination.
    for i in pinned:
        p, d = owner[i], moving[i]
        if d in pools.unreachable or not loads.beyond_share(p, n_stateful):
            continue
        if pools.peek(p, d, move_running=True) < 0 or loads.evens(p, d, loads.extremes()) is None:
            continue
        j = pools.take(p, d, move_running=True)
        if j >= 0:
            del moving[i]
            destination[i] = p
            _shift([(j, p, d)], pools, destination, owner, counts)
    # 2. The room a pinned task left on its destination goes, through a chain of tasks that move
    #    anyway (not running where they are), to a process that can send one when that evens
    #    the loads; the busiest first. Failing that, through a chain that also moves running
    #    tasks (each to a process caught up on it: a cheap move for balance) when that makes the
    #    spread smaller -- not through the pinned task's own process, whose running tasks stay
    #    while the pin is within its share (as for a swap).
    for i in pinned:
        d = moving.get(i, -1)
        if d < 0 or d in pools.unreachable:
            continue
        for move_running in (False, True):
            if move_running and not loads.may_narrow(d):
                break
            feeders = pools.feeders(d, move_running=move_running)
            if not feeders:
                continue
            extremes = loads.extremes()
            best: tuple[Fraction, Fraction, Fraction, int, int] | None = None
            for q, hops in feeders.items():
                if move_running and any(origin == owner[i] for _, origin, _ in hops):
                    continue
                even = loads.evens(q, d, extremes)
                if even is not None and (not move_running or even[0] < extremes[2]):
                    key = (*even, Fraction(-counts[q], capacity[q]), len(hops), q)
                    best = key if best is None or key < best else best
            if best is not None:
                _shift(feeders[best[4]], pools, destination, owner, counts)
                break
    # 3. A process still beyond its share hands tasks, running ones too, to a process caught up
    #    on them (or as close to a task nobody is caught up on) while that evens the loads:
    #    tasks that move anyway first, then to the least loaded.
    for q in sorted(range(len(counts)), key=lambda p: (-loads.load(p), p)):
        while loads.beyond_share(q, n_stateful):
            extremes = loads.extremes()
            choice: tuple[bool, Fraction, Fraction, int, int] | None = None
            for r in pools.targets(q):
                if not loads.may_even(q, r, extremes):
                    continue
                j = pools.peek(q, r, move_running=True)
                if j < 0:
                    continue
                even = loads.evens(q, r, extremes)
                if even is not None:
                    option = (ranked.rank_of(j, q) == RUNNING_RANK, *even, r, j)
                    choice = option if choice is None or option < choice else choice
            if choice is None:
                break
            _shift([(choice[4], q, choice[3])], pools, destination, owner, counts)


def _extra_moves(ix: IndexedState, hops: Sequence[Hop]) -> int:
    """Actives the chain moves off a process that ran them, less those it brings back to one."""
    start, items = ix.prev_active.start, ix.prev_active.items
    extra = 0
    for j, q, r in hops:
        ran = items[start[j] : start[j + 1]]
        if ran:
            extra += (q in ran) - (r in ran)
    return extra


def _shift(
    hops: Sequence[Hop], pools: SwapPartners, destination: list[int], owner: list[int], counts: list[int]
) -> None:
    """Each hop's task leaves its pool for the next process of the chain."""
    for j, q, r in hops:
        pools.discard(j)
        destination[j] = owner[j] = r
        counts[q] -= 1
        counts[r] += 1
