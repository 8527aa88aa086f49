"""The job on a real cluster manager: a Spark standalone master and one worker on loopback
(pyspark's own spark-class), a small sweep against spark://127.0.0.1:PORT, the same rows as
the single-process loop gives."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamtasks.sweeps.grid import chunks, load_grid
from streamtasks.sweeps.job import read_rows, run_chunk, run_sweep, spark_session
from tests.sweeps.conftest import requires_spark

pytestmark = [requires_spark, pytest.mark.spark]

GRID = """
protocols: [eager, consumer-client]
members: [3]
partitions: [6]
standbys: [0, 1]
drills: [rolling_bounce, crash]
seeds: {start: 0, count: 1}
chunk_size: 1
"""


def test_sweep_on_a_standalone_cluster_matches_the_local_rows(
    tmp_path: Path, standalone_cluster: str
) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text(GRID)
    grid = load_grid(str(path))
    session = spark_session(standalone_cluster, "streamtasks-sweep-cluster-test")
    try:
        assert session.sparkContext.master == standalone_cluster
        lines: list[str] = []
        stats = run_sweep(grid, tmp_path / "out", session=session, log=lines.append)
        # the executors ran in the worker's JVM, not in local mode
        executors = session.sparkContext._jsc.sc().getExecutorMemoryStatus().size()
    finally:
        session.stop()
    assert executors >= 2  # the driver and the worker's executor
    assert stats.scenarios_run == len(chunks(grid))
    rows = read_rows(tmp_path / "out")
    local = [r for c in chunks(grid) for r in run_chunk((c.point.key, c.first_seed, c.seeds))]
    key = lambda r: (r["protocol"], r["standbys"], r["drill"], r["seed"])  # noqa: E731
    assert sorted(({k: r[k] for k in local[0]} for r in rows), key=key) == sorted(local, key=key)
