"""The Spark job: chunks of seeds run on the executors, rows written as Parquet by the driver.

Each pending chunk is one Spark task (the simulator runs in-process on an executor and returns
the chunk's rows); a job runs as many chunks as the executors have cores, two jobs in flight
from driver threads so the cores stay busy; the driver writes each finished chunk's rows to
``DIR/rows/protocol=…/assignor=…/…/seeds-A-B.parquet`` (Hive layout: the grid's dimensions are
the directories) through a temporary name and a rename, and prints one line. A chunk whose file
exists is not run again: a killed sweep resumes where it stopped. Rows depend on the point and
the seed only, so any chunk size, partitioning or master gives the same rows.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from streamtasks.errors import ConfigError
from streamtasks.sweeps.grid import DIMENSIONS, Chunk, Grid, chunks, parse_point
from streamtasks.sweeps.metrics import COLUMNS, run_point

__all__ = [
    "SweepStats",
    "chunk_path",
    "read_rows",
    "run_chunk",
    "run_chunks",
    "run_sweep",
    "spark_session",
]

#: Parquet types of the dimension columns (in the directory names).
DIMENSION_TYPES = {
    "protocol": "string",
    "assignor": "string",
    "members": "int64",
    "partitions": "int64",
    "standbys": "int64",
    "faults": "string",
    "drill": "string",
}
MANIFEST = "sweep.json"


@dataclass(frozen=True, slots=True, kw_only=True)
class SweepStats:
    chunks: int
    skipped: int
    scenarios_run: int
    spark_start_s: float
    run_s: float


def run_chunk(task: tuple[str, int, int]) -> list[dict[str, object]]:
    """One chunk: ``(point key, first seed, seeds)`` → rows (plain, picklable)."""
    key, first, count = task
    point = parse_point(key)
    return [run_point(point, seed) for seed in range(first, first + count)]


def run_chunks(tasks: Sequence[tuple[str, int, int]]) -> list[list[dict[str, object]]]:
    """An executor's work, one Spark task: several chunks → each chunk's rows."""
    return [run_chunk(task) for task in tasks]


def chunk_path(out: Path, chunk: Chunk) -> Path:
    return out / "rows" / chunk.point.key / f"{chunk.chunk_id}.parquet"


def _schema() -> Any:
    import pyarrow as pa

    return pa.schema([(name, pa.type_for_alias(kind)) for name, kind in COLUMNS])


def _write(path: Path, rows: Sequence[dict[str, object]]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = _schema()
    table = pa.Table.from_pylist([{name: row[name] for name in schema.names} for row in rows], schema=schema)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    pq.write_table(table, tmp)
    os.replace(tmp, path)


def read_rows(out: Path) -> list[dict[str, object]]:
    """Every row under ``DIR/rows``, dimensions included, sorted by dimensions and seed."""
    import pyarrow as pa
    import pyarrow.dataset as ds

    root = out / "rows"
    if not root.is_dir():
        return []
    partitioning = ds.partitioning(
        pa.schema([(d, pa.type_for_alias(DIMENSION_TYPES[d])) for d in DIMENSIONS]), flavor="hive"
    )
    dataset = ds.dataset(
        root,
        format="parquet",
        partitioning=partitioning,
        exclude_invalid_files=True,
        ignore_prefixes=[".", "_"],
    )
    rows: list[dict[str, object]] = dataset.to_table().to_pylist()
    return sorted(rows, key=lambda r: (*(str(r[d]).zfill(12) for d in DIMENSIONS), str(r["seed"]).zfill(12)))


def _check_manifest(out: Path, grid: Grid) -> None:
    """``--out`` holds this grid's sweep (resume) or nothing yet."""
    path = out / MANIFEST
    mine = {"grid": grid.model_dump(mode="json")}
    if path.exists():
        theirs = json.loads(path.read_text())
        if theirs != mine:
            raise ConfigError(
                f"--out {out} holds another sweep (grid {theirs.get('grid', {}).get('name')!r} with other "
                "dimensions, seeds or chunk size); resume only the same grid, or choose a new directory"
            )
        return
    out.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(mine, indent=2) + "\n")


def _local_host(master: str) -> bool:
    if master.startswith("local"):
        return True
    host = urlparse(master).hostname or ""
    return host in ("localhost", "127.0.0.1", "::1")


def spark_session(master: str | None, app_name: str) -> Any:
    """A SparkSession on ``master``. On this machine (``local[*]``, a loopback cluster) the
    executors run this interpreter; elsewhere ``PYSPARK_PYTHON`` / ``spark.pyspark.python``
    name theirs (docs/spark.md)."""
    from pyspark.sql import SparkSession

    if master is None and not os.environ.get("PYSPARK_GATEWAY_PORT"):
        master = "local[*]"  # under spark-submit (a gateway is up) its --master stands
    builder = SparkSession.builder
    if master is not None:
        builder = builder.master(master)
    builder = (
        builder.appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
    )
    if master is not None and _local_host(master):
        # executors on this machine run this interpreter (PySpark reads the variable when the
        # context starts), and Spark binds to loopback only
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        builder = builder.config("spark.driver.host", "127.0.0.1").config(
            "spark.driver.bindAddress", "127.0.0.1"
        )
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


def run_sweep(
    grid: Grid,
    out: Path,
    *,
    master: str | None = None,
    session: Any = None,
    log: Callable[[str], None] = print,
    chunks_per_task: int | None = None,
) -> SweepStats:
    """Run every chunk of ``grid`` not yet under ``out`` on ``master`` (``None``: ``local[*]``, or
    spark-submit's); ``session``: an existing SparkSession (its master wins over ``master``);
    ``chunks_per_task``: chunks one Spark task runs (``None``: :func:`default_chunks_per_task`)."""
    _check_manifest(out, grid)
    every = chunks(grid)
    pending = [c for c in every if not chunk_path(out, c).exists()]
    scenarios = sum(c.seeds for c in pending)
    log(
        f"sweep {grid.name!r}: {len(every)} chunks of up to {grid.chunk_size} seeds, "
        f"{len(every) - len(pending)} already in {out}, {len(pending)} to run ({scenarios} scenarios)"
    )
    if not pending:
        return SweepStats(
            chunks=len(every), skipped=len(every), scenarios_run=0, spark_start_s=0.0, run_s=0.0
        )
    started = time.monotonic()
    spark = session or spark_session(master, f"streamtasks-sweep-{grid.name}")
    spark_start_s = time.monotonic() - started
    sc = spark.sparkContext
    log(f"spark {spark.version} on {sc.master} ({sc.defaultParallelism} cores) in {spark_start_s:.1f} s")
    began = time.monotonic()
    try:
        _run_pending(sc, out, pending, log, chunks_per_task)
    finally:
        if session is None:
            spark.stop()
    run_s = time.monotonic() - began
    log(f"{scenarios} scenarios in {run_s:.1f} s ({scenarios / run_s:.1f}/s) on {sc.master}")
    return SweepStats(
        chunks=len(every),
        skipped=len(every) - len(pending),
        scenarios_run=scenarios,
        spark_start_s=spark_start_s,
        run_s=run_s,
    )


Result = tuple[list[list[Chunk]], list[list[list[dict[str, object]]]], float]

#: Chunks one Spark task runs when there are enough of them: fewer, longer tasks pay each
#: task's start (a Python worker, a closure) less often (docs/measurements.md, "Sweeps on
#: Spark": 1.49x with one chunk per task, 2.01x with three, against a single-process loop on
#: local[2]).
CHUNKS_PER_TASK = 3


def default_chunks_per_task(chunks: int, cores: int) -> int:
    """:data:`CHUNKS_PER_TASK` when every core still gets two tasks of them, else 1 (a small
    sweep keeps every core busy rather than saving task starts)."""
    return CHUNKS_PER_TASK if chunks >= 2 * cores * CHUNKS_PER_TASK else 1


def _run_pending(
    sc: Any, out: Path, pending: Iterable[Chunk], log: Callable[[str], None], per_task: int | None
) -> None:
    """Jobs of ``cores`` tasks of ``per_task`` chunks each, two jobs in flight (a job's start-up,
    ~0.1-0.5 s, is paid once per wave; the other job keeps the cores busy while a wave's last
    task finishes). Each chunk's file is written, and its line printed, as its job returns."""
    todo = list(pending)
    total = len(todo)
    cores = max(1, int(sc.defaultParallelism))
    per_task = per_task or default_chunks_per_task(total, cores)
    tasks = [todo[i : i + per_task] for i in range(0, total, per_task)]
    waves = [tasks[i : i + cores] for i in range(0, len(tasks), cores)]

    def job(wave: list[list[Chunk]]) -> Result:
        t = time.monotonic()
        sc.setJobDescription(f"{len(wave)} tasks from {wave[0][0].point.key} {wave[0][0].chunk_id}")
        work = [[(c.point.key, c.first_seed, c.seeds) for c in task] for task in wave]
        rows: list[list[list[dict[str, object]]]] = sc.parallelize(work, len(work)).map(run_chunks).collect()
        return wave, rows, time.monotonic() - t

    done = 0
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="sweep-job") as pool:
        queue = iter(waves)
        running: set[Future[Result]] = {
            pool.submit(job, w) for w in (next(queue, None), next(queue, None)) if w
        }
        try:
            while running:
                finished, running = wait(running, return_when=FIRST_COMPLETED)
                for future in finished:
                    wave, results, seconds = future.result()
                    nxt = next(queue, None)
                    if nxt is not None:
                        running.add(pool.submit(job, nxt))
                    for task, task_rows in zip(wave, results, strict=True):
                        for chunk, rows in zip(task, task_rows, strict=True):
                            _write(chunk_path(out, chunk), rows)
                            done += 1
                            bad = sum(1 for r in rows if r["violations"])
                            log(
                                f"[{done}/{total}] {chunk.point.key} {chunk.chunk_id}: {len(rows)} "
                                f"scenarios, {bad} with violations (wave of {len(wave)} in {seconds:.1f} s)"
                            )
        except BaseException:
            sc.cancelAllJobs()
            raise
