"""Running scenarios, whatever the protocol: one (guarded), a batch of seeds, and shrinking a
failure to a minimal replay.

A run never raises for what the simulated system does: an exception escaping the member
machine, the coordinator (model) or an assignor is reported as a violation of the
``no-exception`` invariant, with the seed, so a batch always completes and every problem can be
replayed. Each protocol's runner (:mod:`streamtasks.sim.runner`,
:mod:`streamtasks.sim.kip848.runner`) says how a seed becomes a scenario, how a scenario runs
and what its summary totals.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Protocol, TypeVar

from streamtasks.sim.scenario import Scenario
from streamtasks.sim.trace import Violation
from streamtasks.sim.world import RunFigures, World

__all__ = [
    "replay_command",
    "BatchTotals",
    "Failure",
    "Summary",
    "run_guarded",
    "run_seeds",
    "shrink_scenario",
]


R = TypeVar("R", bound=RunFigures)
R_contra = TypeVar("R_contra", bound=RunFigures, contravariant=True)
T = TypeVar("T")


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

    def as_dict(self) -> dict[str, object]:
        """As a batch summary's ``--json`` lists it."""
        return {
            "seed": self.seed,
            "invariant": self.violation.invariant,
            "time_ms": self.violation.time_ms,
            "detail": self.violation.detail,
            "replay": self.replay,
            "minimal_steps": list(self.steps),
            "trace": list(self.trace),
        }


@dataclass(slots=True, kw_only=True)
class BatchTotals:
    """The totals every protocol's batch summary keeps; a summary adds its own counters,
    named as the result's figures they sum (:attr:`SUMMED`)."""

    #: The result's figures a protocol's summary sums besides the common ones (same names).
    SUMMED: ClassVar[tuple[str, ...]] = ()

    faults: tuple[str, ...]
    seed_base: int
    scenarios: int = 0
    events: int = 0
    messages: int = 0
    sim_ms: int = 0
    violations: int = 0
    membership_changes: int = 0
    revoked: int = 0
    assigned: int = 0
    lost: int = 0
    moved: int = 0
    max_converged_after_ms: int = 0
    failures: list[Failure] = field(default_factory=list)

    def add(self, result: RunFigures) -> None:
        """Add one run's figures."""
        self.scenarios += 1
        self.events += result.events
        self.messages += result.messages
        self.sim_ms += result.sim_ms
        self.membership_changes += result.membership_changes
        self.revoked += result.revoked
        self.assigned += result.assigned
        self.lost += result.lost
        self.moved += result.moved
        self.max_converged_after_ms = max(self.max_converged_after_ms, result.converged_after_ms or 0)
        if result.violations:
            self.violations += 1
        for name in self.SUMMED:
            setattr(self, name, getattr(self, name) + getattr(result, name))

    def head(self, protocol: str) -> dict[str, object]:
        """The first keys of a summary's ``--json``, in their order."""
        return {
            "protocol": protocol,
            "faults": list(self.faults),
            "seed_base": self.seed_base,
            "scenarios": self.scenarios,
            "events": self.events,
            "messages": self.messages,
            "simulated_seconds": round(self.sim_ms / 1000, 1),
            "violations": self.violations,
            "membership_changes": self.membership_changes,
        }

    def as_dict(self) -> dict[str, object]:
        raise NotImplementedError

    def table(self) -> str:
        """``as_dict`` without the failures, one ``key  value`` line each."""
        rows = [(k, v) for k, v in self.as_dict().items() if k != "failures"]
        width = max(len(k) for k, _ in rows)
        return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


class Summary(Protocol[R_contra]):
    """A batch's totals, to which each run's result is added."""

    scenarios: int
    failures: list[Failure]

    def add(self, result: R_contra, /) -> None: ...


def replay_command(protocol: str, seed: int, faults: Iterable[str]) -> str:
    """The command that replays one seed of ``protocol`` with ``faults`` (a failure prints it)."""
    return (
        f"python -m streamtasks.sim --protocol {protocol} --seeds 1 --seed-base {seed} "
        f"--faults {','.join(sorted(faults)) or 'none'}"
    )


def run_guarded(world: World[Any, T]) -> T:
    """Run ``world``; an exception from the simulated parts becomes a ``no-exception``
    violation (and the world's result as it stands)."""
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
        return world.result()


def shrink_scenario(
    scenario: Scenario, violation: Violation, run: Callable[[Scenario], R], budget: int = 40
) -> tuple[Scenario, R]:
    """Drop steps while the same invariant still fails; returns the smallest scenario found and
    its run. Steps after the violation cannot matter and go first."""

    def fails(candidate: Scenario) -> R | None:
        result = run(candidate)
        return result if any(v.invariant == violation.invariant for v in result.violations) else None

    best, best_result = scenario, None
    early = replace(scenario, steps=tuple(s for s in scenario.steps if s.at_ms <= violation.time_ms))
    if early.steps != scenario.steps and (found := fails(early)) is not None:
        best, best_result = early, found
    index, tries = len(best.steps) - 1, 0
    while index >= 0 and tries < budget:
        candidate = best.without(index)
        tries += 1
        if (found := fails(candidate)) is not None:
            best, best_result = candidate, found
        index -= 1
    return best, best_result if best_result is not None else run(best)


def run_seeds(
    summary: Summary[R],
    seeds: Iterable[int],
    *,
    scenario: Callable[[int], Scenario],
    run: Callable[[Scenario], R],
    replay: Callable[[int], str],
    shrink_failures: bool = True,
    progress: Callable[[Any], None] | None = None,
    progress_every: int = 100,
) -> None:
    """Run one scenario per seed into ``summary``; a violating seed's scenario is shrunk (unless
    ``shrink_failures`` is off) and listed with the command that replays it."""
    for seed in seeds:
        generated = scenario(seed)
        result = run(generated)
        summary.add(result)
        if result.violations:
            violation = result.violations[0]
            minimal, minimal_result = (
                shrink_scenario(generated, violation, run) if shrink_failures else (generated, result)
            )
            summary.failures.append(
                Failure(
                    seed=seed,
                    violation=violation,
                    steps=tuple(minimal.describe()),
                    trace=minimal_result.trace or result.trace,
                    original_steps=len(generated.steps),
                    minimal_steps=len(minimal.steps),
                    replay=replay(seed),
                )
            )
        if progress is not None and summary.scenarios % progress_every == 0:
            progress(summary)
