"""One error tree: every exception class the project defines descends from StreamTasksError."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from types import ModuleType

import assignors
import streamtasks
import topology
from streamtasks.errors import StreamTasksError


def _modules(package: ModuleType) -> list[ModuleType]:
    found = [package]
    for info in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
        if info.name.rsplit(".", 1)[-1] != "__main__":  # importing it would run a command
            found.append(importlib.import_module(info.name))
    return found


def test_every_exception_class_is_in_the_tree() -> None:
    outside = []
    for package in (streamtasks, assignors, topology):
        for module in _modules(package):
            for name, obj in vars(module).items():
                if (
                    inspect.isclass(obj)
                    and obj.__module__ == module.__name__
                    and issubclass(obj, BaseException)
                    and not issubclass(obj, StreamTasksError)
                ):
                    outside.append(f"{module.__name__}.{name}")
    assert outside == []


def test_invalid_assignment_is_a_protocol_error() -> None:
    from streamtasks.coordinator.target import InvalidAssignment
    from streamtasks.errors import RemoteProtocolError

    assert issubclass(InvalidAssignment, RemoteProtocolError)
