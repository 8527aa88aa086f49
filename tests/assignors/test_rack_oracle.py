"""KIP-925 against Kafka Streams: on the same applications spread over racks, streamtasks'
high_availability reads no more input partitions across racks than Kafka Streams'
HighAvailabilityTaskAssignor with its RackAwareTaskAssignor, with no larger spread, moves no
more actives, and its standbys read no more changelog partitions across racks (skipped without
Java / Maven, like the other oracle tests)."""

from __future__ import annotations

import pytest

from assignors.task.high_availability import HighAvailabilityTaskAssignor
from assignors.task.quality import active_spread, moved_actives
from assignors.task.rack_aware import cross_rack_traffic, standby_changelog_traffic
from assignors.types import ApplicationState, AssignmentError
from assignors.validate import validate_task_assignment
from tests.oracle import KafkaTaskResult, OracleUnavailable, TaskCase, oracle_program, run_oracle
from tests.rack_scenarios import rack_state

try:
    oracle_program()
except OracleUnavailable as exc:  # pragma: no cover - depends on the machine
    pytest.skip(f"Kafka's assignors cannot run here: {exc}", allow_module_level=True)

CASES: dict[str, ApplicationState] = {
    "fresh 6 x 36": rack_state(6, 36, seed=11),
    "fresh 9 x 90, replication 2": rack_state(9, 90, seed=12, replication=2),
    "restart 6 x 48": rack_state(6, 48, seed=13, previous=True),
    "balance_subtopology 6 x 36": rack_state(6, 36, seed=14, strategy="balance_subtopology"),
    # bench_rack's 30 x 300 fresh: Kafka 146 (140 + 6), two phases here read 148 (140 + 8)
    "fresh 30 x 300": rack_state(30, 300, seed=1),
    # Kafka's optimizeStandbyTasks against ours (changelogs described to Kafka by the oracle)
    "standbys 1, restart 9 x 90": rack_state(9, 90, seed=15, standbys=1, previous=True),
    "standbys 2, uneven racks 8 x 48": rack_state(
        8, 48, seed=16, standbys=2, rack_of=[0, 0, 0, 0, 1, 1, 2, 2]
    ),
}


@pytest.fixture(scope="module")
def kafka() -> dict[str, KafkaTaskResult]:
    answers = run_oracle([TaskCase(s) for s in CASES.values()])
    out: dict[str, KafkaTaskResult] = {}
    for name, answer in zip(CASES, answers, strict=True):
        assert isinstance(answer, KafkaTaskResult), answer
        assert answer.rack_aware, f"{name}: Kafka's RackAwareTaskAssignor did not run"
        out[name] = answer
    return out


@pytest.mark.parametrize("name", list(CASES))
def test_no_more_cross_rack_traffic_than_kafka_streams(name: str, kafka: dict[str, KafkaTaskResult]) -> None:
    state = CASES[name]
    ours = HighAvailabilityTaskAssignor().assign(state)
    theirs = kafka[name].assignment
    assert validate_task_assignment(state, ours) is AssignmentError.NONE
    assert cross_rack_traffic(state, ours) <= cross_rack_traffic(state, theirs)
    assert active_spread(state, ours) <= active_spread(state, theirs)
    assert moved_actives(state, ours) <= moved_actives(state, theirs)
    assert standby_changelog_traffic(state, ours) <= standby_changelog_traffic(state, theirs)
