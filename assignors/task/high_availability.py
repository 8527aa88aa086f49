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
5. places standbys: never beside their active, spread across racks / client tags (with a
   rack-aware strategy, no tags and the changelogs' racks known: rack-blind too, as Kafka
   Streams, the traffic flow then moves them, the start reading less kept), balanced per thread,
   sticky to processes that hold state for the task; never on a planned warm-up's process unless
   no other process can take it (then that warm-up's slot passes to the next movement); a
   standby that has to move anyway prefers the destination of its task's movement; a process
   the sticky standbys left below its share (counting its planned warm-ups) takes standbys from
   those above theirs (:func:`~assignors.task.standby.place_standbys`, pass 4).

While movements are pending the result asks for a follow-up rebalance
``probing_rebalance_interval_ms`` after ``now_ms``. A task no process is caught up on goes to its
destination, so with no lags at all the result is the balanced, sticky destination itself.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from assignors.task.indexed import IndexedState, Rows, build_assignment, index_state
from assignors.task.pins import Pins
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
from assignors.task.rack_joint import optimize_jointly
from assignors.task.rack_standby import MAX_PAIRS, changelog_cross, optimize_standbys
from assignors.task.standby import place_standbys, signatures_for
from assignors.task.swaps import NO_LAG, Ranked
from assignors.types import RUNNING_LAG, ApplicationState, TaskAssignment

__all__ = ["HighAvailabilityTaskAssignor"]


class HighAvailabilityTaskAssignor:
    """Lag-aware, balanced, sticky task assignment with warm-up replicas (KIP-441)."""

    name: ClassVar[str] = "high_availability"

    def __init__(self, *, rack_aware_standbys: bool = True) -> None:
        #: KIP-925: with a rack-aware strategy, move standbys to read their changelogs on their
        #: rack (:mod:`assignors.task.rack_standby`), as Kafka Streams' optimizeStandbyTasks
        self.rack_aware_standbys = rack_aware_standbys

    def assign(self, state: ApplicationState) -> TaskAssignment:
        ix = index_state(state)
        racks = rack_view(state, ix)
        if racks is None:
            return self._assign(state, ix, None, mode="keep")
        # KIP-925: keeping every count (as Kafka Streams), with processes trading which carries
        # the one more stateful task, and (min_traffic) stateful and stateless in one flow; the
        # one reading less across racks, then moving fewer actives, wins
        modes = ("keep", "trade") if racks.balance_subtopology else ("keep", "trade", "joint")
        return min(
            (self._assign(state, ix, racks, mode=mode) for mode in modes),
            key=lambda a: (cross_rack_traffic(state, a), moved_actives(state, a)),
        )

    def _assign(
        self, state: ApplicationState, ix: IndexedState, racks: RackView | None, *, mode: str
    ) -> TaskAssignment:
        configs = state.configs
        nt = ix.num_tasks
        stateful = [i for i in range(nt) if ix.stateful[i]]
        stateless = [i for i in range(nt) if not ix.stateful[i]]
        # Per task, the processes reporting a lag, best rank first; caught up: rank <= 0.
        ranked = _ranked(ix, configs.acceptable_recovery_lag)
        destination, counts = _destinations(ix, ranked, stateful)  # step 1
        if racks is not None:  # KIP-925: the least cross-rack traffic, the balance kept
            traffic_cost = _or(configs.rack_aware_assignment_traffic_cost, STATEFUL_TRAFFIC_COST)
            non_overlap_cost = _or(configs.rack_aware_assignment_non_overlap_cost, STATEFUL_NON_OVERLAP_COST)
            if mode == "joint":
                _joint_destinations(
                    ix, ranked, racks, destination, counts, costs=(traffic_cost, non_overlap_cost)
                )
            else:
                optimize_actives(
                    racks,
                    stateful,
                    destination,
                    ix.capacity,
                    traffic_cost=traffic_cost,
                    non_overlap_cost=non_overlap_cost,
                    trade=mode == "trade",
                )
            counts = [0] * ix.num_processes  # the counts' owners may have traded the one more
            for i in stateful:
                counts[destination[i]] += 1
        pins = Pins(ix, ranked, stateful, destination, counts)  # step 2
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
        k = min(configs.num_standby_replicas, ix.num_processes - 1)
        slots = self._standbys(
            state, ix, racks, ranked, stateful, owner=owner, moving=moving, planned=planned
        )
        warmups = _warmups(order, moving, slots, k, configs.max_warmup_replicas)
        followup = state.now_ms + configs.probing_rebalance_interval_ms if moving else None
        return build_assignment(ix, owner, slots, warmups, followup, movements=moving)

    def _standbys(
        self,
        state: ApplicationState,
        ix: IndexedState,
        racks: RackView | None,
        ranked: Ranked,
        stateful: list[int],
        *,
        owner: list[int],
        moving: dict[int, int],
        planned: dict[int, int],
    ) -> list[int]:
        """Step 5: the standby slots (``place_standbys``), moved by the rack-aware traffic flow
        when it runs (from the rack-blind start and the spread start: the one reading less)."""
        configs = state.configs
        nt = ix.num_tasks
        k = min(configs.num_standby_replicas, ix.num_processes - 1)
        cross = (
            changelog_cross(state, ix, racks)
            if racks is not None and self.rack_aware_standbys and k
            else None
        )
        signatures = signatures_for(state, ix.process_ids)
        starts = [signatures]
        if cross is not None and not configs.rack_aware_assignment_tags and _flow_runs(stateful, k, ix):
            # as Kafka Streams without tags: a rack-blind, balanced start, then the traffic flow
            # (the spread start too, when it ends lower: never above either)
            starts = [None, signatures]
        best: tuple[int, list[int]] | None = None
        for start in starts:
            slots = place_standbys(  # step 5
                stateful,
                num_tasks=nt,
                capacity=ix.capacity,
                owner=owner,
                replicas=configs.num_standby_replicas,
                preferred=_preferred(ix, ranked, moving, planned),
                signatures=start,
                avoid=planned,
            )
            if racks is None or cross is None:
                best = (0, slots)
                break
            _rack_standbys(
                state, ix, racks, ranked, cross, owner=owner, slots=slots, k=k, moving=moving, planned=planned
            )
            read = sum(cross[n // k][racks.proc_rack[p]] for n, p in enumerate(slots) if p >= 0)
            if best is None or read < best[0]:
                best = (read, slots)
        assert best is not None
        return best[1]


def _rack_standbys(
    state: ApplicationState,
    ix: IndexedState,
    racks: RackView,
    ranked: Ranked,
    cross: list[list[int]],
    *,
    owner: list[int],
    slots: list[int],
    k: int,
    moving: dict[int, int],
    planned: dict[int, int],
) -> None:
    """Step 5's standbys moved to the least changelog traffic (:func:`optimize_standbys`; ``cross``:
    :func:`changelog_cross`): a standby on its task's movement destination stays (it warms it up),
    a planned warm-up's process gets none; with tags, each task keeps its standbys' tag
    signatures."""
    configs = state.configs
    traffic_cost = _or(configs.rack_aware_assignment_traffic_cost, STATEFUL_TRAFFIC_COST)
    proc_rack = racks.proc_rack
    signatures = signatures_for(state, ix.process_ids) if configs.rack_aware_assignment_tags else None
    r_start, r_procs = ranked.start, ranked.items
    sb_start, sb_procs = ix.prev_standby.start, ix.prev_standby.items
    optimize_standbys(
        slots,
        k,
        owner=owner,
        capacity=ix.capacity,
        rack_cost=lambda i, p: traffic_cost * cross[i][proc_rack[p]],
        zone=signatures if signatures is not None else [()] * ix.num_processes,
        fixed=lambda i: {moving[i]} if i in moving else set(),
        blocked=lambda i: {planned[i]} if i in planned else set(),
        holds_state=lambda i, p: (
            p in r_procs[r_start[i] : r_start[i + 1]] or p in sb_procs[sb_start[i] : sb_start[i + 1]]
        ),
        non_overlap_cost=_or(configs.rack_aware_assignment_non_overlap_cost, STATEFUL_NON_OVERLAP_COST),
    )


def _flow_runs(stateful: list[int], k: int, ix: IndexedState) -> bool:
    """Whether :func:`optimize_standbys` surely runs (else the standbys keep step 5's rack spread)."""
    return len(stateful) * k * ix.num_processes <= MAX_PAIRS


def _or(value: int | None, default: int) -> int:
    return default if value is None else value


def _joint_destinations(
    ix: IndexedState,
    ranked: Ranked,
    racks: RackView,
    destination: list[int],
    counts: list[int],
    *,
    costs: tuple[int, int],
) -> None:
    """Step 1 with the stateless actives weighed too (:mod:`assignors.task.rack_joint`): they
    are filled onto the destinations' counts for the flow, which moves the stateful
    destinations; the stateless actives are placed again in step 3, on the final counts."""
    stateful = [i for i in range(ix.num_tasks) if ix.stateful[i]]
    stateless = [i for i in range(ix.num_tasks) if not ix.stateful[i]]
    trial = list(destination)
    balanced_fill(stateless, ix.capacity, list(counts), trial, sticky=ix.prev_active)
    held, lagged, standby = ix.prev_active.start, ranked.start, ix.prev_standby.start
    anchored = [
        held[i + 1] > held[i] or lagged[i + 1] > lagged[i] or standby[i + 1] > standby[i]
        for i in range(ix.num_tasks)
    ]
    optimize_jointly(
        racks,
        stateful,
        stateless,
        trial,
        ix.capacity,
        traffic_cost=costs[0],
        non_overlap_cost=costs[1],
        anchored=anchored,
    )
    for i in stateful:
        destination[i] = trial[i]


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
