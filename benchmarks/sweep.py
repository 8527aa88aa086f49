"""Sweep throughput on Spark against a single-process loop, and the scale row.

    .venv/bin/python benchmarks/sweep.py                        # both parts
    .venv/bin/python benchmarks/sweep.py --part throughput --seeds 20
    .venv/bin/python benchmarks/sweep.py --part scale --scale-sizes 10,30,100 --budget-s 300

Throughput: the same scenarios (every protocol; rolling bounce, scale-out, crash; 3 and 6
members, 24 partitions) run by a loop in this process (``streamtasks.sweeps.job.run_chunk`` per
chunk) and by ``run_sweep`` on ``--master`` (default ``local[2]``). Spark's start-up is reported
apart: the session (JVM), then one warm-up job per core (each executor's Python worker imports
the simulator once); the scenarios/s row is the sweep after that.

Scale: one rolling bounce per protocol of growing groups (partitions 10x members), one seed,
the drill's own rebalances and partitions moved per bounce, violations, events and wall time,
each size while its run is predicted (quadratic growth) to take at most ``--budget-s``; the last
line extrapolates the wall time of 10,000 members x 100,000 partitions from the largest size
reached (events grow with members x bounces, heartbeats included: quadratic in the group size).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from _paths import project_imports
from _table import format_table

with project_imports():
    from streamtasks.sweeps.grid import Point, chunks, parse_grid
    from streamtasks.sweeps.job import read_rows, run_chunk, run_sweep, spark_session
    from streamtasks.sweeps.metrics import run_point

PROTOCOLS = {
    "eager": "range",
    "cooperative": "cooperative_sticky",
    "consumer": "uniform",
    "consumer-client": "streams",
}


def throughput(master: str, seeds: int, chunk_size: int) -> None:
    grid = parse_grid(
        {
            "protocols": list(PROTOCOLS),
            "members": [3, 6],
            "partitions": [24],
            "drills": ["rolling_bounce", "scale_out", "crash"],
            "seeds": {"start": 0, "count": seeds},
            "chunk_size": chunk_size,
        },
        "bench",
    )
    todo = chunks(grid)
    scenarios = sum(c.seeds for c in todo)
    print(f"{scenarios} scenarios in {len(todo)} chunks; load average {os.getloadavg()[0]:.1f}", flush=True)

    t = time.perf_counter()
    loop_rows = [row for c in todo for row in run_chunk((c.point.key, c.first_seed, c.seeds))]
    loop_s = time.perf_counter() - t
    print(f"single-process loop: {loop_s:.1f} s", flush=True)

    t = time.perf_counter()
    spark = spark_session(master, "streamtasks-sweep-bench")
    session_s = time.perf_counter() - t
    sc = spark.sparkContext
    cores = int(sc.defaultParallelism)
    t = time.perf_counter()
    warm = todo[0]
    sc.parallelize([(warm.point.key, warm.first_seed, 1)] * cores, cores).flatMap(run_chunk).count()
    warmup_s = time.perf_counter() - t
    with tempfile.TemporaryDirectory(prefix="sweep-bench-") as tmp:
        stats = run_sweep(grid, Path(tmp), session=spark, log=lambda _: None)

        spark_rows = read_rows(Path(tmp))
    spark.stop()
    same = sorted(spark_rows, key=_key) == sorted(
        ({k: r[k] for k in spark_rows[0]} for r in loop_rows), key=_key
    )
    rows = [
        ["single-process loop", "1", f"{loop_s:.1f}", f"{scenarios / loop_s:.1f}", "1.00x", "-"],
        [
            f"spark {master}",
            str(cores),
            f"{stats.run_s:.1f}",
            f"{scenarios / stats.run_s:.1f}",
            f"{loop_s / stats.run_s:.2f}x",
            f"session {session_s:.1f} s + warm-up {warmup_s:.1f} s",
        ],
    ]
    print(format_table(["runner", "cores", "seconds", "scenarios/s", "speed-up", "start-up (apart)"], rows))
    print(f"rows identical to the loop's: {same}; load average after {os.getloadavg()[0]:.1f}")


def _key(row: dict[str, object]) -> tuple[str, ...]:
    return (str(row["protocol"]), str(row["members"]).zfill(6), str(row["drill"]), str(row["seed"]).zfill(6))


def scale(sizes: list[int], budget_s: float) -> None:
    rows = []
    reached: dict[str, tuple[int, float]] = {}
    for protocol, assignor in PROTOCOLS.items():
        last: tuple[int, float] | None = None
        for members in sizes:
            if last is not None and last[1] * (members / last[0]) ** 2 > budget_s:
                break  # the next size would take longer than the budget (events grow quadratically)
            point = Point(
                protocol=protocol,
                assignor=assignor,
                members=members,
                partitions=10 * members,
                standbys=0,
                faults="none",
                drill="rolling_bounce",
            )
            t = time.perf_counter()
            row = run_point(point, 0)
            seconds = time.perf_counter() - t
            reached[protocol] = last = (members, seconds)
            rows.append(
                [
                    protocol,
                    f"{members:,}",
                    f"{10 * members:,}",
                    f"{row['rebalances_per_change']:.2f}",
                    f"{row['moved_per_change']:.1f}",
                    str(row["violations"]),
                    f"{row['events']:,}",
                    f"{int(row['sim_ms']) / 1000:,.0f}",
                    f"{seconds:.1f}",
                ]
            )
            print("  ".join(rows[-1]), file=sys.stderr, flush=True)
    print(
        format_table(
            [
                "protocol",
                "members",
                "partitions",
                "rebalances/bounce",
                "moved/bounce",
                "violations",
                "events",
                "simulated s",
                "wall s",
            ],
            rows,
        )
    )
    for protocol, (members, seconds) in reached.items():
        factor = (10_000 / members) ** 2
        print(
            f"{protocol}: largest size run {members:,} members in {seconds:.0f} s; 10,000 x 100,000 "
            f"extrapolated (quadratic) ~{seconds * factor / 3600:,.0f} h in one process"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=("throughput", "scale", "both"), default="both")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--seeds", type=int, default=10, help="seeds per point (24 points)")
    parser.add_argument("--chunk-size", type=int, default=5)
    parser.add_argument("--scale-sizes", default="10,30,100,300")
    parser.add_argument("--budget-s", type=float, default=240.0, help="skip sizes predicted to run longer")
    args = parser.parse_args()
    if args.part in ("throughput", "both"):
        throughput(args.master, args.seeds, args.chunk_size)
    if args.part in ("scale", "both"):
        scale([int(s) for s in args.scale_sizes.split(",")], args.budget_s)


if __name__ == "__main__":
    main()
