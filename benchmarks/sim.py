"""Simulator throughput: simulated events per second and scenarios per second.

    .venv/bin/python benchmarks/sim.py                 # 200 seeds per protocol, every fault
    .venv/bin/python benchmarks/sim.py --seeds 50 --faults none
    .venv/bin/python benchmarks/sim.py --json

Each row runs the same seeds (``--seed-base`` on) through ``streamtasks.sim.runner.run_scenario``
with the real member machine, assignors and the coordinator model, invariants checked after
every event, in this process. Wall time is ``time.perf_counter`` around the whole batch (the
simulator itself never reads a clock). Failures are counted, not shrunk.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

# This directory holds a script called assignors.py: keep it from shadowing the package.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]

from assignors.partition.types import RebalanceProtocol  # noqa: E402
from streamtasks.sim.runner import run_scenario  # noqa: E402
from streamtasks.sim.scenario import generate, parse_faults  # noqa: E402


def bench(protocol: RebalanceProtocol, seeds: range, faults: frozenset[str]) -> dict[str, object]:
    scenarios = [generate(seed, protocol, faults) for seed in seeds]
    events = messages = sim_ms = violations = 0
    start = time.perf_counter()
    for scenario in scenarios:
        result = run_scenario(scenario)
        events += result.events
        messages += result.messages
        sim_ms += result.sim_ms
        violations += bool(result.violations)
    seconds = time.perf_counter() - start
    return {
        "protocol": protocol.name.lower(),
        "faults": ",".join(sorted(faults)) or "none",
        "scenarios": len(scenarios),
        "events": events,
        "messages": messages,
        "violations": violations,
        "seconds": round(seconds, 2),
        "events_per_second": round(events / seconds),
        "scenarios_per_second": round(len(scenarios) / seconds, 1),
        "simulated_seconds_per_second": round(sim_ms / 1000 / seconds),
    }


COLUMNS = (
    ("protocol", "protocol"),
    ("faults", "faults"),
    ("scenarios", "scenarios"),
    ("events", "events"),
    ("violations", "violations"),
    ("seconds", "wall s"),
    ("events_per_second", "events/s"),
    ("scenarios_per_second", "scenarios/s"),
    ("simulated_seconds_per_second", "sim s / s"),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--seed-base", type=int, default=0)
    parser.add_argument("--faults", default="all")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    seeds = range(args.seed_base, args.seed_base + args.seeds)
    faults = parse_faults(args.faults)
    rows = [bench(p, seeds, faults) for p in (RebalanceProtocol.EAGER, RebalanceProtocol.COOPERATIVE)]
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    table = [[title for _, title in COLUMNS]] + [
        [f"{row[key]:,}" if isinstance(row[key], int) else str(row[key]) for key, _ in COLUMNS]
        for row in rows
    ]
    widths = [max(len(r[i]) for r in table) for i in range(len(COLUMNS))]
    for i, row in enumerate(table):
        print("  ".join(cell.rjust(w) for cell, w in zip(row, widths, strict=True)))
        if i == 0:
            print("  ".join("-" * w for w in widths))


if __name__ == "__main__":
    main()
