"""The differential test's verdicts, counted over many drawn scenarios and several seeds.

    nice .venv/bin/python benchmarks/oracle_verdicts.py --seeds 1-10 --batches 60

``tests/assignors/test_oracle.py`` checks, batch by batch, that streamtasks' high_availability and
cooperative_sticky are never worse than Kafka's assignors except where a named decision explains
it. This script draws the same scenarios (the test's own strategies, ``batches`` lists of 25 per
hypothesis seed, as the test draws them), runs Kafka's assignors on them in one JVM per seed and
kind, and counts: the test's verdicts (``none`` where streamtasks is no worse, else the decision;
``UNEXPLAINED`` where the test would fail, with the scenario printed), and where streamtasks is
better or worse than Kafka on balance and on moves, with the totals moved and, for rebalances,
the rounds that need a follow-up. Kinds: ``task`` (rebalances), ``group`` (consumer groups with
different subscriptions) and ``same`` (one set of topics).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from _paths import project_imports

with project_imports():
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.assignors.test_oracle
    from hypothesis import HealthCheck, Phase, given, seed, settings
    from hypothesis import strategies as st

    import tests.assignors.test_oracle as oracle_test
    from tests.oracle import (
        GroupCase,
        KafkaFailure,
        KafkaGroupResult,
        KafkaTaskResult,
        TaskCase,
        group_quality,
        run_oracle,
        streamtasks_group,
        task_quality,
    )


def draw(strategy: st.SearchStrategy[Any], seed_value: int, batches: int) -> list[Any]:
    """``batches`` lists of the test's batch size, drawn as the test draws them."""
    drawn: list[Any] = []

    @seed(seed_value)
    @settings(
        max_examples=batches,
        database=None,
        deadline=None,
        phases=(Phase.generate,),
        suppress_health_check=list(HealthCheck),
    )
    @given(st.lists(strategy, min_size=oracle_test.BATCH, max_size=oracle_test.BATCH))
    def collect(batch: list[Any]) -> None:
        drawn.extend(batch)

    collect()
    return drawn


def _count(
    counts: Counter[str],
    verdict: Callable[[], Any],
    show: int,
    ours: tuple[Any, int],
    theirs: tuple[Any, int],
) -> None:
    """Count the test's verdict (``verdict()``: a decision, a gap, ``None``, or it raises) and
    the comparison of (spread, moved) with Kafka's."""
    try:
        found = verdict()
        counts[found.name if found else "none"] += 1
    except AssertionError as unexplained:
        counts["UNEXPLAINED"] += 1
        if counts["UNEXPLAINED"] <= show:
            print(unexplained, file=sys.stderr)
    counts["scenarios"] += 1
    (spread, moved), (kafka_spread, kafka_moved) = ours, theirs
    counts["balance better"] += spread < kafka_spread
    counts["balance worse"] += spread > kafka_spread
    counts["moves better"] += moved < kafka_moved
    counts["moves worse"] += moved > kafka_moved
    counts["worse on both"] += spread > kafka_spread and moved > kafka_moved
    counts["moved"] += moved
    counts["moved by Kafka"] += kafka_moved


def tasks(seed_value: int, batches: int, show: int) -> Counter[str]:
    states = draw(oracle_test.rebalances(), seed_value, batches)
    counts: Counter[str] = Counter()
    for state, kafka in zip(states, run_oracle([TaskCase(s) for s in states]), strict=True):
        assert isinstance(kafka, KafkaTaskResult), kafka
        ours = oracle_test.HA.assign(state)
        q = task_quality(state, ours)
        theirs = task_quality(state, kafka.assignment, warmups=kafka.warmups, followup=kafka.followup)
        _count(
            counts,
            partial(oracle_test.task_verdict, state, ours, q, theirs, kafka.assignment),
            show,
            (q.active_spread, q.moved),
            (theirs.active_spread, theirs.moved),
        )
        counts["follow-ups"] += q.followup
        counts["follow-ups by Kafka"] += theirs.followup
    return counts


def groups(seed_value: int, batches: int, show: int, *, same_topics: bool) -> Counter[str]:
    drawn = draw(oracle_test.consumer_groups(same_topics=same_topics), seed_value, batches)
    counts: Counter[str] = Counter()
    for group, kafka in zip(drawn, run_oracle([GroupCase(g) for g in drawn]), strict=True):
        if isinstance(kafka, KafkaFailure) or not oracle_test._valid_kafka_group(group, kafka):
            counts["kafka invalid"] += 1
            continue
        assert isinstance(kafka, KafkaGroupResult), kafka
        handed, target = streamtasks_group(group)
        q = group_quality(group, handed.members, target.members)
        theirs = group_quality(group, kafka.members, kafka.target)
        _count(
            counts,
            partial(oracle_test.group_verdict, group, q, theirs, target.members, kafka.target),
            show,
            (q.spread, q.moved),
            (theirs.spread, theirs.moved),
        )
    return counts


def _seeds(text: str) -> list[int]:
    out: list[int] = []
    for part in text.split(","):
        first, _, last = part.partition("-")
        out += range(int(first), int(last or first) + 1)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seeds", type=_seeds, default=_seeds("1-3"), help="e.g. 1-10 or 1,3,5")
    parser.add_argument("--batches", type=int, default=20, help="batches of 25 scenarios per seed")
    parser.add_argument("--kinds", default="task,group,same", help="task, group, same")
    parser.add_argument("--show", type=int, default=1, help="unexplained scenarios to print per seed")
    args = parser.parse_args(argv)
    unexplained = 0
    for kind in args.kinds.split(","):
        total: Counter[str] = Counter()
        for s in args.seeds:
            if kind == "task":
                counts = tasks(s, args.batches, args.show)
            else:
                counts = groups(s, args.batches, args.show, same_topics=kind == "same")
            print(f"{kind} seed {s}: {dict(sorted(counts.items()))}")
            total.update(counts)
        print(f"{kind} all seeds: {dict(sorted(total.items()))}")
        unexplained += total["UNEXPLAINED"]
    return 1 if unexplained else 0


if __name__ == "__main__":
    sys.exit(main())
