"""KIP-441's high-availability task assignor.

A stateful task is *caught up* on a process when the process runs it now (:data:`RUNNING_LAG`)
or reports a lag within ``acceptable_recovery_lag`` for it. The assignor:

1. computes the *destination* of every stateful active: balanced per thread and sticky
   (:func:`~assignors.task.quota.balanced_fill`: previous owner, then caught-up processes and
   previous standbys, then round-robin); with ``rack_aware_assignment_strategy`` set (KIP-925),
   moves destinations between processes, each keeping its count, to the least cross-rack
   traffic (:mod:`assignors.task.rack_aware`; stateless actives too, after step 3);
2. keeps each stateful active whose destination is not caught up, while some other process is,
   on a caught-up process (least loaded; the one running it wins a tie; tasks with the fewest
   caught-up processes first, as Kafka orders its movements) -- a pending *movement* --
   unless a task destined to such a process can take its place on the destination: one caught
   up there, or one nobody is caught up on whose state there is no further behind (its restore
   is due anyway); then the two swap destinations and nothing is pending. A task running on
   that process gives up its place only when the pin would take the process beyond its
   per-thread share (then the swap is a move to a caught-up process). Without such a partner,
   a chain of them through other processes (:meth:`~assignors.task.swaps.SwapPartners.chain`:
   a task of the pinning process takes a place on a second one, whose task takes a place on a
   third, ..., the last takes the room on the destination) when it moves no more running tasks
   than it brings back to where they ran (one more when the pin would exceed the share). Then
   the pins are repaired: a pin that later pins took beyond the share gets its swap after
   all; the room a pinned task leaves on its destination takes, through a chain of tasks that
   move anyway (or, for a smaller spread, a chain that moves running tasks to processes caught
   up on them, not from the pinning process), a task from a process that can spare one; and a
   process still beyond its share hands tasks to processes caught up on them -- each only when
   it evens the per-thread loads (a smaller spread, or the same spread drawn together);
3. balances stateless actives by load (sticky within quota) on top of the stateful ones;
4. plans warm-up replicas on the destinations of pending movements, at most
   ``max_warmup_replicas`` in all: warm-ups under way first (least lag), then tasks with the
   fewest caught-up processes; a destination that already holds a standby of the task needs none
   (the standby serves, and is kept there);
5. places standbys: never beside their active, spread across racks / client tags, balanced per
   thread, sticky to processes that hold state for the task; never on a planned warm-up's
   process unless no other process can take it (then that warm-up's slot passes to the next
   movement); a standby that has to move anyway prefers the destination of its task's movement.

While movements are pending the result asks for a follow-up rebalance
``probing_rebalance_interval_ms`` after ``now_ms``. A task no process is caught up on goes to its
destination, so with no lags at all the result is the balanced, sticky destination itself.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import ClassVar

from assignors.task.indexed import IndexedState, Rows, build_assignment, index_state
from assignors.task.quality import moved_actives
from assignors.task.quota import balanced_fill
from assignors.task.rack_aware import (
    STATEFUL_NON_OVERLAP_COST,
    STATEFUL_TRAFFIC_COST,
    STATELESS_NON_OVERLAP_COST,
    STATELESS_TRAFFIC_COST,
    RackView,
    cross_rack_traffic,
    optimize_actives,
    rack_view,
)
from assignors.task.standby import place_standbys, signatures_for
from assignors.task.swaps import NO_LAG, RUNNING_RANK, Hop, Ranked, SwapPartners
from assignors.types import RUNNING_LAG, ApplicationState, TaskAssignment

__all__ = ["HighAvailabilityTaskAssignor"]


class HighAvailabilityTaskAssignor:
    """Lag-aware, balanced, sticky task assignment with warm-up replicas (KIP-441)."""

    name: ClassVar[str] = "high_availability"

    def assign(self, state: ApplicationState) -> TaskAssignment:
        ix = index_state(state)
        racks = rack_view(state, ix)
        if racks is None:
            return self._assign(state, ix, None, trade=False)
        # KIP-925: with processes trading which carries the one more stateful task, and
        # keeping every count (as Kafka Streams); the one reading less across racks, then
        # moving fewer actives, wins (the stateless tasks' traffic depends on the counts left)
        return min(
            (self._assign(state, ix, racks, trade=trade) for trade in (True, False)),
            key=lambda a: (cross_rack_traffic(state, a), moved_actives(state, a)),
        )

    def _assign(
        self, state: ApplicationState, ix: IndexedState, racks: RackView | None, *, trade: bool
    ) -> TaskAssignment:
        configs = state.configs
        nt = ix.num_tasks
        stateful = [i for i in range(nt) if ix.stateful[i]]
        stateless = [i for i in range(nt) if not ix.stateful[i]]
        # Per task, the processes reporting a lag, best rank first; caught up: rank <= 0.
        ranked = _ranked(ix, configs.acceptable_recovery_lag)
        destination, counts = _destinations(ix, ranked, stateful)  # step 1
        if racks is not None:  # KIP-925: the least cross-rack traffic, counts kept
            optimize_actives(
                racks,
                stateful,
                destination,
                ix.capacity,
                traffic_cost=_or(configs.rack_aware_assignment_traffic_cost, STATEFUL_TRAFFIC_COST),
                non_overlap_cost=_or(
                    configs.rack_aware_assignment_non_overlap_cost, STATEFUL_NON_OVERLAP_COST
                ),
                trade=trade,
            )
            counts = [0] * ix.num_processes  # the counts' owners may have traded the one more
            for i in stateful:
                counts[destination[i]] += 1
        pins = _Pins(ix, ranked, stateful, destination, counts)  # step 2
        for caught, i in _to_pin(ranked, stateful, destination):
            pins.pin(caught, i)
        pins.repair()
        owner, moving = pins.owner, pins.moving
        balanced_fill(stateless, ix.capacity, counts, owner, sticky=ix.prev_active)  # step 3
        if racks is not None:
            optimize_actives(
                racks,
                stateless,
                owner,
                ix.capacity,
                traffic_cost=STATELESS_TRAFFIC_COST,
                non_overlap_cost=STATELESS_NON_OVERLAP_COST,
            )
        # Warm-ups go, in this order, to the movements' destinations: warm-ups under way first
        # (least lag), then tasks with the fewest caught-up processes (step 4).
        order = sorted(moving, key=lambda t: (_lag_on(ix, t, moving[t]), pins.caught_count[t], t))
        planned = _planned(ix, order, moving, configs.max_warmup_replicas)
        slots = place_standbys(  # step 5
            stateful,
            num_tasks=nt,
            capacity=ix.capacity,
            owner=owner,
            replicas=configs.num_standby_replicas,
            preferred=_preferred(ix, ranked, moving, planned),
            signatures=signatures_for(state, ix.process_ids),
            avoid=planned,
        )
        k = min(configs.num_standby_replicas, ix.num_processes - 1)
        warmups = _warmups(order, moving, slots, k, configs.max_warmup_replicas)
        followup = state.now_ms + configs.probing_rebalance_interval_ms if moving else None
        return build_assignment(ix, owner, slots, warmups, followup, movements=moving)


def _or(value: int | None, default: int) -> int:
    return default if value is None else value


def _destinations(ix: IndexedState, ranked: Ranked, stateful: list[int]) -> tuple[list[int], list[int]]:
    """Step 1: every stateful active's destination, balanced per thread and sticky (previous
    owner, then caught-up processes and previous standbys, then round-robin); and the count
    of stateful actives per process."""
    r_start, r_procs, r_rank = ranked.start, ranked.items, ranked.ranks
    sb_start, sb_procs = ix.prev_standby.start, ix.prev_standby.items

    def secondary(i: int) -> list[int]:
        """Caught-up processes, previous standbys, then the others holding state, least lag first."""
        first, end = r_start[i], r_start[i + 1]
        holders = sb_procs[sb_start[i] : sb_start[i + 1]]
        if first == end:
            return holders
        cut = first
        while cut < end and r_rank[cut] <= 0:
            cut += 1
        return [*r_procs[first:cut], *holders, *r_procs[cut:end]]

    destination = [-1] * ix.num_tasks
    counts = [0] * ix.num_processes
    balanced_fill(
        stateful, ix.capacity, counts, destination, sticky=_sticky_by_rank(ix, ranked), secondary=secondary
    )
    return destination, counts


def _to_pin(ranked: Ranked, stateful: list[int], destination: list[int]) -> list[tuple[int, int]]:
    """The tasks to pin, as (caught-up processes ranked before the destination, task), those
    with the fewest caught-up processes first (as Kafka orders its movements): a task with one
    choice takes it before tasks with several fill it."""
    r_start, r_procs, r_rank = ranked.start, ranked.items, ranked.ranks
    to_pin: list[tuple[int, int]] = []
    for i in stateful:
        first, end = r_start[i], r_start[i + 1]
        if first == end or r_rank[first] > 0:
            continue  # nobody is caught up: the destination stands
        d = destination[i]
        k = first
        while k < end and r_rank[k] <= 0 and r_procs[k] != d:
            k += 1
        if k == end or r_rank[k] > 0:
            to_pin.append((k - first, i))
    to_pin.sort()
    return to_pin


class _Pins:
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


def _planned(ix: IndexedState, order: list[int], moving: dict[int, int], most: int) -> dict[int, int]:
    """The warm-ups planned (task -> process), at most ``most``, in ``order``. A destination that
    held a standby of the task keeps it instead; the others are kept free of a new standby of
    the task, so that the warm-up can go there."""
    sb_start, sb_procs = ix.prev_standby.start, ix.prev_standby.items
    planned: dict[int, int] = {}
    for i in order:
        if len(planned) == most:
            break
        if moving[i] not in sb_procs[sb_start[i] : sb_start[i + 1]]:
            planned[i] = moving[i]
    return planned


def _preferred(
    ix: IndexedState, ranked: Ranked, moving: dict[int, int], planned: dict[int, int]
) -> Callable[[int], list[int]]:
    """Where each task's standbys would rather go (:func:`place_standbys`' ``preferred``)."""
    r_start, r_procs = ranked.start, ranked.items
    sb_start, sb_procs = ix.prev_standby.start, ix.prev_standby.items

    def preferred(i: int) -> list[int]:
        """Processes holding state for the task, best first, then previous standbys; a
        destination that held a standby comes first (it keeps warming up), another one last,
        unless it is to get a warm-up."""
        ranked_here = r_procs[r_start[i] : r_start[i + 1]]
        holders = sb_procs[sb_start[i] : sb_start[i + 1]]
        d = moving.get(i, -1)
        if d < 0:
            return [*ranked_here, *holders] if holders else ranked_here
        if d in holders:
            return [d, *ranked_here, *holders]
        if i in planned:
            return [p for p in (*ranked_here, *holders) if p != d]
        return [*ranked_here, *holders, d]

    return preferred


def _warmups(
    order: list[int], moving: dict[int, int], slots: list[int], k: int, most: int
) -> list[tuple[int, int]]:
    """The warm-ups, in ``order``, at most ``most``: a movement whose destination got a standby
    of the task needs none (the standby warms it up)."""
    warmups: list[tuple[int, int]] = []
    for i in order:
        d = moving[i]
        if k > 0 and d in slots[i * k : (i + 1) * k]:
            continue  # its standby there warms it up
        if len(warmups) == most:
            break
        warmups.append((i, d))
    return warmups


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


def _ranked(ix: IndexedState, acceptable_recovery_lag: int) -> Ranked:
    start, procs = ix.lag_procs.start, ix.lag_procs.items
    items = list(procs)
    ranks = [
        -1 if lag == RUNNING_LAG else 0 if lag <= acceptable_recovery_lag else lag for lag in ix.lag_values
    ]  # lag_rank, inlined
    for i in range(ix.num_tasks):
        first, end = start[i], start[i + 1]
        size = end - first
        if size == 2:
            if ranks[first] > ranks[first + 1]:
                items[first], items[first + 1] = items[first + 1], items[first]
                ranks[first], ranks[first + 1] = ranks[first + 1], ranks[first]
        elif size > 2:
            pairs = sorted(zip(ranks[first:end], items[first:end], strict=True))
            ranks[first:end] = [r for r, _ in pairs]
            items[first:end] = [p for _, p in pairs]
    return Ranked(start=start, items=items, ranks=ranks)


def _sticky_by_rank(ix: IndexedState, ranked: Ranked) -> Rows:
    """Previous active owners of each task; when several claim one, the most caught up first."""
    rows = ix.prev_active
    start = rows.start
    items: list[int] | None = None
    for i in range(ix.num_tasks):
        if start[i + 1] - start[i] > 1:
            if items is None:
                items = list(rows.items)
            first, end = ranked.start[i], ranked.start[i + 1]
            rank = dict(zip(ranked.items[first:end], ranked.ranks[first:end], strict=True))
            items[start[i] : start[i + 1]] = sorted(rows.row(i), key=lambda p: (rank.get(p, NO_LAG), p))
    return rows if items is None else Rows(start=start, items=items)


def _lag_on(ix: IndexedState, task: int, process: int) -> int:
    rows = ix.lag_procs
    for k in range(rows.start[task], rows.start[task + 1]):
        if rows.items[k] == process:
            return ix.lag_values[k]
    return NO_LAG
