"""The indexed swap-partner search gives, query by query, the task a scan of the pool gives."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from assignors.task.swaps import NO_LAG, RUNNING_RANK, Ranked, SwapPartners

_RANKS = (RUNNING_RANK, 0, 3, 7, 50)


def scan(ranked: Ranked, pool: list[int], p: int, d: int, *, move_running: bool) -> int:
    """The reference: every task of ``p``'s pool, the least key among those that qualify."""
    best, best_key = -1, (False, 0, 0)
    for j in pool:
        rank_d, rank_p = ranked.rank_of(j, d), ranked.rank_of(j, p)
        first, end = ranked.start[j], ranked.start[j + 1]
        if rank_d > 0 and ((first < end and ranked.ranks[first] <= 0) or rank_d > rank_p):
            continue
        running = rank_p == RUNNING_RANK
        if running and not move_running:
            continue
        key = (running, rank_d, j)
        if best < 0 or key < best_key:
            best, best_key = j, key
    return best


_Query = tuple[int, int, bool, int | None]


@st.composite
def cases(draw: st.DrawFn) -> tuple[Ranked, list[int], list[int], list[_Query]]:
    """Rows of up to 4 processes per task (sorted by rank, process), pools drawn at random, and
    queries ``(p, d, move_running, task to discard first or None)``."""
    n_proc = draw(st.integers(2, 6))
    n_task = draw(st.integers(1, 30))
    start, items, ranks = [0], [], []
    for _ in range(n_task):
        row = draw(st.dictionaries(st.integers(0, n_proc - 1), st.sampled_from(_RANKS), max_size=4))
        for rank, proc in sorted((r, q) for q, r in row.items()):
            items.append(proc)
            ranks.append(rank)
        start.append(len(items))
    ranked = Ranked(start=start, items=items, ranks=ranks)
    tasks = sorted(draw(st.sets(st.integers(0, n_task - 1), min_size=1)))
    destination = [draw(st.integers(0, n_proc - 1)) for _ in range(n_task)]
    query = st.tuples(
        st.integers(0, n_proc - 1),
        st.integers(0, n_proc - 1),
        st.booleans(),
        st.none() | st.sampled_from(tasks),
    )
    return ranked, tasks, destination, draw(st.lists(query, max_size=40))


@settings(max_examples=400)
@given(case=cases())
def test_take_answers_what_a_scan_of_the_pool_answers(
    case: tuple[Ranked, list[int], list[int], list[_Query]],
) -> None:
    ranked, tasks, destination, queries = case
    # Every process a row, a pool or a query names (the assignor passes them all): with fewer,
    # a row naming a higher process was filed under the wrong pool (hypothesis found it: one
    # task in pool 0 whose row names process 1, num_processes 1).
    named = [*destination, *ranked.items, *(q[0] for q in queries), *(q[1] for q in queries)]
    partners = SwapPartners(ranked, tasks, destination, num_processes=1 + max(named))
    pools: dict[int, list[int]] = {}
    for j in tasks:
        pools.setdefault(destination[j], []).append(j)
    for p, d, move_running, discard in queries:
        if discard is not None:
            partners.discard(discard)
            for pool in pools.values():
                if discard in pool:
                    pool.remove(discard)
        if p == d:
            continue
        expected = scan(ranked, pools.get(p, []), p, d, move_running=move_running)
        assert partners.take(p, d, move_running=move_running) == expected
        if expected >= 0:
            pools[p].remove(expected)


def test_a_task_reporting_no_lag_anywhere_is_everyones_partner() -> None:
    ranked = Ranked(start=[0, 0, 1], items=[1], ranks=[RUNNING_RANK])
    partners = SwapPartners(ranked, [0, 1], [1, 1], num_processes=3)
    assert ranked.rank_of(0, 2) == NO_LAG
    assert partners.take(1, 2, move_running=False) == 0
    assert partners.take(1, 2, move_running=False) == -1  # task 1 runs on 1
    assert partners.take(1, 2, move_running=True) == -1  # and is not caught up on 2


@settings(max_examples=400)
@given(case=cases(), data=st.data())
def test_chain_is_a_shortest_chain_of_partners(
    case: tuple[Ranked, list[int], list[int], list[_Query]], data: st.DataObject
) -> None:
    """chain() against a breadth-first search over every pair of processes, each edge asked of
    the scan: the shortest chain from the best-placed start, each hop the scan's partner, and
    nothing taken from the pools."""
    ranked, tasks, destination, _ = case
    n = 1 + max([*destination, *ranked.items])
    partners = SwapPartners(ranked, tasks, destination, num_processes=n)
    pools: dict[int, list[int]] = {}
    for j in tasks:
        pools.setdefault(destination[j], []).append(j)
    d = data.draw(st.integers(0, n - 1))
    starts = data.draw(st.lists(st.integers(0, n - 1), unique=True, max_size=3))
    move_running = data.draw(st.booleans())

    def partner(q: int, r: int) -> int:
        return scan(ranked, pools.get(q, []), q, r, move_running=move_running)

    distance = {d: 0}
    layer = [d]
    while layer:
        following = []
        for r in layer:
            for q in range(n):
                if q not in distance and partner(q, r) >= 0:
                    distance[q] = distance[r] + 1
                    following.append(q)
        layer = following
    reachable = [p for p in starts if p != d and p in distance]
    hops = partners.chain(d, starts=starts, move_running=move_running)
    if not reachable:
        assert hops is None
        return
    assert hops is not None
    shortest = min(distance[p] for p in reachable)
    assert len(hops) == shortest
    assert hops[0][1] == next(p for p in reachable if distance[p] == shortest)
    assert hops[-1][2] == d
    for (j, q, r), following_hop in zip(hops, [*hops[1:], None], strict=True):
        assert j == partner(q, r)
        if following_hop is not None:
            assert following_hop[1] == r
    for q in range(n):  # nothing was taken
        if q != d:
            assert partners.peek(q, d, move_running=move_running) == partner(q, d)
