"""Sweep throughput on Spark against a single-process loop, and the scale row.

    .venv/bin/python benchmarks/sweep.py                        # both parts
    .venv/bin/python benchmarks/sweep.py --part throughput --seeds 20
    .venv/bin/python benchmarks/sweep.py --part throughput --seeds 20 --chunk-size 10 --chunks-per-task 3
    .venv/bin/python benchmarks/sweep.py --part scale --scale-sizes 10,30,100 --budget-s 300
    .venv/bin/python benchmarks/sweep.py --part sample --members 10000 --bounces 3
    .venv/bin/python benchmarks/sweep.py --part sample --members 10000 --bounces 3 --kafka-heartbeats

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

Sample: the scale row for a group too large to bounce every member of. ``--bounces`` members
drawn by ``--seed`` out of ``--members`` (partitions 10x members) are bounced, one every 12 s
from the drill's start as in the full rolling bounce, and the run goes on to convergence; the
figures (formation subtracted: the run's own figures at the drill's start) are per bounce of
the sample, not of a full rolling bounce. ``--kafka-heartbeats``: members heartbeat at Kafka's
default intervals (3 s classic, 5 s KIP-848) instead of the simulator's 1 s.
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
    from streamtasks.sweeps.job import default_chunks_per_task, read_rows, run_chunk, run_sweep, spark_session
    from streamtasks.sweeps.metrics import run_bounce_sample, run_point

PROTOCOLS = {
    "eager": "range",
    "cooperative": "cooperative_sticky",
    "consumer": "uniform",
    "consumer-client": "streams",
    "streams": "sticky",
    "streams-client": "high_availability",
}


def throughput(master: str, seeds: int, chunk_size: int, chunks_per_task: int | None) -> None:
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
    per_task = chunks_per_task or default_chunks_per_task(len(todo), cores)
    with tempfile.TemporaryDirectory(prefix="sweep-bench-") as tmp:
        stats = run_sweep(grid, Path(tmp), session=spark, log=lambda _: None, chunks_per_task=chunks_per_task)

        spark_rows = read_rows(Path(tmp))
    spark.stop()
    same = sorted(spark_rows, key=_key) == sorted(
        ({k: r[k] for k in spark_rows[0]} for r in loop_rows), key=_key
    )
    rows = [
        ["single-process loop", "1", f"{loop_s:.1f}", f"{scenarios / loop_s:.1f}", "1.00x", "-"],
        [
            f"spark {master}, {per_task} chunk(s) per task",
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


def _bounce_point(protocol: str, members: int) -> Point:
    """A rolling bounce of ``members`` with 10x as many partitions, the protocol's assignor."""
    return Point(
        protocol=protocol,
        assignor=PROTOCOLS[protocol],
        members=members,
        partitions=10 * members,
        standbys=0,
        faults="none",
        drill="rolling_bounce",
    )


def scale(sizes: list[int], budget_s: float) -> None:
    rows = []
    reached: dict[str, tuple[int, float]] = {}
    for protocol in PROTOCOLS:
        last: tuple[int, float] | None = None
        for members in sizes:
            if last is not None and last[1] * (members / last[0]) ** 2 > budget_s:
                break  # the next size would take longer than the budget (events grow quadratically)
            point = _bounce_point(protocol, members)
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


#: Kafka's default heartbeat intervals: classic ``heartbeat.interval.ms``, KIP-848
#: ``group.consumer.heartbeat.interval.ms``.
#: ``group.streams.heartbeat.interval.ms`` for streams groups.
KAFKA_HEARTBEAT_MS = {
    "eager": 3_000,
    "cooperative": 3_000,
    "consumer": 5_000,
    "consumer-client": 5_000,
    "streams": 5_000,
    "streams-client": 5_000,
}


def sample(members: int, bounces: int, protocols: list[str], seed: int, kafka_heartbeats: bool) -> None:
    """A rolling bounce of ``bounces`` members (drawn by the seed) of a ``members`` group with 10x
    as many partitions, per protocol: the drill's figures per bounce. ``kafka_heartbeats``:
    Kafka's default heartbeat intervals instead of the simulator's 1 s."""
    headers = [
        "protocol",
        "members",
        "partitions",
        "bounces (sample)",
        "heartbeat s",
        "rebalances/bounce",
        "moved/bounce",
        "revoked/bounce",
        "violations",
        "events",
        "simulated s",
        "wall s",
        "CPU s",
    ]
    rows = []
    for protocol in protocols:
        point = _bounce_point(protocol, members)
        heartbeat_ms = KAFKA_HEARTBEAT_MS[protocol] if kafka_heartbeats else None
        t, cpu = time.perf_counter(), time.process_time()

        def progress(
            events: int, now_ms: int, t: float = t, cpu: float = cpu, protocol: str = protocol
        ) -> None:
            print(
                f"  {protocol}: {events:,} events, {now_ms / 1000:,.1f} simulated s, "
                f"{time.perf_counter() - t:,.0f} s wall, {time.process_time() - cpu:,.0f} s CPU",
                file=sys.stderr,
                flush=True,
            )

        row = run_bounce_sample(point, seed, bounces, heartbeat_ms=heartbeat_ms, progress=progress)
        seconds, cpu_s = time.perf_counter() - t, time.process_time() - cpu
        rows.append(
            [
                f"{protocol} ({PROTOCOLS[protocol]})",
                f"{members:,}",
                f"{10 * members:,}",
                f"{bounces} of {members:,} (seed {seed})",
                f"{(heartbeat_ms or 1_000) / 1000:g}",
                f"{row['rebalances_per_change']:.2f}",
                f"{row['moved_per_change']:.1f}",
                f"{int(str(row['partitions_revoked'])) / bounces:.1f}",
                str(row["violations"]) + (f" ({row['violation']})" if row["violations"] else ""),
                f"{row['events']:,}",
                f"{int(str(row['sim_ms'])) / 1000:,.0f}",
                f"{seconds:.1f}",
                f"{cpu_s:.1f}",
            ]
        )
        print("  ".join(rows[-1]), file=sys.stderr, flush=True)
    print(format_table(headers, rows))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=("throughput", "scale", "sample", "both"), default="both")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--seeds", type=int, default=10, help="seeds per point (24 points)")
    parser.add_argument("--chunk-size", type=int, default=5)
    parser.add_argument(
        "--chunks-per-task", type=int, default=None, help="chunks one Spark task runs (default: the sweep's)"
    )
    parser.add_argument("--scale-sizes", default="10,30,100,300")
    parser.add_argument("--budget-s", type=float, default=240.0, help="skip sizes predicted to run longer")
    parser.add_argument("--members", type=int, default=10_000, help="sample: the group's size")
    parser.add_argument("--bounces", type=int, default=3, help="sample: members bounced")
    parser.add_argument("--protocols", default=",".join(PROTOCOLS), help="sample: which protocols")
    parser.add_argument("--seed", type=int, default=0, help="sample: draws the bounced members")
    parser.add_argument(
        "--kafka-heartbeats",
        action="store_true",
        help="sample: Kafka's default heartbeat intervals (3 s classic, 5 s KIP-848) instead of 1 s",
    )
    args = parser.parse_args()
    if args.part in ("throughput", "both"):
        throughput(args.master, args.seeds, args.chunk_size, args.chunks_per_task)
    if args.part in ("scale", "both"):
        scale([int(s) for s in args.scale_sizes.split(",")], args.budget_s)
    if args.part == "sample":
        print(f"load average {os.getloadavg()[0]:.1f}", flush=True)
        sample(args.members, args.bounces, args.protocols.split(","), args.seed, args.kafka_heartbeats)
        print(f"load average after {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
