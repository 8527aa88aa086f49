"""Running streams-group scenarios: one, or a batch of seeds (``--protocol streams`` and
``streams-client``). The scenarios are the KIP-848 simulator's (the same steps and faults for a
seed); the generic parts are :mod:`streamtasks.sim.batch`'s."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from assignors.partition.types import RebalanceProtocol
from streamtasks.sim.batch import BatchTotals, replay_command, run_guarded, run_seeds
from streamtasks.sim.scenario import FAULT_KINDS, Scenario, generate
from streamtasks.sim.streams.side import MODES, StreamsRunResult, StreamsSettings, streams_world

__all__ = [
    "MAX_MEMBERS",
    "StreamsBatchSummary",
    "run_streams_batch",
    "run_streams_scenario",
    "streams_scenario",
]

#: Groups of up to this many members (the KIP-848 simulator's).
MAX_MEMBERS = 6


def streams_scenario(seed: int, mode: str, faults: frozenset[str]) -> Scenario:
    return generate(seed, RebalanceProtocol.COOPERATIVE, faults, assignors=(mode,), max_members=MAX_MEMBERS)


def run_streams_scenario(
    scenario: Scenario, mode: str, settings: StreamsSettings | None = None
) -> StreamsRunResult:
    """Run one scenario; an exception from the simulated parts becomes a violation."""
    return run_guarded(streams_world(scenario, mode, settings))


@dataclass(slots=True, kw_only=True)
class StreamsBatchSummary(BatchTotals):
    mode: str
    group_epochs: int = 0
    failovers: int = 0
    took_over: int = 0
    took_over_warm: int = 0
    internal_topics_created: int = 0

    SUMMED = ("group_epochs", "failovers", "took_over", "took_over_warm", "internal_topics_created")

    def as_dict(self) -> dict[str, object]:
        return self.head(self.mode) | {
            "assignor": MODES[self.mode],
            "group_epoch_bumps": self.group_epochs,
            "tasks_taken_over": self.took_over,
            "tasks_taken_over_warm": self.took_over_warm,
            "internal_topics_created": self.internal_topics_created,
            "failovers": self.failovers,
            "max_ms_to_converge_after_last_step": self.max_converged_after_ms,
            "failures": [f.as_dict() for f in self.failures],
        }


def run_streams_batch(
    mode: str,
    seeds: Iterable[int],
    *,
    faults: frozenset[str] = frozenset(FAULT_KINDS),
    shrink_failures: bool = True,
    progress: Callable[[StreamsBatchSummary], None] | None = None,
    progress_every: int = 100,
) -> StreamsBatchSummary:
    """Run one generated scenario per seed and total the results."""
    seeds = list(seeds)
    summary = StreamsBatchSummary(mode=mode, faults=tuple(sorted(faults)), seed_base=seeds[0] if seeds else 0)
    run_seeds(
        summary,
        seeds,
        scenario=lambda seed: streams_scenario(seed, mode, faults),
        run=lambda scenario: run_streams_scenario(scenario, mode),
        replay=lambda seed: replay_command(mode, seed, faults),
        shrink_failures=shrink_failures,
        progress=progress,
        progress_every=progress_every,
    )
    return summary
