"""KIP-925's rack-aware standbys: the least changelog traffic among every placement with the
same standby counts, never beside a copy of the task (brute force); in the high-availability
assignor, fewer changelog partitions read across racks with the option than without, the
assignment valid."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from assignors.task.high_availability import HighAvailabilityTaskAssignor
from assignors.task.rack_aware import standby_changelog_traffic
from assignors.task.rack_standby import optimize_standbys
from assignors.types import AssignmentError
from assignors.validate import validate_task_assignment
from tests.rack_scenarios import rack_state

Case = tuple[list[int], list[int], list[list[int]], list[int]]


@st.composite
def standbys(draw: st.DrawFn) -> Case:
    """Per process its rack; per task its active's process, its cost per rack, and one standby
    slot (filled round-robin off the active, as a balanced start)."""
    procs = draw(st.integers(2, 4))
    racks = draw(st.integers(2, 3))
    tasks = draw(st.integers(1, 5))
    proc_rack = [draw(st.integers(0, racks - 1)) for _ in range(procs)]
    owner = [draw(st.integers(0, procs - 1)) for _ in range(tasks)]
    cost = [[draw(st.integers(0, 2)) for _ in range(racks)] for _ in range(tasks)]
    slots = [(owner[i] + 1 + i % (procs - 1)) % procs for i in range(tasks)]
    return proc_rack, owner, cost, slots


@settings(max_examples=80, deadline=None)
@given(standbys())
def test_the_least_changelog_cost_with_the_counts_kept(case: Case) -> None:
    proc_rack, owner, cost, before = case
    procs = len(proc_rack)
    slots = list(before)
    optimize_standbys(
        slots,
        1,
        owner=owner,
        capacity=[1] * procs,
        rack_cost=lambda i, p: cost[i][proc_rack[p]],
        zone=[()] * procs,
        fixed=lambda i: set(),
        blocked=lambda i: set(),
        holds_state=lambda i, p: False,
        non_overlap_cost=1,
    )

    def allowed(placed: tuple[int, ...] | list[int]) -> bool:
        was = sorted(list(before).count(p) for p in range(procs))
        now = [list(placed).count(p) for p in range(procs)]
        spread_ok = max(was) - min(was) <= 1 or now == [list(before).count(p) for p in range(procs)]
        return sorted(now) == was and spread_ok and all(p != owner[i] for i, p in enumerate(placed))

    def total(placed: tuple[int, ...] | list[int]) -> int:
        return sum(cost[i][proc_rack[p]] for i, p in enumerate(placed))

    assert allowed(slots)
    best = min(total(o) for o in itertools.product(range(procs), repeat=len(owner)) if allowed(o))
    assert total(slots) == best


def test_the_option_cuts_changelog_traffic() -> None:
    state = rack_state(9, 90, seed=21, standbys=2, previous=True)
    with_it = HighAvailabilityTaskAssignor().assign(state)
    without = HighAvailabilityTaskAssignor(rack_aware_standbys=False).assign(state)
    assert validate_task_assignment(state, with_it) is AssignmentError.NONE
    assert standby_changelog_traffic(state, with_it) < standby_changelog_traffic(state, without)
    assert with_it.processes == HighAvailabilityTaskAssignor().assign(state).processes  # deterministic


def test_without_tags_the_flow_starts_rack_blind() -> None:
    """Racks of 5, 1 and 4 processes: spreading the standbys across racks first piled those of
    the other racks' actives on the lone process (60 of 132); as Kafka Streams, the flow starts
    from the rack-blind balanced placement, so every process keeps a balanced standby count."""
    state = rack_state(10, 100, seed=1018, standbys=2, rack_of=[0, 0, 0, 0, 0, 1, 2, 2, 2, 2])
    assignment = HighAvailabilityTaskAssignor().assign(state)
    counts = [len(p.standby) for p in assignment.processes]
    assert sum(counts) == 132
    assert max(counts) - min(counts) <= 1
    without = HighAvailabilityTaskAssignor(rack_aware_standbys=False).assign(state)
    assert standby_changelog_traffic(state, assignment) < standby_changelog_traffic(state, without)
    assert validate_task_assignment(state, assignment) is AssignmentError.NONE
