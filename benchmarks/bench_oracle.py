"""streamtasks next to Kafka's own assignors, on the same scenarios (issue 11, item 5).

    .venv/bin/python benchmarks/bench_oracle.py            # up to 1,000 x 10,000
    .venv/bin/python benchmarks/bench_oracle.py --quick    # 100 x 1,000 only

Kafka Streams' ``HighAvailabilityTaskAssignor`` (kafka-streams, the version java/oracle/pom.xml
names) against streamtasks' ``high_availability``, and kafka-clients' ``CooperativeStickyAssignor``
against streamtasks' ``cooperative_sticky`` under COOPERATIVE (``assignors.cooperative.assign``:
the assignor and KIP-429's adjustment, as Kafka's ``assign`` also does both). Kafka's time is
``System.nanoTime()`` around its assign call inside the JVM, after one untimed warm-up run on the
same input, best of three (at 1,000 x 10,000: one cold run, which takes minutes); ours is the
best of three ``assign`` calls (input building not timed).
Kafka's time includes what its assign call does besides assigning: at the end it builds its
"Decided on assignment" log line from every ClientState, every task lag included, even with
logging off.

Task columns: ``active``/``replicas`` -- max minus min actives (all copies: active, standby,
warm-up) per thread; ``moved`` -- actives on a process that did not run them before;
``colocated`` -- copies of a task on the process that runs it, or twice on one process (0: every
task's copies on distinct processes); ``warm-ups`` (Kafka's: standbys beyond
``num_standby_replicas``); ``follow-up`` -- a probing rebalance is asked for. Partition columns:
``spread`` -- max minus min partitions per member after the follow-up rebalance (the target),
``moved`` -- partitions whose target member is not their valid owner, ``withheld`` -- handed out
only in the follow-up.

Task shapes: ``P`` one-thread processes, ``T`` stateful tasks, one standby each, default
``acceptable_recovery_lag`` (10,000). "fresh": no previous assignment. "one added": every
process ran what streamtasks' fresh answer gave it (actives report the running lag, standbys a
lag from 0 to 999) and a new process joins. "one removed, lagging standbys": the same previous
assignment, the last process gone, and every third standby 20,000 behind (not caught up).
Partition shape: ``M`` members, ``N`` partitions over 10 topics, all members on every topic,
"one added": each member owns what streamtasks' fresh answer gave it (generation 1) and a new
member joins.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from _paths import project_imports

with project_imports():
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.oracle
    from assignors import cooperative
    from assignors.partition.sticky import CooperativeStickyAssignor
    from assignors.partition.types import GroupSubscription, RebalanceProtocol, Subscription
    from assignors.task.high_availability import HighAvailabilityTaskAssignor
    from assignors.types import (
        RUNNING_LAG,
        ApplicationState,
        AssignmentConfigs,
        ClientState,
        TaskAssignment,
        TaskSpec,
    )
    from tests.oracle import (
        JVM_OPTIONS,
        GroupCase,
        KafkaFailure,
        KafkaGroupResult,
        KafkaTaskResult,
        OracleUnavailable,
        TaskCase,
        group_quality,
        oracle_versions,
        run_oracle,
        task_quality,
    )
    from topology.ids import TaskId
from _table import format_table

__all__ = ["render", "rows"]

T = TypeVar("T")
REPEAT = 3


def _best(run: Callable[[], T]) -> tuple[float, T]:
    best, result = float("inf"), None
    for _ in range(REPEAT):
        start = time.perf_counter()
        result = run()
        best = min(best, time.perf_counter() - start)
    assert result is not None
    return best, result


def _pids(n: int) -> list[uuid.UUID]:
    rng = random.Random(n)
    return sorted(uuid.UUID(int=rng.getrandbits(128), version=4) for _ in range(n))


def _task_states(processes: int, tasks: int) -> list[tuple[str, ApplicationState]]:
    specs = [TaskSpec(id=TaskId(0, p), is_stateful=True) for p in range(tasks)]
    pids = _pids(processes + 1)
    configs = AssignmentConfigs(num_standby_replicas=1)
    fresh = ApplicationState.build(specs, [ClientState(process_id=p) for p in pids[:processes]], configs)
    previous = HighAvailabilityTaskAssignor().assign(fresh)
    rng = random.Random(tasks)

    def ran(p: Any, behind: Callable[[int], int]) -> ClientState:
        lags = {t: RUNNING_LAG for t in p.active}
        lags.update({t: behind(t.partition) for t in p.standby})
        return ClientState(
            process_id=p.process_id, previous_active=p.active, previous_standby=p.standby, task_lags=lags
        )

    added = [ran(p, lambda _: rng.randrange(1000)) for p in previous.processes]
    added.append(ClientState(process_id=pids[processes]))
    removed = [
        ran(p, lambda i: 20_000 if i % 3 == 0 else rng.randrange(1000)) for p in previous.processes[:-1]
    ]
    size = f"{processes:,} × {tasks:,}"
    return [
        (f"{size} fresh", fresh),
        (f"{size} one added", ApplicationState.build(specs, added, configs, now_ms=1)),
        (f"{size} one removed, lagging standbys", ApplicationState.build(specs, removed, configs, now_ms=1)),
    ]


def _group_case(members: int, partitions: int, topics: int = 10) -> tuple[str, GroupSubscription]:
    counts = {f"topic-{i:02d}": partitions // topics for i in range(topics)}
    names = [f"member-{i:05d}" for i in range(members)]
    fresh = GroupSubscription(
        members={m: Subscription(topics=tuple(counts)) for m in names}, partitions_per_topic=counts
    )
    previous = CooperativeStickyAssignor().assign(fresh)
    group = GroupSubscription(
        members={
            **{
                m: Subscription(topics=tuple(counts), owned_partitions=previous.members[m], generation=1)
                for m in names
            },
            f"member-{members:05d}": Subscription(topics=tuple(counts)),
        },
        partitions_per_topic=counts,
    )
    return f"{members:,} × {partitions:,} one added", group


def _fraction(value: Any) -> str:
    return str(value) if value.denominator != 1 else str(value.numerator)


def _task_row(case: str, who: str, seconds: float, state: ApplicationState, q: Any) -> dict[str, object]:
    return {
        "assignor": "task",
        "case": case,
        "implementation": who,
        "seconds": seconds,
        "active": _fraction(q.active_spread),
        "replicas": _fraction(q.replica_spread),
        "moved": q.moved,
        "colocated": q.colocated,
        "warmups": q.warmups,
        "followup": q.followup,
    }


#: Kafka's runs per case: (untimed warm-ups, timed runs). At 1,000 x 10,000 one run of Kafka's
#: HighAvailabilityTaskAssignor takes minutes on this machine, so that size runs once, cold.
KAFKA_RUNS = {(100, 1000): (1, REPEAT), (1000, 10_000): (0, 1)}
#: One JVM per case at 1,000 x 10,000 (each answer printed as it comes; one JVM per size below).
#: Kafka's assign call is CPU-bound there, not short of memory (about 0.4 GB live): its
#: ``tasksToClientByLag`` keeps, per task, a TreeSet of every client ordered by a lag read from
#: each client's TreeMap of 10,000 lags, 1.6-10 CPU-minutes per case on a quiet machine; a
#: loaded 2-core machine gives the JVM a tenth of a core (docs/measurements.md).
ONE_JVM_PER_CASE = {(1000, 10_000)}
ORACLE_TIMEOUT_S = 3 * 3600.0
#: The heap at its size from the start: growing it from 256 MB cost full collections of 20-24 s
#: each on the loaded machine.
LARGE_JVM_OPTIONS = (*(o for o in JVM_OPTIONS if not o.startswith("-Xms")), "-Xms2g")


def rows(quick: bool = False) -> list[dict[str, object]]:
    """One row per implementation and case; empty with a note on stderr when Java is missing."""
    sizes = [(100, 1000)] if quick else [(100, 1000), (1000, 10_000)]
    states: list[tuple[str, ApplicationState]] = []
    groups: list[tuple[str, GroupSubscription]] = []
    kafka_tasks: list[KafkaTaskResult | KafkaGroupResult | KafkaFailure] = []
    kafka_groups: list[KafkaTaskResult | KafkaGroupResult | KafkaFailure] = []
    for size in sizes:
        size_states = _task_states(*size)
        size_group = _group_case(*size)
        warmup, repeat = KAFKA_RUNS[size]
        print(
            f"bench_oracle: Kafka's assignors on {size[0]:,} x {size[1]:,} "
            f"({warmup} warm-up, {repeat} timed run{'s' if repeat > 1 else ''} per case) ...",
            file=sys.stderr,
            flush=True,
        )
        cases: list[TaskCase | GroupCase] = [TaskCase(s) for _, s in size_states]
        cases.append(GroupCase(size_group[1]))
        labels = [name for name, _ in size_states] + [size_group[0]]
        try:
            if size in ONE_JVM_PER_CASE:
                answers = []
                for label, one in zip(labels, cases, strict=True):
                    started = time.perf_counter()
                    answers += run_oracle(
                        [one],
                        warmup=warmup,
                        repeat=repeat,
                        timeout_s=ORACLE_TIMEOUT_S,
                        jvm_options=LARGE_JVM_OPTIONS,
                    )
                    print(
                        f"bench_oracle: Kafka on {label}: {time.perf_counter() - started:.0f} s wall",
                        file=sys.stderr,
                        flush=True,
                    )
            else:
                answers = run_oracle(cases, warmup=warmup, repeat=repeat, timeout_s=ORACLE_TIMEOUT_S)
        except OracleUnavailable as exc:
            print(f"bench_oracle: Kafka's assignors skipped: {exc}", file=sys.stderr)
            return []
        states += size_states
        groups.append(size_group)
        kafka_tasks += answers[: len(size_states)]
        kafka_groups += answers[len(size_states) :]
    kafka = kafka_tasks + kafka_groups
    out: list[dict[str, object]] = []
    ha = HighAvailabilityTaskAssignor()
    for (case, state), answer in zip(states, kafka, strict=False):
        assert isinstance(answer, KafkaTaskResult), answer
        seconds, ours = _best(lambda state=state: ha.assign(state))  # type: ignore[misc]
        assert isinstance(ours, TaskAssignment)
        out.append(
            _task_row(case, "streamtasks high_availability", seconds, state, task_quality(state, ours))
        )
        theirs = task_quality(state, answer.assignment, warmups=answer.warmups, followup=answer.followup)
        out.append(_task_row(case, "Kafka HighAvailabilityTaskAssignor", min(answer.seconds), state, theirs))
    assignor = CooperativeStickyAssignor()
    for (case, group), answer in zip(groups, kafka[len(states) :], strict=True):
        assert isinstance(answer, KafkaGroupResult), answer
        seconds, handed = _best(
            lambda group=group: cooperative.assign(assignor, group, RebalanceProtocol.COOPERATIVE)  # type: ignore[misc]
        )
        target = assignor.assign(group)
        for who, secs, q in (
            ("streamtasks cooperative_sticky", seconds, group_quality(group, handed.members, target.members)),
            (
                "Kafka CooperativeStickyAssignor",
                min(answer.seconds),
                group_quality(group, answer.members, answer.target),
            ),
        ):
            out.append(
                {
                    "assignor": "partition",
                    "case": case,
                    "implementation": who,
                    "seconds": secs,
                    "spread": q.spread,
                    "moved": q.moved,
                    "withheld": q.withheld,
                    "followup": q.followup,
                }
            )
    return out


def _cell(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.4f}" if value < 10 else f"{value:.1f}"
    return str(value)


TASK_COLUMNS = (
    ("case", "case"),
    ("implementation", "implementation"),
    ("seconds", "seconds"),
    ("active", "active max-min"),
    ("replicas", "all copies max-min"),
    ("moved", "moved"),
    ("colocated", "co-located"),
    ("warmups", "warm-ups"),
    ("followup", "follow-up"),
)
PARTITION_COLUMNS = (
    ("case", "case"),
    ("implementation", "implementation"),
    ("seconds", "seconds"),
    ("spread", "max-min"),
    ("moved", "moved"),
    ("withheld", "withheld"),
    ("followup", "follow-up"),
)


def render(table: list[dict[str, object]]) -> str:
    """Two tables (task assignors, partition assignors) with the oracle's versions on top."""
    parts = [f"Kafka's assignors: {oracle_versions()}"]
    for kind, columns in (("task", TASK_COLUMNS), ("partition", PARTITION_COLUMNS)):
        picked = [r for r in table if r["assignor"] == kind]
        if picked:
            parts.append(
                format_table([h for _, h in columns], [[_cell(r.get(k)) for k, _ in columns] for r in picked])
            )
    return "\n\n".join(parts)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="100 x 1,000 only")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    table = rows(quick=args.quick)
    print(json.dumps(table, indent=2, default=str) if args.json else render(table))
    return 0


if __name__ == "__main__":
    sys.exit(main())
