"""The drill catalog, the verdict, the command's `list`, and a small rendered report."""

from __future__ import annotations

import argparse
import io
import json
from pathlib import Path

import pytest

from streamtasks.cli import build_parser
from streamtasks.drills import catalog
from streamtasks.drills.catalog import DRILLS, DrillSpec, get_drill
from streamtasks.drills.command import print_verdict, run_drill_command
from streamtasks.drills.drill_report import verdict_rows, write_report
from streamtasks.drills.rolling import (
    DrillOptions,
    DrillResult,
    PhaseResult,
    _longest_gaps,
    _Run,
    version_problem,
)
from streamtasks.errors import ConfigError


def small_result(**changes: object) -> DrillResult:
    result = DrillResult(
        drill="eager-to-cooperative",
        broker="127.0.0.1:9092",
        workers=2,
        partitions=3,
        rate=100,
        phases=[
            PhaseResult(name="start 2 workers: eager (range)", seconds=4.0, rebalances=2, revoked=1),
            PhaseResult(
                name="bounce 1: cooperative", seconds=9.5, rebalances=4, revoked=3, longest_unowned_ms=800
            ),
        ],
        acknowledged=1_300,
        duplicates=12,
        rebalances=6,
        revoked=4,
        ownership=[
            (0, "w1", 0.5, 6.0),
            (0, "w2", 6.8, None),
            (1, "w2", 0.6, None),
            (2, "w1", 0.5, 3.0),
            (2, "w2", 3.0, 7.0),
            (2, "w1", 7.4, None),
        ],
        samples=[(i * 0.5, i * 50, max(0, i * 50 - 30)) for i in range(27)],
        markers=[
            (0.0, "start"),
            (1.1, "generation 1"),
            (4.0, "bounce 1: cooperative"),
            (6.5, "generation 2"),
        ],
    )
    for key, value in changes.items():
        setattr(result, key, value)
    result.longest_unowned_ms = _longest_gaps(result.ownership, result.partitions)
    return result


def test_every_drill_has_stages_or_says_why_not() -> None:
    names = [d.name for d in DRILLS]
    assert names[:2] == ["eager-to-cooperative", "userdata-upgrade"]
    for drill in DRILLS:
        assert drill.available == (len(drill.stages) >= 2 or drill.fault)
        assert drill.available or drill.unavailable
    migration = get_drill("classic-to-consumer")
    assert migration.available
    # classic -> KIP-848 -> classic: the upgrade and the downgrade, one rolling bounce each
    assert ["--group-protocol" in s.args for s in migration.stages] == [False, True, False]
    with pytest.raises(ConfigError, match="no drill named"):
        get_drill("nope")


def test_userdata_probing_starts_on_an_emulated_older_release_and_bounces_once() -> None:
    spec = get_drill("userdata-probing")
    assert spec.available
    assert spec.worker == "app"
    # The old workers emulate 0.3 whole (not upgrade_from: that is new code); one bounce to 0.4.
    assert [s.args for s in spec.stages] == [("--emulate-release", "0.3"), ()]


def test_longest_gap_per_partition_counts_from_the_first_owner() -> None:
    result = small_result()
    assert result.longest_unowned_ms == {0: 800, 1: 0, 2: 400}


def test_verdict_passes_and_fails_on_the_right_fields() -> None:
    assert small_result().ok
    assert not small_result(lost=1).ok
    assert not small_result(double_owned=1).ok
    assert not small_result(state_checked=True, state_counts_short=2).ok
    rows = {a: (b, c) for a, b, c in verdict_rows(small_result(lost=3))}
    assert rows["lost records (never processed)"] == ("3", "FAIL")
    assert rows["duplicates (processed twice or more)"] == ("12", "-")
    # A peer library's loss (its worker committed past the records) is reported, not ours to fail.
    peer = small_result(peer_lost=3, peer_lost_runs=["2:[177..179]"])
    assert peer.ok
    rows = {a: (b, c) for a, b, c in verdict_rows(peer)}
    assert rows["lost by a peer library (its worker committed past them)"] == ("3", "-")


def test_report_files(tmp_path: Path) -> None:
    page = write_report(small_result(violation_marks=[(2, 3.0)], double_owned=1), tmp_path)
    doc = json.loads((tmp_path / "report.json").read_text())
    assert doc["ok"] is False
    assert doc["double_owned"] == 1
    assert doc["longest_unowned_ms"] == {"0": 800, "1": 0, "2": 400}
    for png in ("ownership.png", "throughput.png"):
        data = (tmp_path / png).read_bytes()
        assert data.startswith(b"\x89PNG\r\n\x1a\n")
        assert len(data) > 5_000
    text = page.read_text()
    assert text.count("data:image/png;base64,") == 2
    assert "FAIL" in text
    assert "bounce 1: cooperative" in text


def test_print_verdict_lists_measures_and_phases() -> None:
    out = io.StringIO()
    print_verdict(small_result(), out)
    text = out.getvalue()
    assert "eager-to-cooperative: PASS" in text
    assert "bounce 1: cooperative" in text


def test_drill_list_and_unavailable_run(monkeypatch: pytest.MonkeyPatch) -> None:
    out = io.StringIO()
    assert run_drill_command(argparse.Namespace(drill_command="list", json=True), out) == 0
    listed = json.loads(out.getvalue())
    assert {d["name"] for d in listed} == {d.name for d in DRILLS}
    # Every listed drill runs today; one that cannot is refused with its reason.
    later = DrillSpec(name="later", summary="not yet", available=False, unavailable="needs more work")
    monkeypatch.setitem(catalog._BY_NAME, "later", later)
    args = build_parser().parse_args(["drill", "run", "later"])
    with pytest.raises(ConfigError, match="not available"):
        run_drill_command(args, io.StringIO())


def test_a_worker_left_on_an_old_userdata_version_is_a_problem() -> None:
    spec = get_drill("userdata-probing")
    assert spec.final_userdata_version == 3
    run = _Run(spec, DrillOptions(workers=2, partitions=4), "127.0.0.1:1", print)
    run.on_line("w1", {"kind": "progress", "userdata_version": 3})
    run.on_line("w1", {"kind": "event", "event": "SubscriptionVersionChanged", "to_version": 2})
    run.on_line("w2", {"kind": "progress", "userdata_version": 3})
    assert run.userdata_version == {"w1": 2, "w2": 3}
    ended = {"w1": run.userdata_version.get("w1"), "w2": 3, "w3": None}
    assert version_problem(3, ended) == "workers not on userdata v3 at the end: {'w1': 2, 'w3': None}"
    assert version_problem(3, {"w1": 3, "w2": 3}) is None
    assert version_problem(None, ended) is None  # drills that do not check versions
