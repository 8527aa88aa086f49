"""A member's task-set reconciliation: from the tasks it runs to the tasks it is assigned.

:func:`plan_tasks` compares what a member runs now (task → :class:`TaskKind`) with its new
assignment (actives, and standbys — warm-ups are standbys here) and says what to create,
close, keep, and what to *recycle*: a task that switches between active and standby keeps its
local state and is converted in place, never closed and created again.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from streamtasks.errors import LocalProtocolError
from topology.ids import TaskId

__all__ = ["TaskKind", "TaskPlan", "plan_tasks"]


class TaskKind(enum.Enum):
    """How a member runs a task. Warm-ups run as standbys (the assignment flags them)."""

    ACTIVE = "active"
    STANDBY = "standby"


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskPlan:
    """What to do with every task, each tuple sorted; a task appears in exactly one of them."""

    create_active: tuple[TaskId, ...] = ()
    create_standby: tuple[TaskId, ...] = ()
    close: tuple[TaskId, ...] = ()
    recycle_to_standby: tuple[TaskId, ...] = ()
    recycle_to_active: tuple[TaskId, ...] = ()
    #: Tasks that stay as they are (either kind).
    keep: tuple[TaskId, ...] = ()

    @property
    def changes_nothing(self) -> bool:
        """True when every task is kept as it is."""
        return not (
            self.create_active
            or self.create_standby
            or self.close
            or self.recycle_to_standby
            or self.recycle_to_active
        )


def plan_tasks(
    current: Mapping[TaskId, TaskKind], *, active: Iterable[TaskId], standby: Iterable[TaskId]
) -> TaskPlan:
    """The plan that turns ``current`` into ``active`` + ``standby``.

    Raises :class:`~streamtasks.errors.LocalProtocolError` when a task is both in ``active``
    and in ``standby`` (a decoded assignment never has that).
    """
    actives, standbys = frozenset(active), frozenset(standby)
    both = actives & standbys
    if both:
        raise LocalProtocolError(f"tasks {sorted(map(str, both))} are assigned both as active and as standby")
    out: dict[str, list[TaskId]] = {name: [] for name in _FIELDS}
    for task in actives:
        was = current.get(task)
        out[_ACTIVE_STEP[was]].append(task)
    for task in standbys:
        was = current.get(task)
        out[_STANDBY_STEP[was]].append(task)
    out["close"] = [task for task in current if task not in actives and task not in standbys]
    return TaskPlan(**{name: tuple(sorted(tasks)) for name, tasks in out.items()})


_FIELDS = ("create_active", "create_standby", "close", "recycle_to_standby", "recycle_to_active", "keep")
#: What a task that is now of kind ``key`` (None: not running) needs to become active / standby.
_ACTIVE_STEP = {None: "create_active", TaskKind.ACTIVE: "keep", TaskKind.STANDBY: "recycle_to_active"}
_STANDBY_STEP = {None: "create_standby", TaskKind.STANDBY: "keep", TaskKind.ACTIVE: "recycle_to_standby"}
