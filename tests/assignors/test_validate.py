"""validate_task_assignment: KIP-924's verdicts."""

from __future__ import annotations

import uuid
from collections.abc import Iterable

import pytest

from assignors.task.high_availability import HighAvailabilityTaskAssignor
from assignors.types import AssignmentConfigs, AssignmentError, ClientState, ProcessAssignment, TaskAssignment
from assignors.validate import validate_task_assignment
from tests.assignors.task.scenarios import build_state, pid, task_specs
from topology.ids import TaskId

A, B, S = TaskId(0, 0), TaskId(0, 1), TaskId(1, 0)  # S is stateless
STATE = build_state(
    task_specs({0: 2}, {1: 1}),
    [ClientState(process_id=pid(0)), ClientState(process_id=pid(1))],
    AssignmentConfigs(num_standby_replicas=1),
)


def assignment(*processes: ProcessAssignment) -> TaskAssignment:
    return TaskAssignment(processes=processes)


def pa(
    n: int,
    active: Iterable[TaskId] = (),
    standby: Iterable[TaskId] = (),
    warmup: Iterable[TaskId] = (),
) -> ProcessAssignment:
    return ProcessAssignment(
        process_id=pid(n), active=frozenset(active), standby=frozenset(standby), warmup=frozenset(warmup)
    )


def test_a_valid_assignment() -> None:
    assert (
        validate_task_assignment(STATE, assignment(pa(0, {A, S}, {B}), pa(1, {B}, {A})))
        is AssignmentError.NONE
    )


def test_what_the_high_availability_assignor_returns_is_valid() -> None:
    result = HighAvailabilityTaskAssignor().assign(STATE)
    assert validate_task_assignment(STATE, result) is AssignmentError.NONE


@pytest.mark.parametrize(
    ("processes", "error"),
    [
        ((pa(0, {A, TaskId(9, 9)}), pa(1, {B})), AssignmentError.UNKNOWN_TASK_ID),
        ((pa(0, {A}), pa(1, {B}, {TaskId(0, 5)})), AssignmentError.UNKNOWN_TASK_ID),
        ((pa(0, {A}), pa(1, {B}, warmup={TaskId(0, 5)})), AssignmentError.UNKNOWN_TASK_ID),
        ((pa(0, {A, B}), pa(1, {B})), AssignmentError.ACTIVE_TASK_ASSIGNED_MULTIPLE_TIMES),
        ((pa(0, {A, B}), pa(1, {S}, {S})), AssignmentError.INVALID_STANDBY_TASK),
        ((pa(0, {A, B}), pa(1, {S}, warmup={S})), AssignmentError.INVALID_STANDBY_TASK),
        ((pa(0, {A, B}, {A}), pa(1, {S})), AssignmentError.INVALID_STANDBY_TASK),
        ((pa(0, {A, B}, warmup={B}), pa(1, {S})), AssignmentError.INVALID_STANDBY_TASK),
        (
            (pa(0, {S}), pa(1, {A, B}, set(), set()), pa(0, set(), {A}, {A})),
            AssignmentError.INVALID_STANDBY_TASK,
        ),
        ((pa(0, {A, B, S}),), AssignmentError.MISSING_PROCESS_ID),
        ((pa(0, {A}), pa(1, {B}), pa(2, {S})), AssignmentError.UNKNOWN_PROCESS_ID),
    ],
)
def test_errors(processes: tuple[ProcessAssignment, ...], error: AssignmentError) -> None:
    assert validate_task_assignment(STATE, assignment(*processes)) is error


def test_the_first_problem_decides() -> None:
    # an unknown task and an unknown process: the task check comes first, as in Kafka
    bad = assignment(
        pa(0, {A, B, S}),
        pa(1),
        ProcessAssignment(process_id=uuid.UUID(int=99), active=frozenset({TaskId(8, 8)})),
    )
    assert validate_task_assignment(STATE, bad) is AssignmentError.UNKNOWN_TASK_ID


def test_an_unassigned_task_is_not_an_error_of_this_check() -> None:
    assert validate_task_assignment(STATE, assignment(pa(0, {A}), pa(1))) is AssignmentError.NONE


def test_a_process_listed_twice_counts_as_one() -> None:
    assert (
        validate_task_assignment(STATE, assignment(pa(0, {A}), pa(0, {S}), pa(1, {B})))
        is AssignmentError.NONE
    )
