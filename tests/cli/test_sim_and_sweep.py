"""``streamtasks sim`` is ``python -m streamtasks.sim``; ``streamtasks sweep replay`` replays
one scenario of a sweep, the command a sweep prints beside a violation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streamtasks.cli import main
from streamtasks.sim.__main__ import main as sim_main
from streamtasks.sweeps.command import replay_main
from streamtasks.sweeps.grid import parse_point
from streamtasks.sweeps.metrics import replay_command

SIM = ["--protocol", "eager", "--seeds", "2", "--no-shrink", "--json"]
POINT = "protocol=eager/assignor=range/members=2/partitions=4/standbys=0/faults=none/drill=rolling_bounce"


def test_streamtasks_sim_prints_what_python_m_streamtasks_sim_prints(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert sim_main(SIM) == 0
    alone = capsys.readouterr().out
    assert main(["sim", *SIM]) == 0
    assert capsys.readouterr().out == alone
    assert json.loads(alone)["runs"][0]["scenarios"] == 2


def test_streamtasks_sim_rejects_bad_flags_as_before(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sim", "--seeds", "3", "--jobs", "2"]) == 2
    assert "--jobs applies to --soak only" in capsys.readouterr().err


def test_sweep_replay_runs_one_scenario(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sweep", "replay", POINT, "--seed", "1"]) == 0
    out = capsys.readouterr().out
    row = json.loads(out[out.index("{") :])
    assert (row["seed"], row["violations"]) == (1, 0)
    assert replay_main([POINT, "--seed", "1"]) == 0
    assert capsys.readouterr().out == out


@pytest.mark.parametrize(
    ("argv", "problem"),
    [
        (["sweep", "replay", POINT], "sweep replay needs POINT and --seed N"),
        (["sweep", "replay", "--seed", "1"], "sweep replay needs POINT and --seed N"),
        (["sweep", "replay", POINT, "--seed", "1", "--out", "x"], "--out does not apply to sweep replay"),
        (["sweep", "protocols"], "a sweep needs --out DIR"),
        (["sweep", "protocols", "--out", "x", "--seed", "3"], "--seed does not apply to a sweep"),
        (["sweep", "protocols", POINT, "--out", "x"], "POINT does not apply to a sweep"),
    ],
)
def test_sweep_flags_of_the_other_form_are_errors(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
    problem: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    assert problem in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_a_violation_prints_the_streamtasks_sweep_replay_command() -> None:
    assert replay_command(parse_point(POINT), 7) == f"streamtasks sweep replay {POINT} --seed 7"
