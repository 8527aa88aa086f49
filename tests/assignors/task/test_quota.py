"""Per-thread quotas and the sticky fill (assignors.task.quota)."""

from __future__ import annotations

import pytest

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
