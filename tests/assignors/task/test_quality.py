"""The measures of an assignment used by the tests and the benchmarks."""

from __future__ import annotations

from fractions import Fraction

from assignors.task.quality import active_spread, colocated_standbys, moved_actives, warmup_count
from assignors.types import ClientState, ProcessAssignment, TaskAssignment
from tests.assignors.task.scenarios import build_state, pid, task_specs
from topology.ids import TaskId

A, B, C = TaskId(0, 0), TaskId(0, 1), TaskId(0, 2)
STATE = build_state(
    task_specs({0: 3}),
    [
        ClientState(process_id=pid(0), capacity=2, previous_active=frozenset({A, B})),
        ClientState(process_id=pid(1), capacity=1),
    ],
)
RESULT = TaskAssignment(
    processes=(
        ProcessAssignment(
            process_id=pid(0), active=frozenset({A}), standby=frozenset({A}), warmup=frozenset({C})
        ),
        ProcessAssignment(process_id=pid(1), active=frozenset({B, C}), warmup=frozenset({A})),
    )
)


def test_active_spread_is_per_thread() -> None:
    assert active_spread(STATE, RESULT) == Fraction(2) - Fraction(1, 2)


def test_moved_counts_tasks_away_from_their_previous_owner_only() -> None:
    assert moved_actives(STATE, RESULT) == 1  # B moved; A stayed; C had no owner


def test_colocated_counts_standbys_and_warmups_beside_their_active() -> None:
    assert colocated_standbys(RESULT) == 1


def test_warmup_count() -> None:
    assert warmup_count(RESULT) == 2
