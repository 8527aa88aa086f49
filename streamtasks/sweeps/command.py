"""``streamtasks sweep GRID --out DIR [--master URL]`` and ``streamtasks sweep replay POINT --seed N``."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from streamtasks.errors import ConfigError
from streamtasks.sweeps.drills import drill_scenario
from streamtasks.sweeps.grid import BUILTIN_GRIDS, load_grid, parse_point, with_chunk_size

__all__ = ["REPLAY", "add_sweep_arguments", "replay_main", "run_sweep_command"]

#: The word in place of GRID that replays one scenario of a sweep instead of running one.
REPLAY = "replay"

_SWEEP_ONLY = ("out", "master", "chunk_size", "no_report")
_REPLAY_ONLY = ("point", "seed")


def add_sweep_arguments(parser: argparse.ArgumentParser) -> None:
    """``GRID --out DIR ...`` runs a sweep; ``replay POINT --seed N`` runs one of its scenarios
    again (the command a sweep prints beside each violation)."""
    parser.usage = (
        "%(prog)s GRID --out DIR [--master URL] [--chunk-size N] [--no-report]\n"
        "       %(prog)s replay POINT --seed N [--trace-lines N]"
    )
    parser.add_argument(
        "grid",
        metavar="GRID",
        help=f"a grid YAML file, or a built-in grid: {', '.join(BUILTIN_GRIDS)} (see docs/spark.md); "
        f"or '{REPLAY}': run one scenario of a sweep again",
    )
    parser.add_argument("point", nargs="?", metavar="POINT", help=f"{REPLAY}: {_POINT_HELP}")
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="output directory (re-run it to resume); a sweep needs it (no default)",
    )
    parser.add_argument(
        "--master",
        default=None,
        help="Spark master URL, unchanged: local[*] (the default, unless run by spark-submit: its "
        "--master), local[N], spark://host:port, yarn, k8s://…",
    )
    parser.add_argument("--chunk-size", type=int, default=None, help="seeds per chunk (default: the grid's)")
    parser.add_argument("--no-report", action="store_true", help="write the rows only")
    _add_replay_options(parser, required=False)


_POINT_HELP = "protocol=…/assignor=…/members=…/partitions=…/standbys=…/faults=…/drill=…"


def _add_replay_options(parser: argparse.ArgumentParser, *, required: bool) -> None:
    parser.add_argument(
        "--seed",
        type=int,
        required=required,
        default=None,
        help=f"{REPLAY}: the scenario's seed (no default)",
    )
    parser.add_argument(
        "--trace-lines",
        type=int,
        default=80,
        help=f"{REPLAY}: trace lines printed when it violated an invariant",
    )


def run_sweep_command(args: argparse.Namespace) -> int:
    """Run the sweep, write the report, print its headline; 1 when any scenario violated an
    invariant (as ``streamtasks sim``)."""
    if args.grid == REPLAY:
        _reject(args, _SWEEP_ONLY, f"sweep {REPLAY}")
        if args.point is None or args.seed is None:
            raise ConfigError(f"sweep {REPLAY} needs POINT and --seed N (as a sweep's violations print them)")
        return _replay(args.point, args.seed, args.trace_lines)
    _reject(args, _REPLAY_ONLY, "a sweep")
    if args.out is None:
        raise ConfigError("a sweep needs --out DIR: where its rows and report go")
    return _sweep(args)


def _reject(args: argparse.Namespace, names: tuple[str, ...], what: str) -> None:
    """The flags of the other form of ``sweep`` are an error, not silently ignored."""
    for name in names:
        value = getattr(args, name)
        if value is not None and value is not False:
            flag = "POINT" if name == "point" else "--" + name.replace("_", "-")
            raise ConfigError(f"{flag} does not apply to {what}")


def _sweep(args: argparse.Namespace) -> int:
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
    """``python -m streamtasks.sweeps replay POINT --seed N``: as ``streamtasks sweep replay``."""
    parser = argparse.ArgumentParser(prog="python -m streamtasks.sweeps replay", description=_replay.__doc__)
    parser.add_argument("point", help=_POINT_HELP)
    _add_replay_options(parser, required=True)
    args = parser.parse_args(argv)
    return _replay(args.point, args.seed, args.trace_lines)


def _replay(point_key: str, seed: int, trace_lines: int) -> int:
    """One scenario of a sweep again: the scenario, its row, its steps and, when it violated an
    invariant, the end of its trace (exit status 1 then)."""
    from streamtasks.sweeps.metrics import run_point, simulate

    point = parse_point(point_key)
    scenario = drill_scenario(point, seed)
    print("\n".join(scenario.describe()))
    row = run_point(point, seed)
    print(json.dumps(row, indent=2))
    if row["violations"]:
        outcome = simulate(scenario, point)
        print("trace (last events):")
        print("\n".join(f"  {line}" for line in outcome.trace[-trace_lines:]))
        return 1
    return 0
