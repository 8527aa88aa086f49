"""Dual-active tasks in a drill's event lines: moments when two live workers both ran one task
as active.

A worker's task is active from its ``TaskCreated`` (role active) or its ``TaskRecycled`` to
active until its ``TaskClosed``, its ``TaskRecycled`` away from active, or the worker's end: a
``killed`` line (the drill's kill -9) or a ``restarted`` / ``stopped`` line. Times are the
events' ``at_ms`` (one machine's wall clock: all workers run on it)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["DualActive", "active_intervals", "dual_active"]

_END_KINDS = ("killed", "restarted", "stopped")
_OPEN = 1 << 62


@dataclass(frozen=True, slots=True, kw_only=True)
class DualActive:
    task: str
    workers: tuple[str, str]
    overlap_ms: int


def _at(line: Mapping[str, Any]) -> int:
    return int(line.get("at_ms") or line.get("wall_ms") or 0)


def active_intervals(lines: Iterable[Mapping[str, Any]]) -> list[tuple[str, str, int, int]]:
    """(task, worker, from ms, to ms) of every active spell, in the lines' order."""
    open_: dict[tuple[str, str], int] = {}
    out: list[tuple[str, str, int, int]] = []

    def close(task: str, worker: str, at: int) -> None:
        start = open_.pop((task, worker), None)
        if start is not None:
            out.append((task, worker, start, at))

    for line in lines:
        worker, kind, event = line.get("worker"), line.get("kind"), line.get("event")
        if worker is None:
            continue
        at = _at(line)
        if kind in _END_KINDS:
            for task, w in [k for k in open_ if k[1] == worker]:
                close(task, w, at)
            continue
        if kind != "event":
            continue
        task = str(line.get("task"))
        if (event == "TaskCreated" and line.get("role") == "active") or (
            event == "TaskRecycled" and line.get("to_role") == "active"
        ):
            open_.setdefault((task, worker), at)
        elif event == "TaskClosed" or (event == "TaskRecycled" and line.get("to_role") != "active"):
            close(task, worker, at)
    for (task, worker), start in open_.items():  # still active when the lines end
        out.append((task, worker, start, _OPEN))
    return out


def dual_active(lines: Iterable[Mapping[str, Any]]) -> list[DualActive]:
    """Every pair of active spells of one task on two workers that overlap in time."""
    spells = active_intervals(lines)
    found: list[DualActive] = []
    for i, (task, w1, a1, b1) in enumerate(spells):
        for task2, w2, a2, b2 in spells[i + 1 :]:
            if task2 == task and w2 != w1 and min(b1, b2) > max(a1, a2):
                found.append(DualActive(task=task, workers=(w1, w2), overlap_ms=min(b1, b2) - max(a1, a2)))
    return found
