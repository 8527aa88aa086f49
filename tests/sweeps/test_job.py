"""The Spark job on local[2]: rows, determinism whatever the chunking, resume, the CLI, and a
grid swapped under an existing --out refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from streamtasks.cli import main
from streamtasks.errors import ConfigError
from streamtasks.sweeps.grid import chunks, load_grid, with_chunk_size
from streamtasks.sweeps.job import (
    CHUNKS_PER_TASK,
    chunk_path,
    default_chunks_per_task,
    read_rows,
    run_chunk,
    run_sweep,
)
from tests.sweeps.conftest import requires_spark

pytestmark = [requires_spark, pytest.mark.spark]

GRID = """
protocols: [cooperative, consumer]
members: [2, 3]
partitions: [6]
drills: [rolling_bounce]
seeds: {start: 4, count: 3}
chunk_size: 2
"""


@pytest.fixture
def grid_file(tmp_path: Path) -> Path:
    path = tmp_path / "small.yaml"
    path.write_text(GRID)
    return path


def test_rows_same_whatever_the_chunking_and_resume(
    grid_file: Path, tmp_path: Path, local_spark: Any
) -> None:
    grid = load_grid(str(grid_file))
    lines: list[str] = []
    first = tmp_path / "a"
    stats = run_sweep(grid, first, session=local_spark, log=lines.append)
    assert stats.scenarios_run == 4 * 3
    assert stats.chunks == 8
    rows = read_rows(first)
    assert len(rows) == 12
    assert sum(1 for line in lines if line.startswith("[")) == 8  # one line per finished chunk
    assert {(r["protocol"], r["members"], r["seed"]) for r in rows} == {
        (p, m, s) for p in ("cooperative", "consumer") for m in (2, 3) for s in (4, 5, 6)
    }
    assert all(r["violations"] == 0 for r in rows)

    # other chunking (one seed per chunk, three chunks per Spark task): the same rows
    other = tmp_path / "b"
    lines_b: list[str] = []
    run_sweep(with_chunk_size(grid, 1), other, session=local_spark, log=lines_b.append, chunks_per_task=3)
    assert read_rows(other) == rows
    assert sum(1 for line in lines_b if line.startswith("[")) == 12  # still one line per chunk

    # and the same rows as the single-process loop
    loop = [
        row for chunk in chunks(grid) for row in run_chunk((chunk.point.key, chunk.first_seed, chunk.seeds))
    ]
    key = lambda r: (r["protocol"], r["members"], r["seed"])  # noqa: E731
    assert sorted(loop, key=key) == sorted(({k: r[k] for k in loop[0]} for r in rows), key=key)

    # resume: only the deleted chunk runs again
    victim = chunks(grid)[3]
    chunk_path(first, victim).unlink()
    lines.clear()
    again = run_sweep(grid, first, session=local_spark, log=lines.append)
    assert (again.skipped, again.scenarios_run) == (7, victim.seeds)
    assert [line for line in lines if line.startswith("[")]
    assert victim.chunk_id in lines[-2]
    assert read_rows(first) == rows

    # nothing left: no Spark job at all
    assert run_sweep(grid, first, session=local_spark, log=lambda _: None).scenarios_run == 0

    with pytest.raises(ConfigError, match="holds another sweep"):
        run_sweep(with_chunk_size(grid, 3), first, session=local_spark, log=lambda _: None)


def test_cli_writes_rows_report_and_summary(
    grid_file: Path, tmp_path: Path, local_spark: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "cli"
    # the fixture's session is the process's SparkContext: the command reuses it (getOrCreate)
    assert main(["sweep", str(grid_file), "--out", str(out), "--master", "local[2]"]) == 0
    printed = capsys.readouterr()
    assert "12 scenarios, 0 with violations" in printed.out
    assert "[8/8]" in printed.err
    assert (out / "report.html").stat().st_size > 10_000
    assert (out / "summary.json").exists()
    assert len(list((out / "rows").rglob("*.parquet"))) == 8


def test_default_chunks_per_task_keeps_every_core_busy() -> None:
    # three chunks a task once every core still gets two such tasks; one each below that
    assert default_chunks_per_task(48, 2) == CHUNKS_PER_TASK == 3
    assert default_chunks_per_task(12, 2) == 3
    assert default_chunks_per_task(11, 2) == 1
    assert default_chunks_per_task(1, 8) == 1
