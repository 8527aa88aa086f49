"""App events as JSON."""

from __future__ import annotations

import json

from streamtasks.app import RebalanceTriggered, RestoreCompleted, TaskCreated, TaskRecycled, event_to_json
from topology import TaskId


def test_event_to_json_names_the_event_and_prints_task_ids() -> None:
    created = TaskCreated(at_ms=5, task=TaskId(1, 2), role="warmup", offset_sum=40)
    assert event_to_json(created) == {
        "event": "TaskCreated",
        "at_ms": 5,
        "task": "1_2",
        "role": "warmup",
        "offset_sum": 40,
    }
    recycled = event_to_json(TaskRecycled(at_ms=6, task=TaskId(0, 3), from_role="standby", to_role="active"))
    assert (recycled["event"], recycled["task"], recycled["to_role"]) == ("TaskRecycled", "0_3", "active")
    restored = RestoreCompleted(at_ms=7, task=TaskId(1, 0), records=12, duration_ms=30)
    assert json.loads(json.dumps(event_to_json(restored)))["records"] == 12


def test_a_rebalance_without_a_task_serialises_to_null() -> None:
    probe = RebalanceTriggered(at_ms=1, task=None, lag=None, trigger="probing", reason="deadline")
    assert json.dumps(event_to_json(probe), sort_keys=True) == (
        '{"at_ms": 1, "event": "RebalanceTriggered", "lag": null, "reason": "deadline", '
        '"task": null, "trigger": "probing"}'
    )
