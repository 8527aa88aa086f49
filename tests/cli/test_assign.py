from __future__ import annotations

import json
from pathlib import Path

import pytest

from streamtasks.cli import main

SAMPLE = str(Path(__file__).parents[2] / "examples" / "scenarios" / "sample.yaml")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_assign_prints_a_table_per_process_and_followup(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "assign", SAMPLE)
    assert code == 0
    for name in ("alpha", "bravo", "charlie", "delta"):
        assert name in out
    assert "follow-up rebalance: due" in out  # delta has no state: warm-ups, then a probing rebalance
    assert "validation: NONE" in out


def test_assign_json_is_complete_and_valid(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "assign", SAMPLE, "--json")
    assert code == 0
    doc = json.loads(out)
    assert doc["valid"] is True
    actives = [t for p in doc["processes"] for t in p["active"]]
    assert sorted(actives) == sorted(f"{s}_{p}" for s in (0, 1) for p in range(6))
    delta = next(p for p in doc["processes"] if p["name"] == "delta")
    assert delta["warmup"], "the stateless newcomer should warm up stateful tasks"
    assert doc["followup_rebalance"]["due"] is True
    assert doc["followup_rebalance"]["in_ms"] == 600000
    for proc in doc["processes"]:
        assert not set(proc["active"]) & set(proc["standby"])


@pytest.mark.parametrize("assignor", ["sticky", "fallback_prior", "high_availability"])
def test_every_builtin_task_assignor_runs_on_the_sample(
    capsys: pytest.CaptureFixture[str], assignor: str
) -> None:
    code, out, _ = run(capsys, "assign", SAMPLE, "--assignor", assignor, "--json")
    assert code == 0
    assert json.loads(out)["assignor"] == assignor


def test_unknown_assignor_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "assign", SAMPLE, "--assignor", "nope")
    assert code == 2
    assert "no task assignor named 'nope'" in err
    assert "high_availability" in err


def test_bad_scenario_is_a_clear_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("application_id: app\n")
    code, _, err = run(capsys, "assign", str(path))
    assert code == 2
    assert "partitions" in err


def test_assignors_lists_builtins(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "assignors", "--json")
    assert code == 0
    listing = json.loads(out)
    assert {"high_availability", "sticky", "fallback_prior"} <= set(listing["task"])
    assert {"range", "round_robin", "sticky", "cooperative_sticky", "uniform"} <= set(listing["partition"])
