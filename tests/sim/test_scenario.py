"""Scenario generation: reproducible, protocol-independent steps, valid fault selection."""

from __future__ import annotations

import pytest

from assignors.partition.types import RebalanceProtocol
from streamtasks.errors import ConfigError
from streamtasks.sim.scenario import FAULT_KINDS, MEMBERSHIP_OPS, generate, parse_faults


def test_same_seed_same_scenario() -> None:
    assert generate(11, RebalanceProtocol.EAGER) == generate(11, RebalanceProtocol.EAGER)
    assert generate(11, RebalanceProtocol.EAGER) != generate(12, RebalanceProtocol.EAGER)


def test_both_protocols_get_the_same_steps_for_a_seed() -> None:
    for seed in range(20):
        eager = generate(seed, RebalanceProtocol.EAGER)
        coop = generate(seed, RebalanceProtocol.COOPERATIVE)
        assert eager.steps == coop.steps
        assert eager.topics == coop.topics
        assert coop.assignors == ("cooperative_sticky",)


def test_without_faults_only_membership_and_metadata_steps() -> None:
    ops = {
        s.op for seed in range(50) for s in generate(seed, RebalanceProtocol.COOPERATIVE, frozenset()).steps
    }
    assert ops <= MEMBERSHIP_OPS | {"metadata", "enforce"}
    assert {"start", "leave", "crash", "bounce"} <= ops


def test_faults_show_up_when_enabled() -> None:
    ops = {s.op for seed in range(80) for s in generate(seed, RebalanceProtocol.EAGER).steps}
    assert {"pause", "partition", "failover", "degrade"} <= ops


def test_parse_faults() -> None:
    assert parse_faults("all") == frozenset(FAULT_KINDS)
    assert parse_faults("none") == frozenset()
    assert parse_faults("loss, pause") == frozenset({"loss", "pause"})
    with pytest.raises(ConfigError):
        parse_faults("loss,meteor")
