"""Partition assignor benchmarks: streamtasks' range / round_robin / sticky / cooperative_sticky /
uniform and ``cooperative.adjust``, next to kafka-python 3's assignors (a peer nobody here wrote).

Run it alone with ``python benchmarks/bench_partition.py [--quick]``; ``benchmarks/assignors.py``
collects :func:`rows`. Each row is the best of several runs (one run for kafka-python's sticky
assignors on the big shape, which take tens of seconds), timed with the garbage collector on,
as in a real leader, after a ``gc.collect()``. ``max_minus_min`` is the largest minus the
smallest number of partitions per member; ``moved`` counts partitions taken from the member
that had them in the previous assignment (``None`` for a fresh group).

Shapes: every member subscribes to every topic; partitions are spread evenly over the topics.
"One member added": the previous assignment is streamtasks' own balanced assignment of the
same group (kafka-python rows: kafka-python's own), every old member reports it as owned
(generation 1), and one new member joins.
"""

from __future__ import annotations

import argparse
import gc
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from types import SimpleNamespace
from typing import Any, TypeVar

from _paths import project_imports  # benchmarks/assignors.py would shadow the package

with project_imports():
    from assignors import cooperative
    from assignors.partition.range import RangeAssignor
    from assignors.partition.round_robin import RoundRobinAssignor
    from assignors.partition.sticky import CooperativeStickyAssignor, StickyAssignor
    from assignors.partition.types import (
        GroupSubscription,
        PartitionAssignor,
        RebalanceProtocol,
        Subscription,
    )
    from assignors.partition.uniform import UniformAssignor
    from topology.ids import TopicPartition
from _table import format_table

__all__ = ["rows"]

T = TypeVar("T")
Owned = Mapping[str, Sequence[TopicPartition]]

#: Row labels use the registry names (the assignors' ``name`` is Kafka's JoinGroup protocol name).
LABEL = {
    "range": "range",
    "roundrobin": "round_robin",
    "sticky": "sticky",
    "cooperative-sticky": "cooperative_sticky",
    "uniform": "uniform",
}

STICKY_GOAL = 0.1  # seconds, issue #2: cooperative_sticky / sticky, 1,000 x 10,000 over 10 topics
UNIFORM_GOAL = 0.2  # seconds, issue #2: uniform, 10,000 x 100,000 over 100 topics


# -- shapes and measurements ----------------------------------------------------------------------


def _shape(members: int, partitions: int, topics: int) -> tuple[list[str], dict[str, int]]:
    names = [f"topic-{i:03d}" for i in range(topics)]
    return [f"member-{i:05d}" for i in range(members)], {t: partitions // topics for t in names}


def _case(members: int, partitions: int, topics: int, what: str) -> str:
    return f"{members} members × {partitions} partitions / {topics} topics, {what}"


def _copy(text: str) -> str:
    """An equal string that is a new object, as a decoder off the wire produces."""
    return text.encode().decode()


def _group(
    members: Sequence[str],
    counts: dict[str, int],
    owned: Owned | None = None,
    subscriptions: Mapping[str, Sequence[str]] | None = None,
) -> GroupSubscription:
    """The group as a leader decodes it: every member's topic tuple, topic names and owned
    partitions are its own objects (nothing shared between members)."""
    owned = owned or {}
    return GroupSubscription(
        members={
            m: Subscription(
                topics=tuple(map(_copy, subscriptions[m] if subscriptions else counts)),
                owned_partitions=tuple(
                    TopicPartition(_copy(tp.topic), tp.partition) for tp in owned.get(m, ())
                ),
                generation=1 if owned.get(m) else -1,
            )
            for m in members
        },
        partitions_per_topic=counts,
    )


def _mixed(members: Sequence[str], counts: dict[str, int], each: int) -> dict[str, list[str]]:
    """Member ``i`` subscribes to topics ``(7 i + 3 j) mod T`` for ``j < each``."""
    topics = list(counts)
    return {m: [topics[(7 * i + 3 * j) % len(topics)] for j in range(each)] for i, m in enumerate(members)}


def _best(run: Callable[[], T], repeat: int) -> tuple[float, T]:
    best, result = float("inf"), None
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        result = run()
        best = min(best, time.perf_counter() - start)
    assert result is not None
    return best, result


def _spread(assignment: Owned) -> int:
    sizes = [len(tps) for tps in assignment.values()]
    return max(sizes) - min(sizes) if sizes else 0


def _moved(before: Owned, after: Owned) -> int:
    return sum(len(set(tps) - set(after.get(m, ()))) for m, tps in before.items())


def _row(
    case: str,
    implementation: str,
    seconds: float,
    goal: float | None,
    after: Owned,
    *,
    before: Owned | None = None,
) -> dict[str, object]:
    return {
        "suite": "partition",
        "case": case,
        "implementation": implementation,
        "seconds": seconds,
        "goal_seconds": goal,
        "max_minus_min": _spread(after),
        "moved": None if before is None else _moved(before, after),
    }


# -- kafka-python 3 -------------------------------------------------------------------------------


def _kafka_python() -> SimpleNamespace:
    with warnings.catch_warnings():
        # kafka-python 3 reads its schemas with a deprecated importlib.resources call.
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor as KCoop
        from kafka.coordinator.assignors.range import RangePartitionAssignor as KRange
        from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor as KRoundRobin
        from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor as KSticky
        from kafka.coordinator.assignors.sticky.user_data import StickyAssignorUserData
        from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription
    return SimpleNamespace(
        range=KRange,
        round_robin=KRoundRobin,
        sticky=KSticky,
        cooperative_sticky=KCoop,
        user_data=StickyAssignorUserData,
        subscription=ConsumerProtocolSubscription,
    )


class _Cluster:
    def __init__(self, counts: dict[str, int]) -> None:
        self._counts = counts

    def topics(self) -> set[str]:
        return set(self._counts)

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        count = self._counts.get(topic)
        return None if count is None else set(range(count))


def _by_topic(tps: Sequence[TopicPartition]) -> list[tuple[str, list[int]]]:
    out: dict[str, list[int]] = {}
    for tp in tps:
        out.setdefault(tp.topic, []).append(tp.partition)
    return sorted(out.items())


def _kp_members(
    kp: SimpleNamespace, kind: str, members: Sequence[str], counts: dict[str, int], owned: Owned | None
) -> list[SimpleNamespace]:
    topics, owned = list(counts), owned or {}
    out = []
    for m in members:
        mine = owned.get(m, ())
        if kind == "cooperative_sticky":
            sub = kp.subscription.TopicPartition
            metadata = kp.subscription(
                version=2,
                topics=topics,
                user_data=b"",
                generation_id=1 if mine else -1,
                owned_partitions=[sub(topic=t, partitions=ps) for t, ps in _by_topic(mine)],
            )
        elif kind == "sticky" and mine:
            data = kp.user_data(previous_assignment=_by_topic(mine), generation=1)
            metadata = kp.subscription(version=0, topics=topics, user_data=data)
        else:
            metadata = kp.subscription(version=0, topics=topics, user_data=b"")
        out.append(SimpleNamespace(member_id=m, group_instance_id=None, metadata=metadata))
    return out


def _kp_assign(
    kp: SimpleNamespace,
    kind: str,
    members: Sequence[str],
    counts: dict[str, int],
    owned: Owned | None,
    *,
    repeat: int,
) -> tuple[float, dict[str, tuple[TopicPartition, ...]]]:
    cluster = _Cluster(counts)
    group = _kp_members(kp, kind, members, counts, owned)
    assignor_class: Any = getattr(kp, kind)
    seconds, result = _best(lambda: assignor_class().assign(cluster, group), repeat)
    return seconds, {
        m: tuple(TopicPartition(tp.topic, tp.partition) for tp in a.partitions()) for m, a in result.items()
    }


# -- the rows -------------------------------------------------------------------------------------


def _ours(
    assignor: PartitionAssignor,
    group: GroupSubscription,
    repeat: int,
    protocol: RebalanceProtocol | None = None,
) -> tuple[float, Owned]:
    if protocol is None:
        seconds, result = _best(lambda: assignor.assign(group), repeat)
    else:
        seconds, result = _best(lambda: cooperative.assign(assignor, group, protocol), repeat)
    return seconds, result.members


def _sticky_rows(
    kp: SimpleNamespace, shape: tuple[int, int, int], repeat: int, goal: float | None, peer_runs: int
) -> list[dict[str, object]]:
    """sticky and cooperative_sticky, fresh and one member added, with kafka-python's sticky
    (``peer_runs`` runs; 0: leave it out) on the same shape."""
    n, p, t = shape
    members, counts = _shape(n, p, t)
    fresh_case, added_case = _case(n, p, t, "fresh"), _case(n, p, t, "one member added")
    out = []
    fresh = _group(members, counts)
    for assignor in (StickyAssignor(), CooperativeStickyAssignor()):
        seconds, result = _ours(assignor, fresh, repeat)
        out.append(_row(fresh_case, f"streamtasks {LABEL[assignor.name]}", seconds, goal, result))
    previous = CooperativeStickyAssignor().assign(fresh).members
    joined = [*members, "member-new"]
    added = _group(joined, counts, previous)
    for assignor in (StickyAssignor(), CooperativeStickyAssignor()):
        seconds, result = _ours(assignor, added, repeat)
        out.append(
            _row(added_case, f"streamtasks {LABEL[assignor.name]}", seconds, goal, result, before=previous)
        )
    seconds, result = _ours(CooperativeStickyAssignor(), added, repeat, RebalanceProtocol.COOPERATIVE)
    out.append(
        _row(
            added_case,
            "streamtasks cooperative_sticky via cooperative.assign (round 1 of 2)",
            seconds,
            None,
            result,
            before=previous,
        )
    )
    if peer_runs:
        seconds, kp_fresh = _kp_assign(kp, "sticky", members, counts, None, repeat=peer_runs)
        out.append(_row(fresh_case, "kafka-python 3 StickyPartitionAssignor", seconds, None, kp_fresh))
    return out


def _peer_rows(kp: SimpleNamespace, shape: tuple[int, int, int], repeat: int) -> list[dict[str, object]]:
    """kafka-python's sticky assignors, fresh and one member added, where they are cheap."""
    n, p, t = shape
    members, counts = _shape(n, p, t)
    joined = [*members, "member-new"]
    out = []
    for kind, label in (
        ("sticky", "StickyPartitionAssignor"),
        ("cooperative_sticky", "CooperativeStickyAssignor"),
    ):
        seconds, fresh = _kp_assign(kp, kind, members, counts, None, repeat=repeat)
        out.append(_row(_case(n, p, t, "fresh"), f"kafka-python 3 {label}", seconds, None, fresh))
        seconds, added = _kp_assign(kp, kind, joined, counts, fresh, repeat=repeat)
        out.append(
            _row(
                _case(n, p, t, "one member added"),
                f"kafka-python 3 {label}",
                seconds,
                None,
                added,
                before=fresh,
            )
        )
    return out


def _classic_rows(kp: SimpleNamespace, shape: tuple[int, int, int], repeat: int) -> list[dict[str, object]]:
    n, p, t = shape
    members, counts = _shape(n, p, t)
    case = _case(n, p, t, "fresh")
    out = []
    for assignor, kind, label in (
        (RangeAssignor(), "range", "RangePartitionAssignor"),
        (RoundRobinAssignor(), "round_robin", "RoundRobinPartitionAssignor"),
    ):
        seconds, result = _ours(assignor, _group(members, counts), repeat)
        out.append(_row(case, f"streamtasks {LABEL[assignor.name]}", seconds, None, result))
        seconds, theirs = _kp_assign(kp, kind, members, counts, None, repeat=repeat)
        out.append(_row(case, f"kafka-python 3 {label}", seconds, None, theirs))
    return out


def _uniform_rows(shape: tuple[int, int, int], repeat: int) -> list[dict[str, object]]:
    n, p, t = shape
    members, counts = _shape(n, p, t)
    fresh = _group(members, counts)
    seconds, result = _ours(UniformAssignor(), fresh, repeat)
    out = [_row(_case(n, p, t, "full (fresh)"), "streamtasks uniform", seconds, UNIFORM_GOAL, result)]
    added = _group([*members, "member-new"], counts, result)
    case = _case(n, p, t, "incremental (one member added)")
    seconds, target = _ours(UniformAssignor(), added, repeat)
    out.append(_row(case, "streamtasks uniform", seconds, UNIFORM_GOAL, target, before=result))
    owned = cooperative.owned_from(added)
    seconds, adjusted = _best(lambda: cooperative.adjust(owned, target), repeat)
    out.append(
        _row(
            case,
            "streamtasks cooperative.adjust of that target",
            seconds,
            None,
            adjusted.assignment,
            before=result,
        )
    )
    return out


def _mixed_rows(
    shape: tuple[int, int, int], each: int, assignors: Sequence[PartitionAssignor], repeat: int
) -> list[dict[str, object]]:
    """Differing subscriptions (the heterogeneous algorithm): fresh, and one member added."""
    n, p, t = shape
    members, counts = _shape(n, p, t)
    joined = [*members, "member-new"]
    subscriptions = _mixed(joined, counts, each)
    what = f"mixed subscriptions ({each} of the {t} topics each)"
    out = []
    for assignor in assignors:
        fresh = _group(members, counts, subscriptions=subscriptions)
        seconds, result = _ours(assignor, fresh, repeat)
        out.append(
            _row(
                _case(n, p, t, f"{what}, fresh"), f"streamtasks {LABEL[assignor.name]}", seconds, None, result
            )
        )
        added = _group(joined, counts, result, subscriptions=subscriptions)
        seconds, after = _ours(assignor, added, repeat)
        case = _case(n, p, t, f"{what}, one member added")
        out.append(_row(case, f"streamtasks {LABEL[assignor.name]}", seconds, None, after, before=result))
    return out


def rows(quick: bool = False) -> list[dict[str, object]]:
    """Every benchmark row. ``quick``: fewer repeats, and kafka-python's sticky assignor only
    on the small shape (its 1,000 x 10,000 run takes about a minute)."""
    repeat = 3 if quick else 7
    kp = _kafka_python()
    small = (100, 1000, 10)
    out = _sticky_rows(kp, (1000, 10_000, 10), repeat, STICKY_GOAL, peer_runs=0 if quick else 1)
    out += _sticky_rows(kp, small, repeat, None, peer_runs=0)
    out += _peer_rows(kp, small, 1 if quick else 3)
    out += _classic_rows(kp, (1000, 10_000, 10), repeat)
    out += _uniform_rows((10_000, 100_000, 100), repeat)
    out += _mixed_rows((1000, 10_000, 10), 5, [CooperativeStickyAssignor()], repeat)
    out += _mixed_rows((10_000, 100_000, 100), 10, [UniformAssignor()], 3 if quick else 5)
    return out


def _print(table: list[dict[str, object]]) -> None:
    headers = ["case", "implementation", "seconds", "goal", "max-min", "moved"]
    lines = [
        [
            str(r["case"]),
            str(r["implementation"]),
            f"{r['seconds']:.4f}",
            "" if r["goal_seconds"] is None else f"≤ {r['goal_seconds']}",
            str(r["max_minus_min"]),
            "" if r["moved"] is None else str(r["moved"]),
        ]
        for r in table
    ]
    print(format_table(headers, lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="fewer repeats; skip the slow kafka-python run")
    _print(rows(quick=parser.parse_args().quick))


if __name__ == "__main__":
    main()
