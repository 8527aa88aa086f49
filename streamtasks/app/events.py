"""Events an :class:`~streamtasks.App` reports about its tasks, for dashboards, drills and tests.

Pass ``on_event=callback`` to the app; the callback runs synchronously on the event loop and
must not block. Every event carries the wall-clock time it happened (``at_ms``).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

from topology.ids import TaskId

__all__ = [
    "AppEvent",
    "OffsetsCommitted",
    "ProcessingStarted",
    "RebalanceTriggered",
    "RestoreCompleted",
    "SubscriptionVersionChanged",
    "TaskClosed",
    "TaskCreated",
    "TaskRecycled",
    "TasksRevived",
    "event_to_json",
    "wall_ms",
]


def wall_ms() -> int:
    """The wall clock in ms: event times, restore starts, and the assignor's follow-up deadlines
    (compared across processes, so not a monotonic clock)."""
    return time.time_ns() // 1_000_000


@dataclass(frozen=True, slots=True, kw_only=True)
class AppEvent:
    at_ms: int


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskCreated(AppEvent):
    """``role`` is ``active``, ``standby`` or ``warmup``; ``offset_sum`` the changelog offsets
    the local state already held when it opened (0 for a task with no local state)."""

    task: TaskId
    role: str
    offset_sum: int


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskRecycled(AppEvent):
    """A task changed role without closing its stores (``standby``/``warmup`` ↔ ``active``)."""

    task: TaskId
    from_role: str
    to_role: str


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskClosed(AppEvent):
    task: TaskId
    role: str
    clean: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class RestoreCompleted(AppEvent):
    """An active task finished restoring and starts processing: ``records`` changelog records
    were applied in ``duration_ms``."""

    task: TaskId
    records: int
    duration_ms: int


@dataclass(frozen=True, slots=True, kw_only=True)
class RebalanceTriggered(AppEvent):
    """This process asked for a rebalance (KIP-568) because of a task's lag: ``trigger`` is
    ``caught_up`` (a warm-up reached acceptable.recovery.lag), ``lag_growing`` (a standby keeps
    falling behind) or ``probing`` (the follow-up deadline the leader set)."""

    task: TaskId | None
    lag: int | None
    trigger: str
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class SubscriptionVersionChanged(AppEvent):
    """Version probing moved the userdata version this process subscribes with, and it asked
    for a rebalance to send it: ``from_version`` is the version of the subscription the
    assignment answered, ``to_version`` the next one; the assignment came at
    ``assignment_version`` with ``group_version`` as the group's commonly supported version (a
    downgrade: an older member or leader is in the group; an upgrade: the old ones are gone).
    ``rebalance_requested``: False when a rebalance was already under way (the next assignment
    asks again if that one still carried the old version)."""

    from_version: int
    to_version: int
    assignment_version: int
    group_version: int
    rebalance_requested: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetsCommitted(AppEvent):
    """Input offsets this process committed: ``offsets`` are (topic, partition, next offset to
    read). ``confirmed``: the broker accepted them (an interval or closing commit); False: they
    were handed to the group member for the commit it sends before a revocation, whose answer
    the member handles (a rejected one leaves the previous commit in place)."""

    offsets: tuple[tuple[str, int, int], ...]
    confirmed: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class ProcessingStarted(AppEvent):
    """The first input record this process processed from ``topic``/``partition`` since the
    partition's task became active here: ``offset`` is where processing began (the committed
    offset, unless the consumer skipped ahead: what a per-offset audit looks at first)."""

    task: TaskId
    topic: str
    partition: int
    offset: int


@dataclass(frozen=True, slots=True, kw_only=True)
class TasksRevived(AppEvent):
    """The active ``tasks`` were closed dirty and created again in place (their stores restored
    from the changelog, their partitions processed again from the committed offsets) after
    ``error``: an aborted transaction or a changelog / output record not delivered for a
    retriable reason. ``migrated``: this process was fenced; its producer was replaced and the
    member rejoins the group."""

    tasks: tuple[str, ...]
    migrated: bool
    error: str


def event_to_json(event: AppEvent) -> dict[str, Any]:
    """A JSON-ready dict: ``{"event": "TaskCreated", "task": "0_3", ...}``."""
    out: dict[str, Any] = {"event": type(event).__name__}
    for key, value in asdict(event).items():
        out[key] = str(getattr(event, key)) if isinstance(getattr(event, key), TaskId) else value
    return out
