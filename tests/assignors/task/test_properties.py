"""Properties every built-in task assignor keeps, on random small applications."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from assignors.task.fallback_prior import FallbackPriorTaskAssignor
from assignors.task.high_availability import HighAvailabilityTaskAssignor
from assignors.task.quality import active_spread, colocated_standbys, moved_actives
from assignors.task.quota import compute_quotas
from assignors.task.sticky import StickyTaskAssignor
from assignors.types import (
    RUNNING_LAG,
    ApplicationState,
    ClientState,
    ProcessId,
    TaskAssignment,
    TaskAssignor,
)
from assignors.validate import validate_task_assignment
from tests.assignors.task.scenarios import Scenario, next_generation, pid, scenarios, shuffled_state
from topology.ids import TaskId

ASSIGNORS: list[TaskAssignor] = [
    HighAvailabilityTaskAssignor(),
    StickyTaskAssignor(),
    FallbackPriorTaskAssignor(),
]
ids = [a.name for a in ASSIGNORS]


def actives_of(assignment: TaskAssignment) -> list[TaskId]:
    return sorted(t for p in assignment.processes for t in p.active)


def caught_up(state: ApplicationState, task: TaskId) -> set[ProcessId]:
    limit = state.configs.acceptable_recovery_lag
    return {
        c.process_id
        for c in state.clients.values()
        if (lag := c.lag_for(task)) is not None and (lag == RUNNING_LAG or 0 <= lag <= limit)
    }


@pytest.mark.parametrize("assignor", ASSIGNORS, ids=ids)
@given(scenario=scenarios())
def test_every_task_runs_exactly_once_and_replicas_are_valid(
    assignor: TaskAssignor, scenario: Scenario
) -> None:
    state = scenario.state()
    result = assignor.assign(state)
    assert validate_task_assignment(state, result).name == "NONE"
    assert actives_of(result) == sorted(state.tasks)
    assert colocated_standbys(result) == 0
    want = min(state.configs.num_standby_replicas, len(state.clients) - 1)
    for task, spec in state.tasks.items():
        holders = [p.process_id for p in result.processes if task in p.standby]
        assert len(holders) == (want if spec.is_stateful else 0), task


@pytest.mark.parametrize("assignor", ASSIGNORS, ids=ids)
@given(scenario=scenarios(), seed=st.integers(0, 2**32))
def test_shuffled_input_gives_the_same_output(assignor: TaskAssignor, scenario: Scenario, seed: int) -> None:
    assert assignor.assign(shuffled_state(scenario, seed)) == assignor.assign(scenario.state())


@given(scenario=scenarios())
def test_high_availability_keeps_stateful_actives_on_caught_up_processes(scenario: Scenario) -> None:
    state = scenario.state()
    result = HighAvailabilityTaskAssignor().assign(state)
    owner = result.active_owner()
    for task, spec in state.tasks.items():
        ups = caught_up(state, task)
        if spec.is_stateful and ups:
            assert owner[task] in ups, task


@given(scenario=scenarios())
def test_high_availability_warmups_are_bounded_and_ask_for_a_followup(scenario: Scenario) -> None:
    state = scenario.state()
    result = HighAvailabilityTaskAssignor().assign(state)
    warmups = [(p.process_id, t) for p in result.processes for t in p.warmup]
    assert len(warmups) <= state.configs.max_warmup_replicas
    for process, task in warmups:
        assert state.tasks[task].is_stateful
        assert process not in caught_up(state, task)
    if warmups:
        assert result.followup_rebalance_ms == state.now_ms + state.configs.probing_rebalance_interval_ms


@pytest.mark.parametrize("assignor", ASSIGNORS[:2], ids=ids[:2])
@given(scenario=scenarios(lags=False))
def test_without_lags_actives_per_thread_differ_by_at_most_one(
    assignor: TaskAssignor, scenario: Scenario
) -> None:
    state = scenario.state()
    result = assignor.assign(state)
    assert active_spread(state, result) <= 1
    if isinstance(assignor, HighAvailabilityTaskAssignor):
        assert result.followup_rebalance_ms is None
        assert not any(p.warmup for p in result.processes)


def first_claims(state: ApplicationState, tasks: set[TaskId]) -> dict[ProcessId, set[TaskId]]:
    """Per process, the tasks of ``tasks`` it is the first (lowest process id) previous owner of."""
    claims: dict[ProcessId, set[TaskId]] = {p: set() for p in state.clients}
    for task in tasks:
        claimers = sorted(c.process_id for c in state.clients.values() if task in c.previous_active)
        if claimers:
            claims[claimers[0]].add(task)
    return claims


@pytest.mark.parametrize("assignor", ASSIGNORS[:2], ids=ids[:2])
@given(scenario=scenarios(lags=False))
def test_without_lags_every_process_keeps_its_previous_tasks_up_to_its_quota(
    assignor: TaskAssignor, scenario: Scenario
) -> None:
    """A process keeps at least min(tasks it was the first previous owner of, its quota's
    floor) of its previous tasks (over stateful tasks for high_availability, which balances them
    separately). The floor is floor(share), share = tasks * its threads / all threads, when
    every process has as many threads; with mixed thread counts, that of the per-thread band
    (assignors/task/quota.py), chosen with the same first claims."""
    state = scenario.state()
    result = assignor.assign(state)
    ha = isinstance(assignor, HighAvailabilityTaskAssignor)
    tasks = {t for t, s in state.tasks.items() if s.is_stateful or not ha}
    processes = sorted(state.clients, key=lambda u: u.int)
    claims = first_claims(state, tasks)
    capacity = [state.clients[p].capacity for p in processes]
    quotas = compute_quotas(
        len(tasks), capacity, [0] * len(processes), previous=[len(claims[p]) for p in processes]
    )
    if len(set(capacity)) == 1:
        threads = sum(capacity)
        assert quotas.lo == [len(tasks) * c // threads for c in capacity]
    for process, quota in zip(processes, quotas.lo, strict=True):
        kept = state.clients[process].previous_active & result.for_process(process).active
        assert len(kept) >= min(len(claims[process]), quota), process


@pytest.mark.parametrize("assignor", ASSIGNORS[:2], ids=ids[:2])
@given(
    scenario=scenarios(lags=False, previous=False, racks=False, uniform_capacity=True), lagged=st.booleans()
)
def test_adding_a_process_moves_no_more_than_its_share(
    assignor: TaskAssignor, scenario: Scenario, lagged: bool
) -> None:
    """From a balanced assignment on N one-thread processes, a new process takes at most
    ceil(tasks / (N + 1)) actives away (per class of task for high_availability without lags, as
    it balances stateful and stateless tasks separately); with lags high_availability gives it no
    stateful active before it caught up, only stateless ones."""
    first = scenario.state()
    before = assignor.assign(first)
    second = next_generation(first, before, with_lags=lagged, add=[ClientState(process_id=pid(99))])
    after = assignor.assign(second)
    n = len(second.clients)
    stateful = sum(1 for s in first.tasks.values() if s.is_stateful)
    stateless = len(first.tasks) - stateful
    if isinstance(assignor, HighAvailabilityTaskAssignor) and lagged:
        # stateful actives wait for the newcomer to catch up; stateless ones make up for it
        assert all(not second.tasks[t].is_stateful for t in after.for_process(pid(99)).active)
        bound = math.ceil(len(first.tasks) / n)
    elif isinstance(assignor, HighAvailabilityTaskAssignor):
        bound = math.ceil(stateful / n) + math.ceil(stateless / n)
    else:
        bound = math.ceil(len(first.tasks) / n)
    assert moved_actives(second, after) <= bound
    if not lagged or isinstance(assignor, StickyTaskAssignor):
        assert active_spread(second, after) <= 1


@given(scenario=scenarios(lags=False, previous=False))
def test_a_second_rebalance_with_nothing_changed_moves_nothing(scenario: Scenario) -> None:
    ha = HighAvailabilityTaskAssignor()
    first = scenario.state()
    before = ha.assign(first)
    second = next_generation(first, before)
    after = ha.assign(second)
    assert [p.active for p in after.processes] == [p.active for p in before.processes]
    assert after.followup_rebalance_ms is None
    assert active_spread(first, before) <= 1


@given(scenario=scenarios(lags=False))
def test_fallback_prior_keeps_every_previous_active_and_asks_for_a_followup(scenario: Scenario) -> None:
    state = scenario.state()
    result = FallbackPriorTaskAssignor().assign(state)
    owner = result.active_owner()
    for client in state.clients.values():
        for task in client.previous_active:
            claimers = sorted(c.process_id for c in state.clients.values() if task in c.previous_active)
            assert owner[task] == claimers[0]
    assert result.followup_rebalance_ms == state.now_ms + state.configs.probing_rebalance_interval_ms


@pytest.mark.parametrize("assignor", ASSIGNORS[:2], ids=ids[:2])
@given(scenario=scenarios(only_racks=True))
def test_replicas_of_a_task_use_as_many_racks_as_they_can(assignor: TaskAssignor, scenario: Scenario) -> None:
    state = scenario.state()
    racks = {p: c.rack for p, c in state.clients.items()}
    result = assignor.assign(state)
    owner = result.active_owner()
    want = min(state.configs.num_standby_replicas, len(state.clients) - 1) + 1
    for task, spec in state.tasks.items():
        if spec.is_stateful:
            replicas = [owner[task], *(p.process_id for p in result.processes if task in p.standby)]
            assert len({racks[p] for p in replicas}) == min(want, len(set(racks.values()))), task
