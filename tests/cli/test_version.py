"""``streamtasks --version`` and the one place the version is written."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

import streamtasks
from streamtasks._version import __version__
from streamtasks.cli import main

ROOT = Path(__file__).parents[2]


def test_version_flag_prints_the_release(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out == f"streamtasks {__version__}\n"


def test_the_version_is_written_once() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "version" not in project["project"]
    assert "version" in project["project"]["dynamic"]
    attr = project["tool"]["setuptools"]["dynamic"]["version"]["attr"]
    assert attr == "streamtasks._version.__version__"
    assert streamtasks.__version__ is __version__
    assert project["project"]["name"] == "streamtasks-kafka"
