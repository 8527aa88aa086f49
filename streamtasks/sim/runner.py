"""Running scenarios: one, a batch of seeds, and shrinking a failure to a minimal replay.

A run never raises for what the simulated system does: an exception escaping the member
machine (or the model) is reported as a violation of the ``no-exception`` invariant, with the
seed, so a batch always completes and every problem can be replayed.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

from assignors.partition.types import RebalanceProtocol
from streamtasks.sim.scenario import FAULT_KINDS, Scenario, Timeouts, generate
from streamtasks.sim.trace import Violation
from streamtasks.sim.world import RunResult, World, WorldSettings

__all__ = ["BatchSummary", "Failure", "run_batch", "run_scenario", "shrink"]

#: KIP-429 same-assignor comparison: ``cooperative_sticky`` under each protocol.
SAME_ASSIGNOR: dict[RebalanceProtocol, tuple[str, ...]] = {
    RebalanceProtocol.EAGER: ("cooperative_sticky", "range"),
    RebalanceProtocol.COOPERATIVE: ("cooperative_sticky",),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Failure:
    """A violating seed, with the smallest scenario found that still shows the violation."""

    seed: int
    violation: Violation
    steps: tuple[str, ...]
    trace: tuple[str, ...]
    original_steps: int
    minimal_steps: int
    replay: str = ""

    def report(self) -> str:
        lines = [f"VIOLATION seed={self.seed}: {self.violation}"]
        if self.replay:
            lines.append(f"replay: {self.replay}")
        lines.append(f"minimal scenario ({self.minimal_steps} of {self.original_steps} steps):")
        lines += [f"  {s}" for s in self.steps]
        lines.append("trace (last events):")
        lines += [f"  {t}" for t in self.trace]
        return "\n".join(lines)


@dataclass(slots=True, kw_only=True)
class BatchSummary:
    """Totals over a batch; the ``per_change`` figures divide by membership changes."""

    protocol: RebalanceProtocol
    faults: tuple[str, ...]
    seed_base: int
    scenarios: int = 0
    events: int = 0
    messages: int = 0
    sim_ms: int = 0
    violations: int = 0
    membership_changes: int = 0
    rebalances: int = 0
    revoked: int = 0
    assigned: int = 0
    lost: int = 0
    moved: int = 0
    returned: int = 0
    orphan_partition_ms: int = 0
    handover_without_commit: int = 0
    kip814_blind: int = 0
    max_converged_after_ms: int = 0
    max_rebalances_after_quiet: int = 0
    failures: list[Failure] = field(default_factory=list)

    def add(self, result: RunResult) -> None:
        self.scenarios += 1
        self.events += result.events
        self.messages += result.messages
        self.sim_ms += result.sim_ms
        self.membership_changes += result.membership_changes
        self.rebalances += result.rebalances
        self.revoked += result.revoked
        self.assigned += result.assigned
        self.lost += result.lost
        self.moved += result.moved
        self.returned += result.returned
        self.orphan_partition_ms += result.orphan_partition_ms
        self.handover_without_commit += result.handover_without_commit
        self.kip814_blind += result.kip814_blind
        self.max_converged_after_ms = max(self.max_converged_after_ms, result.converged_after_ms or 0)
        self.max_rebalances_after_quiet = max(self.max_rebalances_after_quiet, result.rebalances_after_quiet)
        if result.violations:
            self.violations += 1

    def per_change(self, total: float) -> float:
        return total / self.membership_changes if self.membership_changes else 0.0

    def as_dict(self) -> dict[str, object]:
        return {
            "protocol": self.protocol.name.lower(),
            "faults": list(self.faults),
            "seed_base": self.seed_base,
            "scenarios": self.scenarios,
            "events": self.events,
            "messages": self.messages,
            "simulated_seconds": round(self.sim_ms / 1000, 1),
            "violations": self.violations,
            "membership_changes": self.membership_changes,
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
            "max_ms_to_converge_after_last_step": self.max_converged_after_ms,
            "max_rebalances_after_last_step": self.max_rebalances_after_quiet,
            "failures": [
                {
                    "seed": f.seed,
                    "invariant": f.violation.invariant,
                    "time_ms": f.violation.time_ms,
                    "detail": f.violation.detail,
                    "replay": f.replay,
                    "minimal_steps": list(f.steps),
                    "trace": list(f.trace),
                }
                for f in self.failures
            ],
        }


def run_scenario(scenario: Scenario, settings: WorldSettings | None = None) -> RunResult:
    """Run one scenario; an exception from the simulated parts becomes a violation."""
    world = World(scenario, settings)
    try:
        return world.run()
    except Exception as exc:  # reported with its seed; the batch goes on
        detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        where = traceback.extract_tb(exc.__traceback__)[-1]
        world.violations.append(
            Violation(
                invariant="no-exception",
                time_ms=world.now,
                detail=f"{detail} (at {where.filename}:{where.lineno})",
            )
        )
        world.trace.add(world.now, f"EXCEPTION {detail}")
        return world._result()


def shrink(
    scenario: Scenario, violation: Violation, settings: WorldSettings | None = None, budget: int = 40
) -> tuple[Scenario, RunResult]:
    """Drop steps while the same invariant still fails; returns the smallest scenario found and
    its run. Steps after the violation cannot matter and go first."""

    def fails(candidate: Scenario) -> RunResult | None:
        result = run_scenario(candidate, settings)
        same = [v for v in result.violations if v.invariant == violation.invariant]
        return result if same else None

    best = scenario
    best_result = None
    early = replace(scenario, steps=tuple(s for s in scenario.steps if s.at_ms <= violation.time_ms))
    if early.steps != scenario.steps and (found := fails(early)) is not None:
        best, best_result = early, found
    tries = 0
    index = len(best.steps) - 1
    while index >= 0 and tries < budget:
        candidate = best.without(index)
        tries += 1
        if (found := fails(candidate)) is not None:
            best, best_result = candidate, found
        index -= 1
    if best_result is None:
        best_result = run_scenario(best, settings)
    return best, best_result


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
    for seed in seeds:
        scenario = generate(seed, protocol, faults, assignors=assignors, timeouts=timeouts)
        result = run_scenario(scenario, settings)
        summary.add(result)
        if result.violations:
            violation = result.violations[0]
            minimal, minimal_result = (
                shrink(scenario, violation, settings) if shrink_failures else (scenario, result)
            )
            summary.failures.append(
                Failure(
                    seed=seed,
                    violation=violation,
                    steps=tuple(minimal.describe()),
                    trace=minimal_result.trace or result.trace,
                    original_steps=len(scenario.steps),
                    minimal_steps=len(minimal.steps),
                    replay=(
                        f"python -m streamtasks.sim --protocol {protocol.name.lower()} --seeds 1 "
                        f"--seed-base {seed} --faults {','.join(sorted(faults)) or 'none'}"
                        + (" --same-assignor" if assignors is not None else "")
                        + (
                            f" --static-session-ms {timeouts.static_session_ms}"
                            if timeouts is not None and timeouts.static_session_ms
                            else ""
                        )
                    ),
                )
            )
        if progress is not None and summary.scenarios % progress_every == 0:
            progress(summary)
    return summary
