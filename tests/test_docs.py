"""What a user reads (README.md, docs/*.md but the measurement record docs/measurements.md)
says what is true now: no commit hashes, no issue numbers, no load averages. Where a figure
came from is a machine and a command; its history lives in docs/measurements.md."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
READ = [ROOT / "README.md", *sorted(p for p in (ROOT / "docs").glob("*.md") if p.name != "measurements.md")]

HEX = re.compile(r"(?<![0-9A-Za-z_.#/-])[0-9a-f]{7,40}(?![0-9A-Za-z_])")
ISSUE = re.compile(r"\bissues?\s*#?\d+|\(#\d+\)", re.IGNORECASE)
LOAD = re.compile(r"\bload\s+(average|avg)|\bat\s+load\s+\d|\(load\s+[≈~]?\s*\d", re.IGNORECASE)


def _commits(candidates: set[str]) -> set[str]:
    """The candidates git knows as commits (all of them when this is no git checkout)."""
    if not candidates:
        return set()
    ordered = sorted(candidates)
    try:
        proc = subprocess.run(
            ["git", "-C", str(ROOT), "cat-file", "--batch-check=%(objecttype)"],
            input="".join(f"{c}^{{commit}}\n" for c in ordered),
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return {c for c in ordered if re.search(r"\d", c) and re.search(r"[a-f]", c)}
    return {c for c, kind in zip(ordered, proc.stdout.splitlines(), strict=True) if kind == "commit"}


def _lines(path: Path, pattern: re.Pattern[str]) -> list[str]:
    text = path.read_text(encoding="utf-8")
    return [
        f"{path.name}:{n}: {m.group(0)}"
        for n, line in enumerate(text.splitlines(), 1)
        for m in pattern.finditer(line)
    ]


@pytest.mark.parametrize("path", READ, ids=[p.name for p in READ])
def test_no_commit_hashes(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    commits = _commits(set(HEX.findall(text)))
    assert sorted(line for line in _lines(path, HEX) if line.rsplit(" ", 1)[1] in commits) == []


@pytest.mark.parametrize("path", READ, ids=[p.name for p in READ])
def test_no_issue_numbers(path: Path) -> None:
    assert _lines(path, ISSUE) == []


@pytest.mark.parametrize("path", READ, ids=[p.name for p in READ])
def test_no_load_averages(path: Path) -> None:
    assert _lines(path, LOAD) == []


@pytest.mark.parametrize("path", READ, ids=[p.name for p in READ])
def test_the_simulator_is_run_as_streamtasks_sim(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert "python -m streamtasks.sim" not in text
    assert "python -m streamtasks.sweeps" not in text


def test_the_patterns_catch_what_they_are_for() -> None:
    assert ISSUE.search("the fix of issue 10")
    assert ISSUE.search("(issue 25, item 3)")
    assert ISSUE.search("Issue 24, item 5")
    assert not ISSUE.search("the issue tracker")
    assert LOAD.search("load average 2-5")
    assert LOAD.search("at load 3–17")
    assert LOAD.search("(load 6–8)")
    assert not LOAD.search("a load test")
    assert not LOAD.search("the payload 3 bytes")
    head = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short=7", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    if head:
        assert _commits({head, "0123abc"}) == {head}
