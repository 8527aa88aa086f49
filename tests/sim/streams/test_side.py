"""The streams-group world (``--protocol streams`` / ``streams-client``): the CI batch, the
warm-up hand-over against the sticky assignor's cold move, fail-over by log replay, and that
the checks catch a coordinator that gives a task to two members."""

from __future__ import annotations

import os
import random

import pytest

from streamtasks.coordinator.streams import StreamsTargetMetadataRecord
from streamtasks.sim.scenario import FAULT_KINDS, Step
from streamtasks.sim.streams import (
    MODES,
    StreamsSettings,
    StreamsSide,
    run_streams_batch,
    run_streams_scenario,
    streams_scenario,
    streams_world,
)
from tests.sim.helpers import scripted

#: Seeds per protocol in CI (every fault kind); the soak figures are in docs/simulation.md.
CI_SEEDS = 60


def _seed_base() -> int:
    return 0 if os.environ.get("CI") else random.randrange(1_000_000)


@pytest.mark.parametrize("mode", MODES)
def test_ci_batch_has_no_violations(mode: str) -> None:
    base = _seed_base()
    summary = run_streams_batch(mode, range(base, base + CI_SEEDS), faults=frozenset(FAULT_KINDS))
    assert [f.report() for f in summary.failures] == [], f"seed base {base}"
    assert summary.scenarios == CI_SEEDS
    assert summary.group_epochs > 0
    assert summary.failovers > 0
    assert summary.internal_topics_created > 0


def test_runs_are_deterministic() -> None:
    scenario = streams_scenario(11, "streams-client", frozenset(FAULT_KINDS))
    first = run_streams_scenario(scenario, "streams-client")
    assert first == run_streams_scenario(scenario, "streams-client")
    assert first.events > 0


def _scale_out(mode: str) -> tuple[int, int]:
    """m1 joins after m0 has built 60 s of state: (tasks m1 took over, of them warm)."""
    steps = [Step(at_ms=0, op="start", member="m0"), Step(at_ms=60_000, op="start", member="m1")]
    scenario = scripted(steps, topics=(("clicks", 4),))
    world = streams_world(scenario, mode, StreamsSettings(standby_replicas=0))
    world.advance(200_000)  # past the probing rebalance (60 s after m1's warm-ups were placed)
    assert world.violations == []
    m1 = world.current["m1"]
    assert len(m1.active) == 2
    return m1.took_over, m1.took_over_warm


def test_the_high_availability_assignor_hands_tasks_over_warm() -> None:
    took, warm = _scale_out("streams-client")
    assert (took, warm) == (2, 2)


def test_the_sticky_assignor_moves_tasks_cold() -> None:
    took, warm = _scale_out("streams")
    assert (took, warm) == (2, 0)


def test_a_failover_mid_rebalance_loads_the_same_group() -> None:
    steps = [
        Step(at_ms=0, op="start", member="m0"),
        Step(at_ms=0, op="start", member="m1", static=True),
        Step(at_ms=5_000, op="start", member="m2"),
        Step(at_ms=5_010, op="failover", duration_ms=2_000),
        Step(at_ms=12_000, op="leave", member="m0"),
        Step(at_ms=12_000, op="bounce", member="m1", duration_ms=3_000),
        Step(at_ms=12_005, op="failover", duration_ms=500),
    ]
    for mode in MODES:
        result = streams_world(scripted(steps, topics=(("a", 3), ("b", 2))), mode).run()
        assert result.violations == ()
        assert result.failovers == 2
        assert result.converged_after_ms is not None


def test_the_checks_catch_a_task_given_to_two_members(monkeypatch: pytest.MonkeyPatch) -> None:
    from streamtasks.coordinator.streams import reconcile as module

    real = module.reconcile

    def careless(current, **kwargs):  # type: ignore[no-untyped-def]
        return real(current, **{**kwargs, "owner_of": lambda task: None})

    monkeypatch.setattr("streamtasks.coordinator.streams.heartbeat.reconcile", careless)
    steps = [Step(at_ms=0, op="start", member="m0"), Step(at_ms=5_000, op="start", member="m1")]
    result = streams_world(scripted(steps, topics=(("a", 4),)), "streams").run()
    assert {v.invariant for v in result.violations} == {"exclusive-active"}


def test_a_duplicated_heartbeat_reaches_the_coordinator_as_a_retry_after_a_failure() -> None:
    """Seed 7102243: a heartbeat duplicated while b waited for released tasks. As two identical
    copies (the first answer lost, the second answered without the tasks) b never learned its
    tasks (`convergence`); on Kafka's transport the second copy is b's own retry after a
    client-visible failure, a full request, and the group converges."""
    scenario = streams_scenario(7102243, "streams", frozenset(FAULT_KINDS))
    result = run_streams_scenario(scenario, "streams")
    assert result.violations == ()
    assert result.converged_after_ms is not None


def test_a_group_forming_within_the_initial_delay_gets_one_target_for_all_its_joins() -> None:
    """Kafka 4.4's pacing, the simulator's default: three members start within the 3 s initial
    rebalance delay; nothing is assigned before it ends, then one target covers all three."""
    steps = [Step(at_ms=t, op="start", member=f"m{i}") for i, t in enumerate((0, 500, 1_000))]
    scenario = scripted(steps, topics=(("clicks", 6),))
    world = streams_world(scenario, "streams", StreamsSettings(standby_replicas=0))
    world.advance(2_900)
    assert all(not p.active for p in world.current.values())
    world.advance(20_000)
    assert world.violations == []
    assert sorted(len(p.active) for p in world.current.values()) == [2, 2, 2]
    side = world.side
    assert isinstance(side, StreamsSide)
    first = next(r for r in side.log if isinstance(r, StreamsTargetMetadataRecord))
    assert first.assignment_epoch >= 3  # the first target already counts every join
