"""The report: summary.json's percentiles and failures, report.html with its PNGs embedded."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

from streamtasks.sweeps.grid import Point
from streamtasks.sweeps.metrics import run_point
from streamtasks.sweeps.sweep_report import percentile, write_report


def test_percentile_is_nearest_rank() -> None:
    assert percentile([5, 1, 3, 2, 4], 50) == 3
    assert percentile(list(range(1, 101)), 99) == 99
    assert percentile([7], 99) == 7


def test_report_embeds_plots_and_lists_violations(tmp_path: Path) -> None:
    rows = []
    for protocol, assignor in (("eager", "range"), ("consumer", "uniform")):
        for members in (2, 4):
            point = Point(
                protocol=protocol,
                assignor=assignor,
                members=members,
                partitions=8,
                standbys=0,
                faults="none",
                drill="rolling_bounce",
            )
            rows += [run_point(point, seed) for seed in (0, 1)]
    # one row marked as violating, as a failing scenario's row reads (the report's input)
    rows[1] = {
        **rows[1],
        "violations": 1,
        "violation": "exclusive-ownership at 1 ms: t0-0 held twice",
        "replay": "python -m streamtasks.sweeps replay protocol=eager/... --seed 1",
    }
    summary = write_report(tmp_path, rows)
    on_disk = json.loads((tmp_path / "summary.json").read_text())
    assert on_disk == json.loads(json.dumps(summary))
    assert summary["scenarios"] == 8
    assert summary["scenarios_with_violations"] == 1
    assert summary["failures"][0]["replay"].startswith("python -m streamtasks.sweeps replay")
    point = summary["points"][0]
    assert point["scenarios"] == 2
    assert set(point["moved_per_change"]) == {"p50", "p99", "mean"}
    page = (tmp_path / "report.html").read_text()
    assert "exclusive-ownership at 1 ms" in page
    assert "--seed 1" in page
    pngs = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    assert len(pngs) == 2  # one drill's cost figure, the unavailability figure
    for png in pngs:
        assert base64.b64decode(png).startswith(b"\x89PNG\r\n\x1a\n")
    assert "http" not in page.split("<body>")[0]  # nothing loaded from elsewhere
