"""The convergence tests the worlds ask after every event once the steps are over answer as the
gap reports do, at every event of runs with every fault (they stop at the first gap, the
cheapest first: a large group's end no longer sorts every partition per event); a mark reads a
world at a time without changing what it simulates."""

from __future__ import annotations

from typing import Any, cast

import pytest

from assignors.partition.types import RebalanceProtocol
from streamtasks.sim.classic_side import ClassicSide, classic_world
from streamtasks.sim.invariants import convergence_gaps, has_converged
from streamtasks.sim.kip848 import MODES, ConsumerSide, consumer_world
from streamtasks.sim.kip848.runner import consumer_scenario
from streamtasks.sim.scenario import FAULT_KINDS, generate
from streamtasks.sim.world import World

FAULTS = frozenset(FAULT_KINDS)


@pytest.mark.parametrize("protocol", [RebalanceProtocol.EAGER, RebalanceProtocol.COOPERATIVE])
@pytest.mark.parametrize("seed", range(4))
def test_classic_has_converged_is_no_gap_at_every_event(protocol: RebalanceProtocol, seed: int) -> None:
    world = classic_world(generate(seed, protocol, FAULTS))
    world.advance(0)
    answers = set()
    while world.now < world.scenario.quiet_ms + 30_000:
        world.step_once()
        args = (world.coordinator, world.live(), world.ledger, world.host.existing())
        converged = has_converged(*args)
        assert converged == (not convergence_gaps(*args)), world.now
        if cast(ClassicSide, world.side).rebalancing():
            assert not converged
        answers.add(converged)
    assert answers == {True, False}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("seed", range(4))
def test_kip848_converged_is_no_gap_at_every_event(
    mode: str, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    world = consumer_world(consumer_scenario(seed, mode, FAULTS), mode)
    checks = cast(ConsumerSide, world.side).checks
    after_event = checks.after_event
    answers: list[tuple[bool, bool]] = []

    def compare() -> None:
        after_event()
        answers.append((checks.converged(), not checks.convergence_gaps()))

    monkeypatch.setattr(checks, "after_event", compare)
    world.run()
    assert [a for a in answers if a[0] != a[1]] == []
    assert {a for a, _ in answers} == {True, False}


@pytest.mark.parametrize("consumer", [False, True])
def test_a_mark_reads_the_world_once_before_the_first_event_at_its_time(consumer: bool) -> None:
    def world() -> World[Any, Any]:
        if consumer:
            return consumer_world(consumer_scenario(3, MODES[0], FAULTS), MODES[0])
        return classic_world(generate(3, RebalanceProtocol.COOPERATIVE, FAULTS))

    plain, marked = world(), world()
    seen: list[tuple[int, int]] = []
    marked.mark(5_000, lambda: seen.append((marked.now, marked.events)))
    plain_result, marked_result = plain.run(), marked.run()
    assert marked_result == plain_result
    [(at, events)] = seen
    assert at >= 5_000
    assert 0 < events < marked_result.events
