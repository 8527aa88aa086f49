"""The fallback-prior task assignor keeps what ran before and always asks for a follow-up."""

from __future__ import annotations

import assignors
from assignors.task.fallback_prior import FallbackPriorTaskAssignor
from assignors.types import AssignmentConfigs, ClientState
from assignors.validate import validate_task_assignment
from tests.assignors.task.scenarios import build_state, pid, task_specs
from tests.ids import task as t

FALLBACK = FallbackPriorTaskAssignor()


def test_registry_resolves_the_name() -> None:
    assert isinstance(assignors.get("fallback_prior"), FallbackPriorTaskAssignor)


def test_previous_actives_stay_even_when_unbalanced() -> None:
    tasks = frozenset(t(0, p) for p in range(4))
    clients = [
        ClientState(process_id=pid(0), previous_active=tasks),
        ClientState(process_id=pid(1)),
    ]
    state = build_state(task_specs({0: 4}, {1: 2}), clients, now_ms=7)
    result = FALLBACK.assign(state)
    assert result.for_process(pid(0)).active == tasks
    assert result.for_process(pid(1)).active == {t(1, 0), t(1, 1)}  # new tasks fill the gap
    assert result.followup_rebalance_ms == 7 + AssignmentConfigs().probing_rebalance_interval_ms


def test_previous_standbys_stay_and_missing_ones_are_added() -> None:
    clients = [
        ClientState(
            process_id=pid(0),
            previous_active=frozenset({t(0, 0), t(0, 1)}),
            previous_standby=frozenset({t(0, 2)}),
        ),
        ClientState(
            process_id=pid(1), previous_active=frozenset({t(0, 2)}), previous_standby=frozenset({t(0, 0)})
        ),
        ClientState(process_id=pid(2), previous_standby=frozenset({t(0, 0)})),
    ]
    state = build_state(task_specs({0: 3}), clients, AssignmentConfigs(num_standby_replicas=1))
    result = FALLBACK.assign(state)
    assert t(0, 2) in result.for_process(pid(0)).standby
    assert t(0, 0) in result.for_process(pid(1)).standby  # the first previous holder, replicas = 1
    assert t(0, 0) not in result.for_process(pid(2)).standby
    assert sum(t(0, 1) in p.standby for p in result.processes) == 1
    assert validate_task_assignment(state, result).name == "NONE"


def test_a_doubly_claimed_task_stays_with_the_lowest_process_id() -> None:
    clients = [
        ClientState(process_id=pid(0), previous_active=frozenset({t(0, 0)})),
        ClientState(process_id=pid(1), previous_active=frozenset({t(0, 0)}), previous_standby=frozenset()),
    ]
    state = build_state(task_specs({0: 1}), clients, AssignmentConfigs(num_standby_replicas=1))
    result = FALLBACK.assign(state)
    assert result.for_process(pid(0)).active == {t(0, 0)}  # the lowest process id of the claimants
    assert result.for_process(pid(1)).standby == {t(0, 0)}
