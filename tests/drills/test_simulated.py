"""A drill's script in the simulator: the scenario it becomes, and a small seeded run."""

from __future__ import annotations

import io

import pytest

from streamtasks.cli import build_parser
from streamtasks.drills.catalog import get_drill
from streamtasks.drills.command import run_drill_command
from streamtasks.drills.simulated import STREAMTASKS_COORDINATOR, drill_scenario, simulate_drill
from streamtasks.errors import ConfigError

E2C = get_drill("eager-to-cooperative")
C2C = get_drill("classic-to-consumer")


def test_the_scenario_starts_everyone_then_bounces_each_member_once_per_stage() -> None:
    scenario = drill_scenario(E2C, members=4, partitions=8, seed=3)
    starts = [s for s in scenario.steps if s.op == "start"]
    assert [s.assignors for s in starts] == [("range",)] * 4
    restarts = [s.assignors for s in scenario.steps if s.op == "restart"]
    assert restarts == [("cooperative_sticky", "range")] * 4 + [("cooperative_sticky",)] * 4
    assert sum(s.op == "leave" for s in scenario.steps) == 8
    assert [s.at_ms for s in scenario.steps] == sorted(s.at_ms for s in scenario.steps)


def test_a_small_group_passes_and_the_seed_replays() -> None:
    first = simulate_drill(E2C, members=6, partitions=12, seed=1)
    assert first.ok, first.violations
    assert first.handover_without_commit == 0
    assert first.rebalances > 0
    assert simulate_drill(E2C, members=6, partitions=12, seed=1).to_json() == first.to_json()


def test_a_simulated_drill_needs_two_members() -> None:
    with pytest.raises(ConfigError, match="members"):
        drill_scenario(E2C, members=1, partitions=6)


def test_classic_to_consumer_bounces_every_member_to_kip848_and_back() -> None:
    scenario = drill_scenario(C2C, members=3, partitions=6, seed=2)
    starts = [(s.group_protocol, s.assignors) for s in scenario.steps if s.op == "start"]
    assert starts == [("classic", ("cooperative_sticky",))] * 3
    restarts = [(s.group_protocol, s.assignors) for s in scenario.steps if s.op == "restart"]
    assert restarts == [("consumer", ("uniform",))] * 3 + [("classic", ("cooperative_sticky",))] * 3


@pytest.mark.parametrize("seed", [1, 2])
def test_classic_to_consumer_passes_on_streamtasks_coordinator(seed: int) -> None:
    """10 classic members bounced one by one to KIP-848 and back, in one group on streamtasks'
    coordinator: no partition owned twice, hand-overs after commits, converged."""
    result = simulate_drill(C2C, members=10, partitions=12, seed=seed)
    assert result.ok, (f"seed {seed}", result.violations)
    assert result.coordinator == STREAMTASKS_COORDINATOR
    assert result.handover_without_commit == 0
    assert result.moved > 0
    assert result.rebalances > 10


def test_the_command_prints_a_verdict() -> None:
    out = io.StringIO()
    args = build_parser().parse_args(
        ["drill", "run", "eager-to-cooperative", "--simulate", "--members", "4", "--partitions", "8"]
    )
    assert run_drill_command(args, out) == 0
    assert "PASS" in out.getvalue()
    assert "invariant violations" in out.getvalue()


def test_the_command_simulates_classic_to_consumer() -> None:
    out = io.StringIO()
    args = build_parser().parse_args(
        ["drill", "run", "classic-to-consumer", "--simulate", "--members", "4", "--partitions", "8"]
    )
    assert run_drill_command(args, out) == 0
    text = out.getvalue()
    assert "PASS" in text
    assert f"coordinator: {STREAMTASKS_COORDINATOR}" in text
