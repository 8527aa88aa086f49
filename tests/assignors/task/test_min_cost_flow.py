"""The group transportation's cycle cancelling: optimal against brute force, sizes kept."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from assignors.task.min_cost_flow import min_cost_transport, transport_cost


def _brute(cost: list[list[int]], group: list[int]) -> int:
    """The least cost over every arrangement with the sizes of ``group``."""
    sizes = sorted(group)
    best = None
    for perm in set(itertools.permutations(group)):
        assert sorted(perm) == sizes
        c = transport_cost(cost, perm)
        best = c if best is None else min(best, c)
    assert best is not None
    return best


@st.composite
def instances(draw: st.DrawFn) -> tuple[list[list[int]], list[int], int]:
    groups = draw(st.integers(1, 4))
    n = draw(st.integers(0, 7))
    cost = [[draw(st.integers(0, 20)) for _ in range(groups)] for _ in range(n)]
    group = [draw(st.integers(0, groups - 1)) for _ in range(n)]
    return cost, group, groups


@given(instances())
def test_the_least_cost_with_the_sizes_kept(case: tuple[list[list[int]], list[int], int]) -> None:
    cost, group, groups = case
    final = min_cost_transport(cost, group, groups)
    assert sorted(final) == sorted(group)
    assert transport_cost(cost, final) == _brute(cost, group)
    assert min_cost_transport(cost, group, groups) == final  # deterministic


def test_a_three_group_cycle_no_pair_swap_finds() -> None:
    # item 0 wants group 1, item 1 wants group 2, item 2 wants group 0: no swap of two helps
    cost = [[5, 0, 9], [9, 5, 0], [0, 9, 5]]
    assert min_cost_transport(cost, [0, 1, 2], 3) == [1, 2, 0]


def test_items_that_gain_nothing_stay() -> None:
    cost = [[1, 1], [1, 1]]
    assert min_cost_transport(cost, [0, 1], 2) == [0, 1]
