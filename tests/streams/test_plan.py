"""A member's task-set reconciliation: create, close, keep, recycle."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamtasks.errors import LocalProtocolError
from streamtasks.streams import TaskKind, TaskPlan, plan_tasks
from tests.ids import task as t
from tests.ids import tasks as ts
from topology import TaskId

A, S = TaskKind.ACTIVE, TaskKind.STANDBY


def test_nothing_running_nothing_assigned_is_an_empty_plan() -> None:
    plan = plan_tasks({}, active=(), standby=())
    assert plan == TaskPlan()
    assert plan.changes_nothing


def test_new_active_is_created_as_active() -> None:
    assert plan_tasks({}, active=[t("0_1")], standby=()) == TaskPlan(create_active=ts("0_1"))


def test_new_standby_is_created_as_standby() -> None:
    assert plan_tasks({}, active=(), standby=[t("1_0")]) == TaskPlan(create_standby=ts("1_0"))


def test_active_that_stays_active_is_kept() -> None:
    plan = plan_tasks({t("0_0"): A}, active=[t("0_0")], standby=())
    assert plan == TaskPlan(keep=ts("0_0"))
    assert plan.changes_nothing


def test_standby_that_stays_standby_is_kept() -> None:
    assert plan_tasks({t("1_0"): S}, active=(), standby=[t("1_0")]) == TaskPlan(keep=ts("1_0"))


def test_active_that_becomes_standby_is_recycled_not_closed() -> None:
    plan = plan_tasks({t("1_0"): A}, active=(), standby=[t("1_0")])
    assert plan == TaskPlan(recycle_to_standby=ts("1_0"))
    assert not plan.changes_nothing


def test_standby_that_becomes_active_is_recycled_not_created() -> None:
    assert plan_tasks({t("1_0"): S}, active=[t("1_0")], standby=()) == TaskPlan(recycle_to_active=ts("1_0"))


def test_tasks_no_longer_assigned_are_closed_whatever_their_kind() -> None:
    plan = plan_tasks({t("0_0"): A, t("1_0"): S}, active=(), standby=())
    assert plan == TaskPlan(close=ts("0_0", "1_0"))


def test_every_step_at_once_each_tuple_sorted() -> None:
    current = {t("0_3"): A, t("0_1"): A, t("1_2"): S, t("1_0"): S, t("2_0"): A, t("2_1"): S}
    plan = plan_tasks(
        current,
        active=[t("0_1"), t("1_0"), t("3_1"), t("3_0")],
        standby=[t("1_2"), t("0_3"), t("4_0")],
    )
    assert plan == TaskPlan(
        create_active=ts("3_0", "3_1"),
        create_standby=ts("4_0"),
        close=ts("2_0", "2_1"),
        recycle_to_standby=ts("0_3"),
        recycle_to_active=ts("1_0"),
        keep=ts("0_1", "1_2"),
    )


def test_a_task_both_active_and_standby_is_refused() -> None:
    with pytest.raises(LocalProtocolError, match="both as active and as standby"):
        plan_tasks({}, active=[t("0_0")], standby=[t("0_0")])


task_ids = st.builds(TaskId, st.integers(0, 3), st.integers(0, 3))


@given(
    st.dictionaries(task_ids, st.sampled_from(list(TaskKind))),
    st.frozensets(task_ids),
    st.frozensets(task_ids),
)
def test_every_task_lands_in_exactly_one_step_and_applying_the_plan_gives_the_assignment(
    current: dict[TaskId, TaskKind], active: frozenset[TaskId], standby: frozenset[TaskId]
) -> None:
    standby -= active
    plan = plan_tasks(current, active=active, standby=standby)
    steps = (
        plan.create_active,
        plan.create_standby,
        plan.close,
        plan.recycle_to_standby,
        plan.recycle_to_active,
        plan.keep,
    )
    every = [task for step in steps for task in step]
    assert len(every) == len(set(every))
    assert set(every) == set(current) | active | standby
    assert all(list(step) == sorted(step) for step in steps)
    after = {k: v for k, v in current.items() if k not in plan.close}
    after.update(dict.fromkeys(plan.create_active + plan.recycle_to_active, A))
    after.update(dict.fromkeys(plan.create_standby + plan.recycle_to_standby, S))
    assert after == {**dict.fromkeys(active, A), **dict.fromkeys(standby, S)}
