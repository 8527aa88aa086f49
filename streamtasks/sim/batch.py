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
from dataclasses import dataclass, replace
from typing import Any, Protocol, TypeVar

from streamtasks.sim.scenario import Scenario
from streamtasks.sim.trace import Violation
from streamtasks.sim.world import World

__all__ = ["Failure", "Outcome", "Summary", "run_guarded", "run_seeds", "shrink_scenario"]


class Outcome(Protocol):
    """What the batch reads of a run's result."""

    @property
    def violations(self) -> tuple[Violation, ...]: ...
    @property
    def trace(self) -> tuple[str, ...]: ...


R = TypeVar("R", bound=Outcome)
R_contra = TypeVar("R_contra", bound=Outcome, contravariant=True)
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


class Summary(Protocol[R_contra]):
    """A batch's totals, to which each run's result is added."""

    scenarios: int
    failures: list[Failure]

    def add(self, result: R_contra, /) -> None: ...


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
