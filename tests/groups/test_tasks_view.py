"""``groups describe --tasks`` (pure): one row per task with its holders by role and its lag."""

from __future__ import annotations

from streamtasks.groups.tasks_view import render_tasks, task_rows


def test_rows_by_task_in_numeric_order_with_holders_and_lags() -> None:
    rows = task_rows(
        [
            ("b", ["0_10", "1_0"], ["0_2"], []),
            ("a", ["0_2"], ["0_10"], ["1_0"]),
            ("c", [], ["0_2", "0_10"], []),
        ],
        {"0_2": 5, "0_10": 0},
    )
    assert [r.task for r in rows] == ["0_2", "0_10", "1_0"]  # not "0_10" before "0_2"
    assert [r.to_json() for r in rows] == [
        {"task": "0_2", "active": ["a"], "standby": ["b", "c"], "warmup": [], "lag": 5},
        {"task": "0_10", "active": ["b"], "standby": ["a", "c"], "warmup": [], "lag": 0},
        {"task": "1_0", "active": ["b"], "standby": [], "warmup": ["a"], "lag": None},
    ]
    text = render_tasks(rows).splitlines()
    assert text[0].split() == ["TASK", "ACTIVE", "STANDBY", "WARMUP", "LAG"]
    assert text[1].split() == ["0_2", "a", "b,c", "-", "5"]
    assert text[3].split() == ["1_0", "b", "-", "a", "-"]
    assert task_rows([("a", [], [], [])], None) == ()
    assert render_tasks(()).startswith("TASKS -: no member holds a task")
