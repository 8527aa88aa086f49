"""Finding assignors by name: the built-ins, then plug-ins from entry points.

Task assignors are looked up in the entry-point group ``streamtasks.assignors``, partition
assignors in ``streamtasks.partition_assignors``. An entry point names a class (or any
zero-argument factory) that returns an object of the matching protocol.
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points
from typing import Any

from assignors.partition.types import PartitionAssignor
from assignors.types import TaskAssignor
from streamtasks.errors import UnknownAssignorError

__all__ = [
    "PARTITION_ENTRY_POINT_GROUP",
    "TASK_ENTRY_POINT_GROUP",
    "available",
    "available_partition_assignors",
    "get",
    "get_partition_assignor",
]

TASK_ENTRY_POINT_GROUP = "streamtasks.assignors"
PARTITION_ENTRY_POINT_GROUP = "streamtasks.partition_assignors"

_BUILTIN_TASK: dict[str, str] = {
    "high_availability": "assignors.task.high_availability:HighAvailabilityTaskAssignor",
    "sticky": "assignors.task.sticky:StickyTaskAssignor",
    "fallback_prior": "assignors.task.fallback_prior:FallbackPriorTaskAssignor",
}

_BUILTIN_PARTITION: dict[str, str] = {
    "range": "assignors.partition.range:RangeAssignor",
    "round_robin": "assignors.partition.round_robin:RoundRobinAssignor",
    "sticky": "assignors.partition.sticky:StickyAssignor",
    "cooperative_sticky": "assignors.partition.sticky:CooperativeStickyAssignor",
    "uniform": "assignors.partition.uniform:UniformAssignor",
}


def _load(target: str) -> Any:
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


def _plugins(group: str) -> dict[str, str]:
    return {ep.name: ep.value for ep in entry_points(group=group)}


def available() -> list[str]:
    """Names of every task assignor: built-ins and installed plug-ins, sorted."""
    return sorted({*_BUILTIN_TASK, *_plugins(TASK_ENTRY_POINT_GROUP)})


def available_partition_assignors() -> list[str]:
    return sorted({*_BUILTIN_PARTITION, *_plugins(PARTITION_ENTRY_POINT_GROUP)})


def _resolve(name: str, builtins: dict[str, str], group: str, kind: str) -> Any:
    plugins = _plugins(group)
    target = builtins.get(name) or plugins.get(name)
    if target is None:
        known = ", ".join(sorted({*builtins, *plugins}))
        raise UnknownAssignorError(
            f"no {kind} assignor named {name!r}; available: {known} "
            f"(plug-ins register under the entry-point group {group!r})"
        )
    try:
        return _load(target)()
    except (ImportError, AttributeError) as exc:
        raise UnknownAssignorError(f"{kind} assignor {name!r} ({target}) failed to load: {exc}") from exc


def get(name: str) -> TaskAssignor:
    """A fresh instance of the task assignor registered as ``name``."""
    assignor = _resolve(name, _BUILTIN_TASK, TASK_ENTRY_POINT_GROUP, "task")
    if not isinstance(assignor, TaskAssignor):
        raise UnknownAssignorError(f"{name!r} does not implement TaskAssignor (needs name, assign)")
    return assignor


def get_partition_assignor(name: str) -> PartitionAssignor:
    """A fresh instance of the partition assignor registered as ``name``."""
    assignor = _resolve(name, _BUILTIN_PARTITION, PARTITION_ENTRY_POINT_GROUP, "partition")
    if not isinstance(assignor, PartitionAssignor):
        raise UnknownAssignorError(
            f"{name!r} does not implement PartitionAssignor (needs name, version, "
            "supported_protocols, assign)"
        )
    return assignor
