"""The assignor input is type-checked where it is built: every field of ``AssignmentConfigs``,
``ClientState``'s capacity and lags, ``ApplicationState``'s clock. Library callers get the same
rules as a scenario file, as an ``AssignorInputError`` that names the field."""

from __future__ import annotations

import dataclasses
import re

import pytest

from assignors import RUNNING_LAG, ApplicationState, AssignmentConfigs, ClientState
from assignors.task.high_availability import HighAvailabilityTaskAssignor
from assignors.types import CONFIG_BOUNDS, INT32_MAX, INT64_MAX
from streamtasks.errors import AssignorInputError, StreamTasksError
from tests.assignors.task.scenarios import build_state, pid, task_specs
from topology.ids import TaskId

#: Values that are not ints, and how the message shows them.
NOT_INTS: list[tuple[object, str]] = [
    (True, "bool True"),
    (False, "bool False"),
    (1.7, "float 1.7"),
    (2.0, "float 2.0"),
    ("two", "str 'two'"),
    ("2", "str '2'"),
    (None, "None"),
    ([1], "list [1]"),
]

INT_FIELDS = sorted(CONFIG_BOUNDS)


def test_every_int_field_has_bounds() -> None:
    ints = {
        f.name
        for f in dataclasses.fields(AssignmentConfigs)
        if not f.name.startswith("rack_aware_assignment_")
    }
    assert set(CONFIG_BOUNDS) == ints
    assert CONFIG_BOUNDS == {
        "num_standby_replicas": (0, INT32_MAX),
        "acceptable_recovery_lag": (0, INT64_MAX),
        "max_warmup_replicas": (1, INT32_MAX),
        "probing_rebalance_interval_ms": (60_000, INT64_MAX),
    }


@pytest.mark.parametrize("name", INT_FIELDS)
@pytest.mark.parametrize(("value", "shown"), NOT_INTS)
def test_a_config_that_is_not_an_int(name: str, value: object, shown: str) -> None:
    with pytest.raises(AssignorInputError, match=rf"^{name} must be an int, got {re.escape(shown)}$"):
        AssignmentConfigs(**{name: value})  # type: ignore[arg-type]


@pytest.mark.parametrize("name", INT_FIELDS)
def test_a_config_below_its_range(name: str) -> None:
    low = CONFIG_BOUNDS[name][0]
    for value in (low - 1, -1, -(2**70)):
        if value < low:
            with pytest.raises(AssignorInputError, match=rf"^{name} must be >= {low}, got {value}$"):
                AssignmentConfigs(**{name: value})  # type: ignore[arg-type]


@pytest.mark.parametrize("name", INT_FIELDS)
def test_a_config_above_its_range(name: str) -> None:
    high = CONFIG_BOUNDS[name][1]
    with pytest.raises(AssignorInputError, match=rf"^{name} must be <= {high}, got {high + 1}$"):
        AssignmentConfigs(**{name: high + 1})  # type: ignore[arg-type]


@pytest.mark.parametrize("name", INT_FIELDS)
def test_a_config_at_the_edges_of_its_range(name: str) -> None:
    low, high = CONFIG_BOUNDS[name]
    assert getattr(AssignmentConfigs(**{name: low}), name) == low  # type: ignore[arg-type]
    assert getattr(AssignmentConfigs(**{name: high}), name) == high  # type: ignore[arg-type]


def test_a_huge_int_is_described_not_printed() -> None:
    with pytest.raises(
        AssignorInputError, match=r"^num_standby_replicas must be <= \d+, got an int of 16610 bits$"
    ):
        AssignmentConfigs(num_standby_replicas=10**5000)


@pytest.mark.parametrize(
    ("tags", "message"),
    [
        ("zone", "must be a sequence of tag keys, got str 'zone'"),
        (b"zone", "must be a sequence of tag keys, got bytes b'zone'"),
        (None, "must be a sequence of tag keys, got None"),
        (3, "must be a sequence of tag keys, got 3"),
        (("zone", 1), "must hold non-empty strings, got 1"),
        (("zone", None), "must hold non-empty strings, got None"),
        (("zone", ""), "must hold non-empty strings, got str ''"),
        (("zone", "zone"), r"lists a tag twice: \['zone', 'zone'\]"),
    ],
)
def test_bad_rack_aware_assignment_tags(tags: object, message: str) -> None:
    with pytest.raises(AssignorInputError, match=rf"^rack_aware_assignment_tags {message}$"):
        AssignmentConfigs(rack_aware_assignment_tags=tags)  # type: ignore[arg-type]


def test_rack_aware_assignment_tags_become_a_tuple() -> None:
    configs = AssignmentConfigs(rack_aware_assignment_tags=["zone", "cluster"])  # type: ignore[arg-type]
    assert configs.rack_aware_assignment_tags == ("zone", "cluster")
    assert configs == AssignmentConfigs(rack_aware_assignment_tags=("zone", "cluster"))


def test_the_configs_error_is_in_the_one_error_tree() -> None:
    with pytest.raises(StreamTasksError):
        AssignmentConfigs(num_standby_replicas=1.7)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="num_standby_replicas"):
        AssignmentConfigs(num_standby_replicas=1.7)  # type: ignore[arg-type]


# -- the input around the configs ----------------------------------------------------------------


@pytest.mark.parametrize(("value", "shown"), NOT_INTS)
def test_a_capacity_that_is_not_an_int(value: object, shown: str) -> None:
    with pytest.raises(AssignorInputError, match=rf"capacity must be an int, got {re.escape(shown)}$"):
        ClientState(process_id=pid(0), capacity=value)  # type: ignore[arg-type]


def test_a_capacity_above_int32() -> None:
    with pytest.raises(AssignorInputError, match=rf"capacity {INT32_MAX + 1}; need 1 to {INT32_MAX} threads"):
        ClientState(process_id=pid(0), capacity=INT32_MAX + 1)
    assert ClientState(process_id=pid(0), capacity=INT32_MAX).capacity == INT32_MAX


@pytest.mark.parametrize(("value", "shown"), NOT_INTS)
def test_a_lag_that_is_not_an_int(value: object, shown: str) -> None:
    with pytest.raises(
        AssignorInputError, match=rf"the lag of task 0_0 must be an int, got {re.escape(shown)}$"
    ):
        ClientState(process_id=pid(0), task_lags={TaskId(0, 0): value})  # type: ignore[dict-item]


def test_lags_at_the_edges_of_their_range() -> None:
    with pytest.raises(AssignorInputError, match=rf"lag {INT64_MAX + 1} for task 0_0"):
        ClientState(process_id=pid(0), task_lags={TaskId(0, 0): INT64_MAX + 1})
    for lag in (0, INT64_MAX, RUNNING_LAG):
        assert ClientState(process_id=pid(0), task_lags={TaskId(0, 0): lag}).lag_for(TaskId(0, 0)) == lag


@pytest.mark.parametrize(
    ("value", "shown"), [(1.5, "float 1.5"), ("0", "str '0'"), (None, "None"), (True, "bool True")]
)
def test_now_ms_that_is_not_an_int(value: object, shown: str) -> None:
    with pytest.raises(AssignorInputError, match=rf"^now_ms must be an int, got {shown}$"):
        ApplicationState.build(task_specs({0: 1}), [ClientState(process_id=pid(0))], now_ms=value)  # type: ignore[arg-type]


def test_configs_that_are_not_assignment_configs() -> None:
    with pytest.raises(AssignorInputError, match=r"^configs must be an AssignmentConfigs, got dict"):
        ApplicationState(tasks={}, clients={}, configs={"num_standby_replicas": 1})  # type: ignore[arg-type]


def test_a_fractional_standby_count_no_longer_reaches_the_standby_placement() -> None:
    """Issue 12: ``num_standby_replicas=1.7`` crashed inside assignors/task/standby.py."""
    with pytest.raises(AssignorInputError, match=r"num_standby_replicas must be an int, got float 1\.7"):
        build_state(
            task_specs({0: 2}),
            [ClientState(process_id=pid(0)), ClientState(process_id=pid(1))],
            AssignmentConfigs(num_standby_replicas=1.7),  # type: ignore[arg-type]
        )
    state = build_state(
        task_specs({0: 2}),
        [ClientState(process_id=pid(0)), ClientState(process_id=pid(1))],
        AssignmentConfigs(num_standby_replicas=1),
    )
    assert HighAvailabilityTaskAssignor().assign(state).for_process(pid(0)).standby
