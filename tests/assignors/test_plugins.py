"""The plug-in path end to end: build and install examples/custom_assignor into a scratch
directory, then load it by name through the ``streamtasks.assignors`` entry point in a fresh
interpreter that sees that directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import assignors
from streamtasks.errors import UnknownAssignorError

ROOT = Path(__file__).parents[2]
PLUGIN = ROOT / "examples" / "custom_assignor"
SAMPLE = ROOT / "streamtasks" / "scenarios" / "sample.yaml"


@pytest.fixture(scope="module")
def plugin_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("plugin-site")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--target",
            str(target),
            str(PLUGIN),
        ],
        check=True,
        capture_output=True,
        cwd=target,
    )
    return target


def run_with(site: Path, code: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), str(ROOT)]))
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False, cwd=ROOT
    )


def test_installed_plugin_is_found_by_name(plugin_site: Path) -> None:
    proc = run_with(
        plugin_site,
        "import assignors; a = assignors.get('round_robin_tasks'); "
        "print(type(a).__module__, a.name, 'round_robin_tasks' in assignors.available())",
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["streamtasks_example_assignor", "round_robin_tasks", "True"]


def test_installed_plugin_runs_from_the_command_line(plugin_site: Path) -> None:
    proc = run_with(
        plugin_site,
        "import sys; from streamtasks.cli import main; "
        f"sys.exit(main(['assign', {str(SAMPLE)!r}, '--assignor', 'round_robin_tasks', '--json']))",
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["assignor"] == "round_robin_tasks"
    assert doc["valid"] is True
    assert sum(len(p["active"]) for p in doc["processes"]) == 12


def test_plugin_is_not_visible_without_install() -> None:
    with pytest.raises(UnknownAssignorError, match="round_robin_tasks"):
        assignors.get("round_robin_tasks")
