"""Running classic scenarios: one, a batch of seeds, and shrinking a failure to a minimal
replay (the generic parts are :mod:`streamtasks.sim.batch`'s)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from assignors.partition.types import RebalanceProtocol
from streamtasks.sim.batch import BatchTotals, replay_command, run_guarded, run_seeds, shrink_scenario
from streamtasks.sim.classic_side import RunResult, WorldSettings, classic_world
from streamtasks.sim.scenario import FAULT_KINDS, Scenario, Timeouts, generate
from streamtasks.sim.trace import Violation
from streamtasks.sim.world import RunFigures

__all__ = ["SAME_ASSIGNOR", "BatchSummary", "run_batch", "run_scenario", "shrink"]

#: KIP-429 same-assignor comparison: ``cooperative_sticky`` under each protocol.
SAME_ASSIGNOR: dict[RebalanceProtocol, tuple[str, ...]] = {
    RebalanceProtocol.EAGER: ("cooperative_sticky", "range"),
    RebalanceProtocol.COOPERATIVE: ("cooperative_sticky",),
}


@dataclass(slots=True, kw_only=True)
class BatchSummary(BatchTotals):
    """Totals over a batch; the ``per_change`` figures divide by membership changes."""

    protocol: RebalanceProtocol
    rebalances: int = 0
    returned: int = 0
    orphan_partition_ms: int = 0
    handover_without_commit: int = 0
    kip814_blind: int = 0
    max_rebalances_after_quiet: int = 0
    readopted: int = 0

    SUMMED = (
        "rebalances", "returned", "orphan_partition_ms", "handover_without_commit", "kip814_blind",
        "readopted",
    )  # fmt: skip

    def add(self, result: RunFigures) -> None:
        super(BatchSummary, self).add(result)
        assert isinstance(result, RunResult)
        self.max_rebalances_after_quiet = max(self.max_rebalances_after_quiet, result.rebalances_after_quiet)

    def per_change(self, total: float) -> float:
        return total / self.membership_changes if self.membership_changes else 0.0

    def as_dict(self) -> dict[str, object]:
        return self.head(self.protocol.name.lower()) | {
            "rebalances": self.rebalances,
            "rebalances_per_membership_change": round(self.per_change(self.rebalances), 3),
            "partitions_revoked": self.revoked,
            "revoked_per_membership_change": round(self.per_change(self.revoked), 3),
            "partitions_assigned": self.assigned,
            "partitions_lost": self.lost,
            "partitions_moved": self.moved,
            "moved_per_membership_change": round(self.per_change(self.moved), 3),
            "revoked_then_returned": self.returned,
            "partition_seconds_without_owner": round(self.orphan_partition_ms / 1000, 1),
            "unowned_partition_seconds_per_membership_change": round(
                self.per_change(self.orphan_partition_ms / 1000), 3
            ),
            "handovers_without_commit": self.handover_without_commit,
            "kip814_unmonitored_partitions": self.kip814_blind,
            "lapsed_assignments_taken_back": self.readopted,
            "max_ms_to_converge_after_last_step": self.max_converged_after_ms,
            "max_rebalances_after_last_step": self.max_rebalances_after_quiet,
            "failures": [f.as_dict() for f in self.failures],
        }


def run_scenario(scenario: Scenario, settings: WorldSettings | None = None) -> RunResult:
    """Run one scenario; an exception from the simulated parts becomes a violation."""
    return run_guarded(classic_world(scenario, settings))


def shrink(
    scenario: Scenario, violation: Violation, settings: WorldSettings | None = None, budget: int = 40
) -> tuple[Scenario, RunResult]:
    """Drop steps while the same invariant still fails (:func:`~streamtasks.sim.batch.shrink_scenario`)."""
    return shrink_scenario(scenario, violation, lambda s: run_scenario(s, settings), budget)


def run_batch(
    protocol: RebalanceProtocol,
    seeds: Iterable[int],
    *,
    faults: frozenset[str] = frozenset(FAULT_KINDS),
    settings: WorldSettings | None = None,
    assignors: tuple[str, ...] | None = None,
    timeouts: Timeouts | None = None,
    shrink_failures: bool = True,
    progress: Callable[[BatchSummary], None] | None = None,
    progress_every: int = 100,
) -> BatchSummary:
    """Run one generated scenario per seed and total the results."""
    seeds = list(seeds)
    summary = BatchSummary(
        protocol=protocol, faults=tuple(sorted(faults)), seed_base=seeds[0] if seeds else 0
    )

    def replay(seed: int) -> str:
        return (
            replay_command(protocol.name.lower(), seed, faults)
            + (" --same-assignor" if assignors is not None else "")
            + (
                f" --static-session-ms {timeouts.static_session_ms}"
                if timeouts is not None and timeouts.static_session_ms
                else ""
            )
        )

    run_seeds(
        summary,
        seeds,
        scenario=lambda seed: generate(seed, protocol, faults, assignors=assignors, timeouts=timeouts),
        run=lambda scenario: run_scenario(scenario, settings),
        replay=replay,
        shrink_failures=shrink_failures,
        progress=progress,
        progress_every=progress_every,
    )
    return summary
