"""KIP-925's rack-aware active placement: the least cost over processes (brute force), counts
kept, deterministic; in the high-availability assignor: less cross-rack traffic, same balance."""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from assignors.task.high_availability import HighAvailabilityTaskAssignor
from assignors.task.indexed import index_state
from assignors.task.quality import active_spread
from assignors.task.rack_aware import RackView, cross_rack_traffic, optimize_actives, rack_view
from assignors.types import ApplicationState, AssignmentConfigs, AssignmentError, ClientState, TaskSpec
from assignors.validate import validate_task_assignment
from streamtasks.errors import AssignorInputError
from tests.assignors.task.scenarios import pid
from topology.ids import TaskId, TopicPartition

HA = HighAvailabilityTaskAssignor()


def _kafka_cost(view: RackView, owner: list[int], before: list[int], traffic: int, non_overlap: int) -> int:
    """Kafka Streams' cost: per task its cross-rack partitions, and ``non_overlap`` off the
    process it had (over processes, not racks)."""
    return sum(
        traffic * view.cross[i][view.proc_rack[p]] + (non_overlap if p != before[i] else 0)
        for i, p in enumerate(owner)
    )


@st.composite
def views(draw: st.DrawFn) -> tuple[RackView, list[int], bool]:
    racks = draw(st.integers(1, 3))
    procs = draw(st.integers(1, 4))
    n = draw(st.integers(1, 6))
    balance = draw(st.booleans())
    view = RackView(
        proc_rack=[draw(st.integers(0, racks - 1)) for _ in range(procs)],
        num_racks=racks,
        cross=[[draw(st.integers(0, 3)) for _ in range(racks)] for _ in range(n)],
        subtopology=[draw(st.integers(0, 1)) for _ in range(n)],
        balance_subtopology=balance,
    )
    owner = [draw(st.integers(0, procs - 1)) for _ in range(n)]
    return view, owner, balance


@given(views(), st.integers(0, 10), st.integers(0, 3))
def test_the_least_kafka_cost_with_the_balance_kept(
    case: tuple[RackView, list[int], bool], traffic: int, non_overlap: int
) -> None:
    view, before, balance = case
    procs = len(view.proc_rack)
    owner = list(before)
    optimize_actives(
        view, range(len(owner)), owner, [1] * procs, traffic_cost=traffic, non_overlap_cost=non_overlap
    )
    n = len(before)
    per_sub = Counter(view.subtopology)
    count = [before.count(p) for p in range(procs)]
    # one capacity class: processes may trade the one more task when the counts differ by one
    flexible = max(count) - min(count) <= 1

    def allowed(o: Sequence[int]) -> bool:
        now = [list(o).count(p) for p in range(procs)]
        if now != count and not (flexible and sorted(now) == sorted(count)):
            return False
        if not balance:
            return True
        # Kafka's balance_subtopology caps: ceil(most_c * n_s / n) of subtopology s on c
        most = [c + 1 if flexible and c == min(count) and max(count) > c else c for c in count]
        taken = Counter((p, view.subtopology[i]) for i, p in enumerate(o))
        return all(k <= -(-most[p] * per_sub[s] // n) for (p, s), k in taken.items())

    assert allowed(owner)
    best = min(
        _kafka_cost(view, list(o), before, traffic, non_overlap)
        for o in itertools.product(range(procs), repeat=n)
        if allowed(o)
    )
    assert _kafka_cost(view, owner, before, traffic, non_overlap) == best
    again = list(before)
    optimize_actives(
        view, range(len(again)), again, [1] * procs, traffic_cost=traffic, non_overlap_cost=non_overlap
    )
    assert again == owner


def _tp(topic: str, n: int) -> TopicPartition:
    return TopicPartition(topic, n)


def _state(
    strategy: str,
    *,
    procs: int = 6,
    partitions: int = 12,
    stateless: int = 6,
    racks: tuple[str, ...] = ("a", "b", "c"),
    proc_racks: list[str | None] | None = None,
) -> ApplicationState:
    tasks = [
        TaskSpec(id=TaskId(0, p), is_stateful=True, source_partitions=(_tp("in", p),))
        for p in range(partitions)
    ] + [
        TaskSpec(id=TaskId(1, p), is_stateful=False, source_partitions=(_tp("other", p),))
        for p in range(stateless)
    ]
    # partition p's replicas sit on rack p % 3 only (replication 1): one rack reads it locally
    partition_racks = {_tp("in", p): {racks[(p * 7) % len(racks)]} for p in range(partitions)}
    partition_racks |= {_tp("other", p): {racks[(p * 5) % len(racks)]} for p in range(stateless)}
    chosen = proc_racks if proc_racks is not None else [racks[n % len(racks)] for n in range(procs)]
    clients = [ClientState(process_id=pid(n), rack=r) for n, r in enumerate(chosen)]
    return ApplicationState.build(
        tasks,
        clients,
        AssignmentConfigs(rack_aware_assignment_strategy=strategy),
        partition_racks=partition_racks,
    )


@pytest.mark.parametrize("strategy", ["min_traffic", "balance_subtopology"])
def test_the_assignor_reads_every_partition_on_its_rack_when_it_can(strategy: str) -> None:
    off, on = _state("none"), _state(strategy)
    plain, aware = HA.assign(off), HA.assign(on)
    assert validate_task_assignment(on, aware) is AssignmentError.NONE
    assert cross_rack_traffic(off, plain) > 0
    assert cross_rack_traffic(on, aware) == 0
    assert active_spread(on, aware) == active_spread(off, plain) == 0
    assert HA.assign(on) == aware  # deterministic


def test_off_without_a_rack_on_every_process_or_partition() -> None:
    state = _state("min_traffic", proc_racks=["a", "b", None, "a", "b", "c"])
    assert rack_view(state, index_state(state)) is None
    unknown = ApplicationState.build(
        [TaskSpec(id=TaskId(0, 0), is_stateful=True, source_partitions=(_tp("in", 0),))],
        [ClientState(process_id=pid(0), rack="a")],
        AssignmentConfigs(rack_aware_assignment_strategy="min_traffic"),
    )
    assert rack_view(unknown, index_state(unknown)) is None


def test_bad_rack_settings_are_one_clear_error() -> None:
    with pytest.raises(AssignorInputError, match="rack_aware_assignment_strategy"):
        AssignmentConfigs(rack_aware_assignment_strategy="closest")
    with pytest.raises(AssignorInputError, match="traffic_cost"):
        AssignmentConfigs(rack_aware_assignment_traffic_cost=-1)
    with pytest.raises(AssignorInputError, match="racks of partition"):
        ApplicationState.build([], [], partition_racks={_tp("in", 0): "a"})
