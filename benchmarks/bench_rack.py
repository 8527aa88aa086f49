"""KIP-925's rack-aware active placement: streamtasks' high_availability next to Kafka Streams'
HighAvailabilityTaskAssignor with its RackAwareTaskAssignor, on the same applications (issue 30,
item 4).

    .venv/bin/python benchmarks/bench_rack.py             # 10 x 100, 30 x 300, 100 x 1,000
    .venv/bin/python benchmarks/bench_rack.py --quick     # 10 x 100 only
    .venv/bin/python benchmarks/bench_rack.py --sizes 1000x10000

Shapes (``tests/rack_scenarios.py``): ``P`` one-thread processes round-robin over 3 racks, ``T``
tasks, two thirds stateful (two input partitions each) and a third stateless (one); each
partition's replicas on racks drawn from a fixed seed. "fresh": no previous assignment,
replication 1; "restart": every process ran a shuffled share; "balance": strategy
``balance_subtopology``, replication 2; "standby": a restart with one standby per stateful task
(each has a changelog partition on a drawn rack: both assignors move standbys to cut changelog
traffic).

Columns: ``traffic`` -- input partitions read from another rack by the actives (stateful +
stateless); ``standby`` -- changelog partitions read from another rack by the standbys and
warm-ups; ``moved`` -- actives off the process that ran them; ``spread`` -- max minus min
actives per thread; ``seconds`` -- one assign call (Kafka: ``System.nanoTime()`` inside the JVM,
one untimed warm-up up to 300 tasks, one cold run beyond; ours: best of three); ``ratio`` -- ours over
Kafka's. Kafka's min-cost flow runs over every (task, process) pair, by cycle cancelling: at
100 x 1,000 one call takes minutes, so larger sizes are only run when asked for.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import uuid
from pathlib import Path

from _paths import project_imports

with project_imports():
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.*
    from assignors.task.high_availability import HighAvailabilityTaskAssignor
    from assignors.task.quality import active_spread, moved_actives
    from assignors.task.rack_aware import cross_rack_traffic, standby_changelog_traffic
    from assignors.types import ApplicationState, ProcessAssignment, TaskAssignment
    from tests.oracle import (
        KafkaFailure,
        KafkaGroupResult,
        KafkaTaskResult,
        OracleUnavailable,
        TaskCase,
        oracle_versions,
        run_oracle,
    )
    from tests.rack_scenarios import rack_state
    from topology.ids import TaskId
from _table import format_table

__all__ = ["cases", "main"]

SIZES = ((10, 100), (30, 300), (100, 1000))
ORACLE_TIMEOUT_S = 3600.0


def cases(processes: int, tasks: int) -> list[tuple[str, ApplicationState]]:
    """The four shapes at one size."""
    return [
        ("fresh", rack_state(processes, tasks, seed=1)),
        ("restart", rack_state(processes, tasks, seed=2, previous=True)),
        ("balance", rack_state(processes, tasks, seed=3, replication=2, strategy="balance_subtopology")),
        ("standby", rack_state(processes, tasks, seed=4, standbys=1, previous=True)),
    ]


def _split(state: ApplicationState, assignment: TaskAssignment) -> str:
    """Cross-rack traffic as ``total (stateful + stateless)``."""
    total = cross_rack_traffic(state, assignment)
    stateful = cross_rack_traffic(
        state,
        TaskAssignment(
            processes=tuple(
                type(p)(
                    process_id=p.process_id,
                    active=frozenset(t for t in p.active if state.tasks[t].is_stateful),
                )
                for p in assignment.processes
            )
        ),
    )
    return f"{total} ({stateful} + {total - stateful})"


def _ours(state: ApplicationState) -> tuple[float, TaskAssignment]:
    ha = HighAvailabilityTaskAssignor()
    best, result = float("inf"), None
    for _ in range(3):
        start = time.perf_counter()
        result = ha.assign(state)
        best = min(best, time.perf_counter() - start)
    assert result is not None
    return best, result


def _to_json(answer: KafkaTaskResult | KafkaFailure) -> dict[str, object]:
    if isinstance(answer, KafkaFailure):
        return {"error": answer.error}
    return {
        "processes": [
            {
                "id": str(p.process_id),
                "active": sorted(map(str, p.active)),
                "standby": sorted(map(str, p.standby)),
            }
            for p in answer.assignment.processes
        ],
        "followup": answer.followup,
        "warmups": answer.warmups,
        "seconds": list(answer.seconds),
        "rack_aware": answer.rack_aware,
    }


def _from_json(data: dict[str, object]) -> KafkaTaskResult | KafkaFailure:
    if "error" in data:
        return KafkaFailure(error=str(data["error"]))
    processes = data["processes"]
    assert isinstance(processes, list)
    seconds = data["seconds"]
    assert isinstance(seconds, list)
    return KafkaTaskResult(
        assignment=TaskAssignment(
            processes=tuple(
                ProcessAssignment(
                    process_id=uuid.UUID(p["id"]),
                    active=frozenset(map(TaskId.parse, p["active"])),
                    standby=frozenset(map(TaskId.parse, p["standby"])),
                )
                for p in processes
            )
        ),
        followup=bool(data["followup"]),
        warmups=int(str(data["warmups"])),
        seconds=tuple(float(x) for x in seconds),
        rack_aware=bool(data["rack_aware"]),
    )


def kafka_answers(
    labelled: list[tuple[str, ApplicationState]], *, timeout_s: float, cache: Path | None
) -> list[KafkaTaskResult | KafkaFailure]:
    """Kafka's answer per case, each in its own JVM within ``timeout_s`` (a
    :class:`KafkaFailure` saying so past it); with ``cache``, answers found there (by case
    label) are reused and new ones written to it."""
    stored: dict[str, dict[str, object]] = json.loads(cache.read_text()) if cache and cache.exists() else {}
    out: list[KafkaTaskResult | KafkaFailure] = []
    for label, state in labelled:
        if label not in stored:
            print(f"bench_rack: Kafka on {label} ...", file=sys.stderr, flush=True)
            try:
                warmup = 1 if len(state.tasks) <= 300 else 0
                (answer,) = run_oracle([TaskCase(state)], warmup=warmup, repeat=1, timeout_s=timeout_s)
            except subprocess.TimeoutExpired:
                answer = KafkaFailure(error=f"no answer within {timeout_s:.0f} s")
            assert not isinstance(answer, KafkaGroupResult)
            stored[label] = _to_json(answer)
            if cache:
                cache.write_text(json.dumps(stored, indent=1))
        out.append(_from_json(stored[label]))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="10 x 100 only")
    parser.add_argument("--sizes", nargs="*", help="PxT sizes, e.g. 100x1000")
    parser.add_argument("--timeout", type=float, default=ORACLE_TIMEOUT_S, help="seconds Kafka gets per case")
    parser.add_argument("--kafka-cache", type=Path, help="JSON file keeping Kafka's answers per case")
    args = parser.parse_args()
    sizes = [(10, 100)] if args.quick else list(SIZES)
    if args.sizes:
        sizes = [(int(p), int(t)) for p, t in (s.split("x") for s in args.sizes)]
    rows: list[list[str]] = []
    for processes, tasks in sizes:
        shapes = cases(processes, tasks)
        labelled = [(f"{processes:,} x {tasks:,} {name}", s) for name, s in shapes]
        try:
            answers = kafka_answers(labelled, timeout_s=args.timeout, cache=args.kafka_cache)
        except OracleUnavailable as exc:
            print(f"bench_rack: Kafka skipped: {exc}", file=sys.stderr)
            return 1
        for (name, state), answer in zip(shapes, answers, strict=True):
            seconds, ours = _ours(state)
            case = f"{processes:,} x {tasks:,} {name}"
            if not isinstance(answer, KafkaTaskResult):
                rows.append([case, "Kafka", f"failed: {answer.error}", "", "", "", "", ""])
            else:
                kafka_s = min(answer.seconds)
                rows.append([
                    case, "Kafka" + ("" if answer.rack_aware else " (rack-aware off!)"),
                    _split(state, answer.assignment),
                    str(standby_changelog_traffic(state, answer.assignment)),
                    str(moved_actives(state, answer.assignment)),
                    str(active_spread(state, answer.assignment)), f"{kafka_s:.4f}", "",
                ])  # fmt: skip
            ratio = f"{seconds / min(answer.seconds):.4f}" if isinstance(answer, KafkaTaskResult) else ""
            rows.append([
                case, "streamtasks", _split(state, ours), str(standby_changelog_traffic(state, ours)),
                str(moved_actives(state, ours)),
                str(active_spread(state, ours)), f"{seconds:.4f}", ratio,
            ])  # fmt: skip
    print(f"rack-aware placement, {oracle_versions()} vs streamtasks high_availability")
    print(
        format_table(["case", "assignor", "traffic", "standby", "moved", "spread", "seconds", "ratio"], rows)
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
