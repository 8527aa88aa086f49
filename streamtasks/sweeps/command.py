"""``streamtasks sweep GRID --out DIR [--master URL]`` and ``python -m streamtasks.sweeps replay``."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from streamtasks.sweeps.drills import drill_scenario
from streamtasks.sweeps.grid import BUILTIN_GRIDS, load_grid, parse_point, with_chunk_size

__all__ = ["add_sweep_arguments", "replay_main", "run_sweep_command"]


def add_sweep_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "grid", help=f"a grid YAML file, or a built-in grid: {', '.join(BUILTIN_GRIDS)} (see docs/spark.md)"
    )
    parser.add_argument("--out", required=True, type=Path, help="output directory (re-run it to resume)")
    parser.add_argument(
        "--master",
        default=None,
        help="Spark master URL, unchanged: local[*] (the default, unless run by spark-submit: its "
        "--master), local[N], spark://host:port, yarn, k8s://…",
    )
    parser.add_argument("--chunk-size", type=int, default=None, help="seeds per chunk (default: the grid's)")
    parser.add_argument("--no-report", action="store_true", help="write the rows only")


def run_sweep_command(args: argparse.Namespace) -> int:
    """Run the sweep, write the report, print its headline; 1 when any scenario violated an
    invariant (as ``python -m streamtasks.sim``)."""
    from streamtasks.sweeps.job import read_rows, run_sweep
    from streamtasks.sweeps.sweep_report import write_report

    grid = load_grid(args.grid)
    if args.chunk_size is not None:
        grid = with_chunk_size(grid, args.chunk_size)

    def log(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    run_sweep(grid, args.out, master=args.master, log=log)
    rows = read_rows(args.out)
    if not args.no_report:
        summary = write_report(args.out, rows, grid)
        print(
            f"{summary['scenarios']} scenarios, {summary['scenarios_with_violations']} with violations; "
            f"{args.out / 'report.html'}, {args.out / 'summary.json'}, rows in {args.out / 'rows'}"
        )
        for failure in summary["failures"][:10]:
            print(f"VIOLATION seed={failure['seed']}: {failure['violation']}\n  replay: {failure['replay']}")
    return 1 if any(r["violations"] for r in rows) else 0


def replay_main(argv: Sequence[str] | None = None) -> int:
    """``python -m streamtasks.sweeps replay POINT --seed N``: one scenario, its row, its steps
    and, when it violated an invariant, the end of its trace."""
    from streamtasks.sweeps.metrics import run_point, simulate

    parser = argparse.ArgumentParser(
        prog="python -m streamtasks.sweeps replay", description=replay_main.__doc__
    )
    parser.add_argument(
        "point", help="protocol=…/assignor=…/members=…/partitions=…/standbys=…/faults=…/drill=…"
    )
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--trace-lines", type=int, default=80)
    args = parser.parse_args(argv)
    point = parse_point(args.point)
    scenario = drill_scenario(point, args.seed)
    print("\n".join(scenario.describe()))
    row = run_point(point, args.seed)
    print(json.dumps(row, indent=2))
    if row["violations"]:
        outcome = simulate(scenario, point)
        print("trace (last events):")
        print("\n".join(f"  {line}" for line in outcome.trace[-args.trace_lines :]))
        return 1
    return 0
