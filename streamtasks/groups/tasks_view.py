"""``streamtasks groups describe --tasks`` (pure: no IO): one row per task of an App group
(classic, from the members' streamtasks or Kafka Streams userdata) or of a streams group (the
members' current assignment): the member (client id) running it active, those keeping it as a
standby or warming it up, and, with ``--offsets``, its lag (the committed offsets' lag summed
over its input partitions)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from streamtasks.groups.view import ClassicGroupView, joined, table

__all__ = ["TaskRow", "classic_tasks", "render_tasks", "task_rows"]

#: (client id, active, standby, warm-up task ids) of one member.
Holder = tuple[str, Iterable[str], Iterable[str], Iterable[str]]


@dataclass(slots=True, kw_only=True)
class TaskRow:
    task: str
    active: list[str] = field(default_factory=list)
    standby: list[str] = field(default_factory=list)
    warmup: list[str] = field(default_factory=list)
    lag: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"task": self.task, "active": self.active, "standby": self.standby, "warmup": self.warmup,
                "lag": self.lag}  # fmt: skip


def _order(task: str) -> tuple[int, str, int]:
    subtopology, _, partition = task.rpartition("_")
    number = int(subtopology) if subtopology.isdigit() else 1 << 31
    return (number, subtopology, int(partition) if partition.isdigit() else -1)


def task_rows(holders: Iterable[Holder], lags: Mapping[str, int] | None = None) -> tuple[TaskRow, ...]:
    """Every task some member holds, by task id (numeric order), with its holders by role."""
    rows: dict[str, TaskRow] = {}
    for client, active, standby, warmup in holders:
        for role, tasks in (("active", active), ("standby", standby), ("warmup", warmup)):
            for task in tasks:
                row = rows.setdefault(task, TaskRow(task=task))
                getattr(row, role).append(client)
    for row in rows.values():
        row.lag = None if lags is None else lags.get(row.task)
        for members in (row.active, row.standby, row.warmup):
            members.sort()
    return tuple(rows[t] for t in sorted(rows, key=_order))


def classic_tasks(view: ClassicGroupView) -> list[Holder]:
    """A classic group's members with the tasks their userdata names (none: not an App group)."""
    return [
        (m.client_id, map(str, m.tasks.active), map(str, m.tasks.standby), map(str, m.tasks.warmup))
        for m in view.members
        if m.tasks is not None
    ]


def render_tasks(rows: Sequence[TaskRow]) -> str:
    if not rows:
        return "TASKS -: no member holds a task (not an App or streams group, or no assignment yet)"
    return table(
        ("TASK", "ACTIVE", "STANDBY", "WARMUP", "LAG"),
        ((r.task, joined(r.active), joined(r.standby), joined(r.warmup), "-" if r.lag is None else str(r.lag))
         for r in rows),
    )  # fmt: skip
