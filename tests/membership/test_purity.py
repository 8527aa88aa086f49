"""The membership layer is sans-IO: no module imports asyncio, socket, time, random, threading
or a Kafka client (the import-linter contract of the pure layers, checked here too)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import streamtasks.membership

FORBIDDEN = {
    "asyncio",
    "socket",
    "time",
    "random",
    "threading",
    "subprocess",
    "kafka",
    "aiokafka",
    "confluent_kafka",
    "streamtasks.runtime",
    "streamtasks.sim",
}
ROOT = Path(streamtasks.membership.__file__).resolve().parent
MODULES = sorted(ROOT.rglob("*.py"))


def imported(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_module_imports_nothing_impure(path: Path) -> None:
    bad = {n for n in imported(path) if any(n == f or n.startswith(f + ".") for f in FORBIDDEN)}
    assert not bad


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_module_declares_all(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    assert any(
        isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in n.targets)
        for n in tree.body
    )
