"""Running KIP-848 scenarios: one, a batch of seeds, shrinking a failure to a minimal replay.

The scenarios are the classic simulator's (``scenario.generate``: the same steps and faults for
a seed), with smaller groups; the generic parts are :mod:`streamtasks.sim.batch`'s.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from assignors.partition.types import RebalanceProtocol
from streamtasks.sim.batch import BatchTotals, replay_command, run_guarded, run_seeds
from streamtasks.sim.kip848.side import SERVER, ConsumerRunResult, ConsumerSettings, consumer_world
from streamtasks.sim.scenario import FAULT_KINDS, Scenario, generate

__all__ = [
    "MAX_MEMBERS",
    "MIXED",
    "mixed",
    "ConsumerBatchSummary",
    "consumer_scenario",
    "run_consumer_batch",
    "run_consumer_scenario",
]

#: Groups of up to this many members (the classic simulator's groups: the same steps for a seed).
MAX_MEMBERS = 6


#: ``--protocol mixed``: classic members (``cooperative_sticky``) and KIP-848 members
#: (``uniform``) in one group on the coordinator, each process on a protocol drawn per seed.
MIXED = "mixed"
#: What a classic process of a mixed scenario offers.
CLASSIC_ASSIGNORS = ("cooperative_sticky",)
_STARTING_OPS = frozenset({"start", "restart", "bounce"})


def consumer_scenario(seed: int, mode: str, faults: frozenset[str]) -> Scenario:
    scenario = generate(
        seed, RebalanceProtocol.COOPERATIVE, faults, assignors=(mode,), max_members=MAX_MEMBERS
    )
    return mixed(scenario) if mode == MIXED else scenario


def mixed(scenario: Scenario) -> Scenario:
    """Every process a step starts runs on a protocol drawn from the seed (its own random
    stream): so members are bounced from one protocol to the other, both ways, under the
    scenario's faults."""
    rng = random.Random(f"group-protocol-{scenario.seed}")
    steps = []
    for step in scenario.steps:
        if step.op not in _STARTING_OPS:
            steps.append(step)
            continue
        protocol = rng.choice(("classic", "consumer"))
        assignors = CLASSIC_ASSIGNORS if protocol == "classic" else ("uniform",)
        steps.append(replace(step, group_protocol=protocol, assignors=assignors))
    return replace(scenario, steps=tuple(steps))


def run_consumer_scenario(
    scenario: Scenario, mode: str, settings: ConsumerSettings | None = None
) -> ConsumerRunResult:
    """Run one scenario; an exception from the simulated parts becomes a violation."""
    return run_guarded(consumer_world(scenario, SERVER if mode == MIXED else mode, settings))


@dataclass(slots=True, kw_only=True)
class ConsumerBatchSummary(BatchTotals):
    mode: str
    group_epochs: int = 0
    targets: int = 0
    installs: int = 0
    failovers: int = 0
    failovers_mid_rebalance: int = 0
    late_joins: int = 0
    readopted: int = 0

    SUMMED = (
        "group_epochs", "targets", "installs", "failovers", "failovers_mid_rebalance", "late_joins",
        "readopted",
    )  # fmt: skip

    def as_dict(self) -> dict[str, object]:
        return self.head(self.mode) | {
            "group_epoch_bumps": self.group_epochs,
            "targets_computed": self.targets,
            "client_side_installs": self.installs,
            "partitions_revoked": self.revoked,
            "partitions_assigned": self.assigned,
            "partitions_lost": self.lost,
            "partitions_moved": self.moved,
            "failovers": self.failovers,
            "failovers_mid_rebalance": self.failovers_mid_rebalance,
            "late_joins": self.late_joins,
            "lapsed_assignments_taken_back": self.readopted,
            "max_ms_to_converge_after_last_step": self.max_converged_after_ms,
            "failures": [f.as_dict() for f in self.failures],
        }


def run_consumer_batch(
    mode: str,
    seeds: Iterable[int],
    *,
    faults: frozenset[str] = frozenset(FAULT_KINDS),
    shrink_failures: bool = True,
    progress: Callable[[ConsumerBatchSummary], None] | None = None,
    progress_every: int = 100,
) -> ConsumerBatchSummary:
    """Run one generated scenario per seed and total the results."""
    seeds = list(seeds)
    summary = ConsumerBatchSummary(
        mode=mode, faults=tuple(sorted(faults)), seed_base=seeds[0] if seeds else 0
    )
    run_seeds(
        summary,
        seeds,
        scenario=lambda seed: consumer_scenario(seed, mode, faults),
        # looked up at each call: tests replace run_consumer_scenario to plant failures
        run=lambda scenario: run_consumer_scenario(scenario, mode),
        replay=lambda seed: replay_command(mode, seed, faults),
        shrink_failures=shrink_failures,
        progress=progress,
        progress_every=progress_every,
    )
    return summary
