"""A hunt for applications where streamtasks' rack-aware placement reads more across racks than
Kafka Streams' (the Java oracle), beside ``bench_rack.py``.

    .venv/bin/python benchmarks/hunt_rack.py --cases 40 --sizes 10x100 30x300

Per size, ``--cases`` random applications (``tests/rack_scenarios.py``): 2 to 4 racks, processes
spread over them unevenly, replication 1 or 2, 0 to 2 standbys, fresh or restarted (every process
ran a share), ``min_traffic`` (one in five ``balance_subtopology``); one JVM per size. Prints
per case the cross-rack traffic of the actives (ours / Kafka's), moved actives, spread, and the
standbys' changelog partitions read across racks; then the worst ratio of our traffic to
Kafka's and every case where ours is larger.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

from _paths import project_imports

with project_imports():
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.*
    from assignors.task.high_availability import HighAvailabilityTaskAssignor
    from assignors.task.quality import active_spread, moved_actives
    from assignors.task.rack_aware import cross_rack_traffic, standby_changelog_traffic
    from assignors.types import ApplicationState
    from tests.oracle import KafkaTaskResult, TaskCase, run_oracle
    from tests.rack_scenarios import rack_state
from _table import format_table

__all__ = ["random_case"]


def random_case(processes: int, tasks: int, seed: int) -> tuple[str, ApplicationState]:
    rng = random.Random(seed)
    racks = rng.randint(2, 4)
    weights = [rng.randint(1, 4) for _ in range(racks)]
    rack_of = [k % racks for k in range(racks)]  # every rack has a process
    rack_of += rng.choices(range(racks), weights=weights, k=processes - racks)
    rng.shuffle(rack_of)
    replication = rng.randint(1, 2)
    standbys = rng.randint(0, 2)
    previous = rng.random() < 0.5
    strategy = "balance_subtopology" if rng.random() < 0.2 else "min_traffic"
    label = (
        f"{processes}x{tasks} seed={seed} racks={racks} per-rack={[rack_of.count(r) for r in range(racks)]}"
        f" repl={replication} standbys={standbys}{' restart' if previous else ''}"
        f"{' balance' if strategy != 'min_traffic' else ''}"
    )
    state = rack_state(
        processes,
        tasks,
        racks=racks,
        replication=replication,
        strategy=strategy,
        previous=previous,
        seed=seed,
        standbys=standbys,
        rack_of=rack_of,
    )
    return label, state


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=40)
    parser.add_argument("--sizes", nargs="*", default=["10x100", "30x300"])
    parser.add_argument("--first-seed", type=int, default=1000)
    args = parser.parse_args()
    worst: tuple[float, str] = (0.0, "")
    over: list[str] = []
    standby_over: list[str] = []
    for size in args.sizes:
        processes, tasks = (int(x) for x in size.split("x"))
        cases = [random_case(processes, tasks, args.first_seed + k) for k in range(args.cases)]
        print(f"hunt_rack: Kafka on {len(cases)} cases of {size} ...", file=sys.stderr, flush=True)
        answers = run_oracle([TaskCase(s) for _, s in cases], timeout_s=7200.0)
        rows = []
        for (label, state), answer in zip(cases, answers, strict=True):
            ours = HighAvailabilityTaskAssignor().assign(state)
            if not isinstance(answer, KafkaTaskResult):
                rows.append([label, f"Kafka failed: {answer}", "", "", ""])
                continue
            theirs = answer.assignment
            t_ours, t_kafka = cross_rack_traffic(state, ours), cross_rack_traffic(state, theirs)
            s_ours, s_kafka = standby_changelog_traffic(state, ours), standby_changelog_traffic(state, theirs)
            ratio = t_ours / t_kafka if t_kafka else (1.0 if t_ours == 0 else float("inf"))
            worst = max(worst, (ratio, label))
            if t_ours > t_kafka:
                over.append(f"{label}: traffic {t_ours} > {t_kafka}")
            if s_ours > s_kafka:
                standby_over.append(f"{label}: standby changelog traffic {s_ours} > {s_kafka}")
            rows.append([
                label + ("" if answer.rack_aware else " (Kafka rack-aware off)"),
                f"{t_ours} / {t_kafka}",
                f"{moved_actives(state, ours)} / {moved_actives(state, theirs)}",
                f"{active_spread(state, ours)} / {active_spread(state, theirs)}",
                f"{s_ours} / {s_kafka}",
            ])  # fmt: skip
        print(format_table(["case", "traffic ours / Kafka", "moved", "spread", "standby traffic"], rows))
        sys.stdout.flush()
    print(f"worst ratio of our traffic to Kafka's: {worst[0]:.4f} ({worst[1]})")
    print(f"cases where our active traffic is larger: {len(over)}")
    for line in over:
        print("  " + line)
    print(f"cases where our standbys read more changelog partitions across racks: {len(standby_over)}")
    for line in standby_over:
        print("  " + line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
