"""Dual-active tasks found in drill event lines (drills/dual_active.py)."""

from __future__ import annotations

from typing import Any

from streamtasks.drills.dual_active import DualActive, active_intervals, dual_active


def ev(worker: str, at: int, event: str, task: str = "0_1", **more: Any) -> dict[str, Any]:
    return {"worker": worker, "kind": "event", "event": event, "at_ms": at, "task": task, **more}


def test_a_clean_hand_over_is_not_dual_active() -> None:
    lines = [
        ev("a", 100, "TaskCreated", role="active"),
        ev("b", 100, "TaskCreated", role="standby"),
        ev("a", 200, "TaskClosed", role="active", clean=True),
        ev("b", 210, "TaskRecycled", from_role="standby", to_role="active"),
    ]
    assert dual_active(lines) == []
    assert active_intervals(lines) == [("0_1", "a", 100, 200), ("0_1", "b", 210, 1 << 62)]


def test_a_killed_worker_stops_being_active_when_killed() -> None:
    lines = [
        ev("a", 100, "TaskCreated", role="active"),
        {"worker": "a", "kind": "killed", "at_ms": 150},
        ev("b", 160, "TaskCreated", role="active"),
    ]
    assert dual_active(lines) == []


def test_overlapping_actives_on_two_live_workers_are_found() -> None:
    lines = [
        ev("a", 100, "TaskCreated", role="active"),
        ev("b", 150, "TaskCreated", role="active"),
        ev("a", 180, "TaskRecycled", from_role="active", to_role="standby"),
        ev("c", 170, "TaskCreated", task="0_2", role="active"),
        {"worker": "a", "kind": "stopped", "wall_ms": 300},
    ]
    assert dual_active(lines) == [DualActive(task="0_1", workers=("a", "b"), overlap_ms=30)]
