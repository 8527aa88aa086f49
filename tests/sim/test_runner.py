"""Batches, shrinking, the CLI, and the fixed CI batch of seeds."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from assignors.partition.types import RebalanceProtocol
from streamtasks.sim.__main__ import main
from streamtasks.sim.runner import SAME_ASSIGNOR, run_batch, run_scenario, shrink
from streamtasks.sim.scenario import FAULT_KINDS, Step, Timeouts, generate
from tests.sim.helpers import scripted

#: The fixed CI batch: this many seeds per protocol, every fault kind. The nightly-sized run
#: is ``python -m streamtasks.sim --protocol both --seeds 10000 --json`` (docs/simulation.md).
CI_SEEDS = 300


@pytest.mark.parametrize("protocol", [RebalanceProtocol.EAGER, RebalanceProtocol.COOPERATIVE])
def test_ci_batch_has_no_violations(protocol: RebalanceProtocol) -> None:
    summary = run_batch(protocol, range(CI_SEEDS), faults=frozenset(FAULT_KINDS))
    assert summary.scenarios == CI_SEEDS
    assert [f.report() for f in summary.failures] == []
    assert summary.violations == 0
    assert summary.rebalances > 0
    assert summary.membership_changes > 0


def test_runs_are_deterministic() -> None:
    scenario = generate(5, RebalanceProtocol.COOPERATIVE)
    first, second = run_scenario(scenario), run_scenario(scenario)
    assert first == second
    assert first.events > 0


def test_cooperative_revokes_only_what_moves() -> None:
    """Same seeds, same assignor (cooperative_sticky), no faults: COOPERATIVE revokes far less
    than EAGER, and hardly ever revokes a partition only to get it back (only when the member
    it was revoked for leaves before the follow-up rebalance); EAGER does so all the time."""
    seeds = range(25)
    none: frozenset[str] = frozenset()
    eager = run_batch(
        RebalanceProtocol.EAGER, seeds, faults=none, assignors=SAME_ASSIGNOR[RebalanceProtocol.EAGER]
    )
    coop = run_batch(
        RebalanceProtocol.COOPERATIVE,
        seeds,
        faults=none,
        assignors=SAME_ASSIGNOR[RebalanceProtocol.COOPERATIVE],
    )
    assert eager.violations == coop.violations == 0
    assert eager.membership_changes == coop.membership_changes
    assert coop.revoked * 2 < eager.revoked
    assert coop.returned * 20 <= eager.returned
    assert eager.returned > 0


def test_shrink_drops_steps_that_do_not_matter() -> None:
    """A static member that crashes for good with a 10-minute session, with no rebalance after
    it (one would remove it: no SyncGroup in time), keeps its partitions out of the group for
    longer than the 120 s convergence bound: a violation the earlier noise steps do not matter
    to."""
    noise = [
        Step(at_ms=10_000, op="enforce", member="A"),
        Step(at_ms=11_000, op="metadata", topic="bar", partitions=3),
        Step(at_ms=12_000, op="start", member="D"),
    ]
    steps = [
        Step(at_ms=0, op="start", member="A", static=True),
        Step(at_ms=0, op="start", member="B", static=True),
        Step(at_ms=30_000, op="crash", member="B"),
    ]
    scenario = scripted(
        [*steps, *noise],
        topics=(("foo", 4), ("bar", 2)),
        timeouts=Timeouts(static_session_ms=600_000),
    )
    result = run_scenario(scenario)
    violation = result.violations[0]
    assert violation.invariant == "convergence"
    minimal, minimal_result = shrink(scenario, violation)
    assert len(minimal.steps) < len(scenario.steps)
    assert all(s.at_ms <= violation.time_ms for s in minimal.steps)
    assert minimal_result.violations[0].invariant == violation.invariant
    assert minimal_result.trace


def test_an_exception_becomes_a_violation_with_its_seed() -> None:
    scenario = replace(generate(3, RebalanceProtocol.EAGER, frozenset()), assignors=("no_such_assignor",))
    result = run_scenario(scenario)
    assert result.violations[0].invariant == "no-exception"
    assert "no_such_assignor" in result.violations[0].detail


def test_cli_prints_json_summary(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        ["--protocol", "cooperative", "--seeds", "3", "--seed-base", "40", "--json", "--progress-every", "1"]
    )
    out, err = capsys.readouterr()
    assert code == 0
    (run,) = json.loads(out)["runs"]
    assert run["protocol"] == "cooperative"
    assert run["scenarios"] == 3
    assert run["seed_base"] == 40
    assert run["violations"] == 0
    assert "3/3 scenarios" in err


def test_cli_prints_a_table_for_both_protocols(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--seeds", "2", "--faults", "none", "--same-assignor"]) == 0
    out, _ = capsys.readouterr()
    assert "eager" in out
    assert "cooperative" in out
    assert "rebalances / membership change" in out


def test_cli_rejects_unknown_faults(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--faults", "meteor"]) == 2
    assert "unknown fault" in capsys.readouterr().err
