"""Assignor speed and quality, streamtasks next to its peers, in one table.

    .venv/bin/python benchmarks/assignors.py            # full shapes (the issue's targets)
    .venv/bin/python benchmarks/assignors.py --quick    # smaller shapes, slow peers skipped
    .venv/bin/python benchmarks/assignors.py --json     # rows as JSON

Rows come from benchmarks/bench_task.py (task assignors vs faust-streaming) and
benchmarks/bench_partition.py (partition assignors vs kafka-python 3), measured in this run on
the same inputs. ``seconds`` is the best of several runs; ``ratio`` is peer time / streamtasks
time for the same case. A second table, from benchmarks/bench_leader.py, times a classic-group
leader's whole step (decode, ``uniform``, check, adjust, encode) at 10,000 members x 100,000
partitions, fresh, with one member added and with one removed. A third, from
benchmarks/bench_oracle.py, sets streamtasks' high_availability and cooperative_sticky beside
Kafka's own HighAvailabilityTaskAssignor and CooperativeStickyAssignor (run in a JVM; skipped
with a note where Java is missing).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import bench_leader
import bench_oracle
import bench_partition
import bench_task
from _table import format_table

COLUMNS = (
    ("case", "case"),
    ("implementation", "implementation"),
    ("seconds", "seconds"),
    ("goal_seconds", "goal"),
    ("meets_goal", "ok"),
    ("ratio", "peer/ours"),
    ("max_minus_min", "max-min"),
    ("moved", "moved"),
    ("colocated_standbys", "co-located"),
    ("warmups", "warm-ups"),
)


def _annotate(rows: list[dict[str, object]]) -> None:
    ours: dict[object, float] = {}
    for row in rows:
        if str(row["implementation"]).startswith("streamtasks") and row["case"] not in ours:
            ours[row["case"]] = float(row["seconds"])  # type: ignore[arg-type]
    for row in rows:
        goal = row.get("goal_seconds")
        seconds = float(row["seconds"])  # type: ignore[arg-type]
        row["meets_goal"] = None if goal is None else seconds <= float(goal)  # type: ignore[arg-type]
        base = ours.get(row["case"])
        is_peer = not str(row["implementation"]).startswith("streamtasks")
        row["ratio"] = f"{seconds / base:,.1f}x" if is_peer and base else None


def _cell(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "NO"
    if isinstance(value, float):
        return f"{value:.4f}" if value < 10 else f"{value:.1f}"
    return str(value)


def render(rows: list[dict[str, object]]) -> str:
    table = [[_cell(r.get(key)) for key, _ in COLUMNS] for r in rows]
    return format_table([h for _, h in COLUMNS], table)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="smaller shapes; skip slow peers")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--suite", choices=("all", "task", "partition", "leader", "oracle"), default="all")
    args = parser.parse_args()
    rows: list[dict[str, object]] = []
    if args.suite in ("all", "task"):
        print("measuring task assignors ...", file=sys.stderr)
        rows += bench_task.rows(quick=args.quick)
    if args.suite in ("all", "partition"):
        print("measuring partition assignors ...", file=sys.stderr)
        rows += bench_partition.rows(quick=args.quick)
    leader: list[dict[str, object]] = []
    if args.suite in ("all", "leader"):
        print("measuring the leader step ...", file=sys.stderr)
        leader = bench_leader.rows(quick=args.quick)
    oracle: list[dict[str, object]] = []
    if args.suite in ("all", "oracle"):
        print("measuring Kafka's own assignors beside ours ...", file=sys.stderr)
        oracle = bench_oracle.rows(quick=args.quick)
    _annotate(rows)
    if args.json:
        print(json.dumps(rows + leader + oracle, indent=2, default=str))
    else:
        tables = (
            rows and render(rows),
            leader and bench_leader.render(leader),
            oracle and bench_oracle.render(oracle),
        )
        print("\n\n".join(table for table in tables if table))
    failed = [r for r in rows + leader if r.get("meets_goal") is False]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
