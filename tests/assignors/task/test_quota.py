"""Per-thread quotas and the sticky fill (assignors.task.quota)."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assignors.task.indexed import group_rows
from assignors.task.quota import balanced_fill, compute_quotas


def test_quotas_follow_threads() -> None:
    quotas = compute_quotas(10, capacity=[1, 1, 3], base=[0, 0, 0])
    assert quotas.lo == [2, 2, 6]
    assert quotas.hi == [2, 2, 6]
    assert quotas.extras == 0


def test_extras_are_the_tasks_the_floors_leave_over() -> None:
    quotas = compute_quotas(7, capacity=[1, 1, 1], base=[0, 0, 0])
    assert quotas.lo == [2, 2, 2]
    assert quotas.hi == [3, 3, 3]
    assert quotas.extras == 1


def test_a_process_over_its_share_is_set_aside() -> None:
    # 5 tasks, 4 of them pinned on process 0: the fifth goes to one of the others
    quotas = compute_quotas(5, capacity=[1, 1, 1], base=[4, 0, 0])
    assert quotas.lo[0] == quotas.hi[0] == 4
    assert quotas.lo[1:] == [0, 0]
    assert quotas.hi[1:] == [1, 1]
    assert quotas.extras == 1


def test_processes_at_their_ceiling_beyond_the_extras_are_set_aside() -> None:
    quotas = compute_quotas(5, capacity=[1, 1, 1, 1], base=[2, 2, 0, 0])
    assert (quotas.lo[:2], quotas.hi[:2]) == ([2, 2], [2, 2])
    assert quotas.hi[2:] == [1, 1]
    assert quotas.extras == 1


@pytest.mark.parametrize("n", [1, 2, 5])
def test_fill_keeps_previous_owners_and_deals_the_rest_round_robin(n: int) -> None:
    tasks = list(range(12))
    sticky, _ = group_rows(12, [0, 1, 2], [0, 0, 0])  # process 0 ran tasks 0-2
    owner = [-1] * 12
    counts = [0] * n
    balanced_fill(tasks, [1] * n, counts, owner, sticky=sticky)
    assert owner[:3] == [0, 0, 0]
    assert sorted(counts) == sorted([12 // n + (1 if p < 12 % n else 0) for p in range(n)])
    assert -1 not in owner


def test_fill_asks_secondary_candidates_for_tasks_that_cannot_stay() -> None:
    sticky, _ = group_rows(4, [0, 1, 2, 3], [0, 0, 0, 0])
    owner = [-1] * 4
    balanced_fill(range(4), [1, 1, 1], [0, 0, 0], owner, sticky=sticky, secondary=lambda i: [2])
    assert owner[0] == owner[1] == 0
    assert owner[2] == 2
    assert owner[3] == 1


def test_mixed_thread_counts_get_the_per_thread_band() -> None:
    """29 tasks on 2 + 1 threads: floor..ceil of the shares would allow 20 / 9 (10 against 9
    per thread); the per-thread band allows only 19 / 10 (9.5 against 10)."""
    quotas = compute_quotas(29, capacity=[2, 1], base=[0, 0])
    assert (quotas.lo, quotas.hi, quotas.extras) == ([19, 10], [20, 10], 0)


def test_bands_of_the_same_spread_keep_what_ran_where() -> None:
    """2 tasks on 1 + 3 threads: 1 / 1 and 0 / 2 both have per-thread spread 2/3; the band is
    the one that keeps more of the tasks where they ran."""
    kept_on_first = compute_quotas(2, capacity=[1, 3], base=[0, 0], previous=[2, 0])
    assert (kept_on_first.lo, kept_on_first.hi) == ([1, 1], [1, 3])
    kept_on_second = compute_quotas(2, capacity=[1, 3], base=[0, 0], previous=[0, 2])
    assert (kept_on_second.lo, kept_on_second.hi) == ([0, 0], [0, 2])


def _vectors(total: int, lo: list[int], hi: list[int]) -> list[tuple[int, ...]]:
    out: list[tuple[int, ...]] = [()]
    for low, high in zip(lo, hi, strict=True):
        out = [(*v, x) for v in out for x in range(low, high + 1) if sum(v) + x <= total]
    return [v for v in out if sum(v) == total]


def _spread(counts: tuple[int, ...], capacity: list[int]) -> Fraction:
    loads = [Fraction(n, c) for n, c in zip(counts, capacity, strict=True)]
    return max(loads) - min(loads)


@settings(max_examples=300)
@given(
    capacity=st.lists(st.integers(1, 4), min_size=2, max_size=4),
    bases=st.lists(st.sampled_from((0, 0, 0, 1, 2, 5)), min_size=4, max_size=4),
    more=st.integers(0, 10),
)
def test_every_assignment_within_the_bands_has_the_least_spread(
    capacity: list[int], bases: list[int], more: int
) -> None:
    """Against every assignment of the tasks (each process at least its base): no assignment
    within the quotas has a larger per-thread spread than the best one."""
    base = bases[: len(capacity)]
    total = sum(base) + more
    quotas = compute_quotas(total, capacity, base)
    assert all(max(b, lo) <= hi for b, lo, hi in zip(base, quotas.lo, quotas.hi, strict=True))
    assert quotas.extras == total - sum(map(max, base, quotas.lo)) >= 0
    best = min(_spread(v, capacity) for v in _vectors(total, base, [total] * len(capacity)))
    within = _vectors(total, list(map(max, base, quotas.lo)), quotas.hi)
    assert within
    if len(set(capacity)) > 1:
        assert max(_spread(v, capacity) for v in within) == best
