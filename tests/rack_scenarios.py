"""Applications spread over racks, for KIP-925's rack-aware placement against Kafka Streams'.

:func:`rack_state` builds one: ``processes`` processes round-robin over ``racks`` racks, and
``tasks`` tasks, two thirds stateful (subtopology 0, reading two co-partitioned topics) and a
third stateless (subtopology 1, one topic); each partition's ``replication`` replicas sit on
racks drawn from ``random.Random(seed)``. ``previous``: every process ran a share of the tasks
(a shuffled deal, so not the rack-aware one), as after a restart of the whole application.
Each stateful task has a changelog partition (``app-store-changelog``) whose replicas sit on
racks drawn from their own generator (the draws above do not change); ``standbys``:
``num_standby_replicas``; ``rack_of``: per process its rack's index instead of round-robin
(uneven racks).
The oracle test (``tests/assignors/test_rack_oracle.py``) and the benchmark
(``benchmarks/bench_rack.py``) use it.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Sequence

from assignors.types import RUNNING_LAG, ApplicationState, AssignmentConfigs, ClientState, TaskSpec
from topology.ids import TaskId, TopicPartition

__all__ = ["rack_state"]


def rack_state(
    processes: int,
    tasks: int,
    *,
    racks: int = 3,
    replication: int = 1,
    strategy: str = "min_traffic",
    previous: bool = False,
    capacity: int = 1,
    seed: int = 0,
    standbys: int = 0,
    rack_of: Sequence[int] | None = None,
) -> ApplicationState:
    rng = random.Random(seed)
    names = [f"rack-{r}" for r in range(racks)]
    stateful = tasks * 2 // 3
    specs = [
        TaskSpec(
            id=TaskId(0, p),
            is_stateful=True,
            source_partitions=(TopicPartition("orders", p), TopicPartition("customers", p)),
            changelog_partitions=(TopicPartition("app-store-changelog", p),),
        )
        for p in range(stateful)
    ]
    specs += [
        TaskSpec(id=TaskId(1, p), is_stateful=False, source_partitions=(TopicPartition("clicks", p),))
        for p in range(tasks - stateful)
    ]
    partition_racks = {
        tp: frozenset(rng.sample(names, min(replication, racks))) for s in specs for tp in s.source_partitions
    }
    changelog_rng = random.Random(f"changelog-{seed}")
    partition_racks |= {
        tp: frozenset(changelog_rng.sample(names, min(replication, racks)))
        for s in specs
        for tp in s.changelog_partitions
    }
    ids = [uuid.UUID(int=rng.getrandbits(128)) for _ in range(processes)]
    owned: list[list[TaskId]] = [[] for _ in range(processes)]
    if previous:
        deal = [s.id for s in specs]
        rng.shuffle(deal)
        for k, task in enumerate(deal):
            owned[k % processes].append(task)
    clients = [
        ClientState(
            process_id=pid,
            capacity=capacity,
            rack=names[n % racks if rack_of is None else rack_of[n]],
            previous_active=frozenset(owned[n]),
            task_lags={t: RUNNING_LAG for t in owned[n] if t.subtopology == 0},
        )
        for n, pid in enumerate(ids)
    ]
    return ApplicationState.build(
        specs,
        clients,
        AssignmentConfigs(rack_aware_assignment_strategy=strategy, num_standby_replicas=standbys),
        partition_racks=partition_racks,
    )
