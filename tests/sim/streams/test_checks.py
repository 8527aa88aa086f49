"""The streams-group checks look again only at what an event touched: a violation made by hand
is reported on the event that makes it, and the indexes' convergence answer is the full one's."""

from __future__ import annotations

import pytest

from streamtasks.sim.ledger import ReleaseKind
from streamtasks.sim.scenario import FAULT_KINDS, Step
from streamtasks.sim.streams import StreamsSettings, StreamsSide, streams_scenario, streams_world
from streamtasks.sim.streams.checks import StreamsChecks
from streamtasks.sim.streams.process import StreamsProcess
from streamtasks.sim.world import World
from tests.sim.helpers import scripted


def _settled(mode: str = "streams") -> tuple[World[StreamsProcess, object], StreamsSide]:
    steps = [Step(at_ms=0, op="start", member=f"m{i}") for i in range(3)]
    scenario = scripted(steps, topics=(("clicks", 6),))
    world = streams_world(scenario, mode, StreamsSettings(standby_replicas=1, stop_on_violation=False))
    world.advance(30_000)
    side = world.side
    assert isinstance(side, StreamsSide)
    assert world.violations == []
    assert side.checks.converged(side.coordinator, side.tasks())
    return world, side


def test_a_task_made_active_on_two_processes_is_reported_on_that_event() -> None:
    world, side = _settled()
    m0, m1 = world.current["m0"], world.current["m1"]
    stolen = min(m0.active - m1.standby)
    m1.active = m1.active | {stolen}  # what a careless callback would do
    side.after_actions(m1)  # the host's call after m1's event
    expected = f"task {stolen} active on {m0.conn} and {m1.conn}"
    assert [(v.invariant, v.detail) for v in world.violations] == [("exclusive-active", expected)]
    assert not side.checks.converged(side.coordinator, side.tasks())  # m1 owns other tasks


def test_a_standby_beside_its_own_active_is_reported_on_that_event() -> None:
    world, side = _settled()
    m2 = world.current["m2"]
    task = min(m2.active)
    m2.standby = m2.standby | {task}
    side.after_actions(m2)
    assert [(v.invariant, v.detail) for v in world.violations] == [
        ("standby-apart", f"{m2.conn} holds standby/warm-up [{task}] of its own actives")
    ]


def test_a_stopped_process_no_longer_counts() -> None:
    world, side = _settled()
    m0, m1 = world.current["m0"], world.current["m1"]
    m1.active = m1.active | {min(m0.active - m1.standby)}
    world.host.stop(m0, ReleaseKind.CRASHED)
    side.after_actions(m1)
    assert world.violations == []  # m0 is gone: the task is m1's alone
    assert side.checks.walk(side.coordinator) == []


@pytest.mark.parametrize("mode", ["streams", "streams-client"])
@pytest.mark.parametrize("seed", [3, 8_100_017])
def test_the_indexes_answer_as_the_full_walk_after_every_event(mode: str, seed: int) -> None:
    world = streams_world(streams_scenario(seed, mode, frozenset(FAULT_KINDS)), mode)
    side = world.side
    assert isinstance(side, StreamsSide)
    checks: StreamsChecks = side.checks
    world.advance(0)
    answers = set()
    while world.host.sched.peek_time() is not None and world.events < 4_000:
        world.step_once()
        tasks = side.tasks()
        if side.available:
            full = not checks.gaps(side.coordinator, tasks)
            assert checks.converged(side.coordinator, tasks) is full, world.events
            assert checks.clean(side.coordinator) is not checks.walk(side.coordinator), world.events
            answers.add(full)
    assert answers == {True, False}
    assert world.violations == []
