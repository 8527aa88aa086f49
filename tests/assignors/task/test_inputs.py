"""Bad input to the task assignors is refused with a typed error that names the culprit."""

from __future__ import annotations

import pytest

from assignors.task.fallback_prior import FallbackPriorTaskAssignor
from assignors.task.high_availability import HighAvailabilityTaskAssignor
from assignors.task.sticky import StickyTaskAssignor
from assignors.types import RUNNING_LAG, ApplicationState, ClientState, TaskSpec
from streamtasks.errors import AssignorError, AssignorInputError
from tests.assignors.task.scenarios import build_state, pid, task_specs
from topology.ids import TaskId


def test_unknown_task_in_the_previous_assignment() -> None:
    client = ClientState(process_id=pid(0), previous_active=frozenset({TaskId(7, 0)}))
    with pytest.raises(AssignorInputError, match=r"previous tasks \['7_0'\]"):
        build_state(task_specs({0: 2}), [client])


def test_unknown_task_among_previous_standbys() -> None:
    client = ClientState(process_id=pid(0), previous_standby=frozenset({TaskId(0, 9)}))
    with pytest.raises(AssignorInputError, match="0_9"):
        build_state(task_specs({0: 2}), [client])


def test_duplicate_process_id() -> None:
    with pytest.raises(AssignorInputError, match="listed twice"):
        build_state(task_specs({0: 1}), [ClientState(process_id=pid(0)), ClientState(process_id=pid(0))])


def test_duplicate_task_id() -> None:
    spec = TaskSpec(id=TaskId(0, 0), is_stateful=True)
    with pytest.raises(AssignorInputError, match="0_0 is listed twice"):
        ApplicationState.build([spec, spec], [ClientState(process_id=pid(0))])


@pytest.mark.parametrize("capacity", [0, -1])
def test_capacity_below_one_thread(capacity: int) -> None:
    with pytest.raises(AssignorInputError, match=f"capacity {capacity}"):
        ClientState(process_id=pid(0), capacity=capacity)


@pytest.mark.parametrize("lag", [-1, -3, -100])
def test_negative_lag_other_than_the_running_sentinel(lag: int) -> None:
    with pytest.raises(AssignorInputError, match=f"lag {lag} for task 0_0"):
        ClientState(process_id=pid(0), task_lags={TaskId(0, 0): lag})


def test_the_running_sentinel_is_a_valid_lag() -> None:
    client = ClientState(process_id=pid(0), task_lags={TaskId(0, 0): RUNNING_LAG})
    assert client.lag_for(TaskId(0, 0)) == RUNNING_LAG


def test_a_task_both_active_and_standby_on_one_process() -> None:
    task = frozenset({TaskId(0, 0)})
    with pytest.raises(AssignorInputError, match="both as previous active and previous standby"):
        ClientState(process_id=pid(0), previous_active=task, previous_standby=task)


@pytest.mark.parametrize(
    "assignor", [HighAvailabilityTaskAssignor(), StickyTaskAssignor(), FallbackPriorTaskAssignor()]
)
def test_tasks_but_no_process(assignor: HighAvailabilityTaskAssignor) -> None:
    with pytest.raises(AssignorInputError, match="cannot assign 3 tasks") as info:
        assignor.assign(build_state(task_specs({0: 3}), []))
    assert isinstance(info.value, AssignorError)


def test_lags_for_tasks_the_topology_does_not_have_are_ignored() -> None:
    client = ClientState(process_id=pid(0), task_lags={TaskId(5, 5): 3})
    result = HighAvailabilityTaskAssignor().assign(build_state(task_specs({0: 1}), [client]))
    assert result.for_process(pid(0)).active == {TaskId(0, 0)}
