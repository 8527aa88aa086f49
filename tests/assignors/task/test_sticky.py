"""The sticky task assignor: previous owners within quota, then previous standbys, then the rest."""

from __future__ import annotations

import assignors
from assignors.task.quality import active_spread, colocated_standbys
from assignors.task.sticky import StickyTaskAssignor
from assignors.types import RUNNING_LAG, AssignmentConfigs, ClientState
from tests.assignors.task.scenarios import build_state, pid, task_specs
from tests.ids import task as t

STICKY = StickyTaskAssignor()


def test_registry_resolves_the_name() -> None:
    assert isinstance(assignors.get("sticky"), StickyTaskAssignor)


def test_previous_owners_keep_tasks_up_to_quota_then_previous_standbys_then_the_least_loaded() -> None:
    clients = [
        ClientState(process_id=pid(0), previous_active=frozenset({t(0, 0), t(0, 1), t(0, 2), t(0, 3)})),
        ClientState(process_id=pid(1), previous_standby=frozenset({t(0, 3)})),
        ClientState(process_id=pid(2)),
    ]
    state = build_state(task_specs({0: 4}, {1: 2}), clients)
    result = STICKY.assign(state)
    assert result.for_process(pid(0)).active == {t(0, 0), t(0, 1)}
    assert t(0, 3) in result.for_process(pid(1)).active
    assert active_spread(state, result) == 0
    assert result.followup_rebalance_ms is None


def test_stateful_and_stateless_tasks_share_one_quota() -> None:
    clients = [
        ClientState(process_id=pid(0), previous_active=frozenset({t(0, 0), t(0, 1)})),
        ClientState(process_id=pid(1), previous_active=frozenset({t(1, 0), t(1, 1)})),
    ]
    result = STICKY.assign(build_state(task_specs({0: 2}, {1: 2}), clients))
    assert result.for_process(pid(0)).active == {t(0, 0), t(0, 1)}
    assert result.for_process(pid(1)).active == {t(1, 0), t(1, 1)}


def test_lags_are_ignored_and_no_warmups_are_made() -> None:
    tasks = [t(0, p) for p in range(4)]
    clients = [
        ClientState(
            process_id=pid(0), previous_active=frozenset(tasks), task_lags=dict.fromkeys(tasks, RUNNING_LAG)
        ),
        ClientState(process_id=pid(1)),
    ]
    result = STICKY.assign(build_state(task_specs({0: 4}), clients))
    assert len(result.for_process(pid(1)).active) == 2
    assert not any(p.warmup for p in result.processes)
    assert result.followup_rebalance_ms is None


def test_standbys_stay_with_their_previous_holders() -> None:
    clients = [
        ClientState(
            process_id=pid(0), previous_active=frozenset({t(0, 0)}), previous_standby=frozenset({t(0, 1)})
        ),
        ClientState(process_id=pid(1), previous_active=frozenset({t(0, 1)})),
        ClientState(process_id=pid(2), previous_standby=frozenset({t(0, 0)})),
    ]
    state = build_state(task_specs({0: 2}), clients, AssignmentConfigs(num_standby_replicas=1))
    result = STICKY.assign(state)
    assert result.for_process(pid(0)).standby == {t(0, 1)}
    assert result.for_process(pid(2)).standby == {t(0, 0)}
    assert colocated_standbys(result) == 0
