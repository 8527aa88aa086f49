"""Coordinator moves (the ``move`` fault): mid-JoinGroup, mid-SyncGroup, mid-heartbeat and
mid-commit, in the classic world and the KIP-848 world; a fixed set of seeds with moves on."""

from __future__ import annotations

from typing import Any

import pytest

from streamtasks.sim.classic_side import WorldSettings, classic_world
from streamtasks.sim.kip848 import CLIENT, MODES, SERVER, ConsumerSettings, consumer_world
from streamtasks.sim.kip848.runner import MIXED, run_consumer_batch
from streamtasks.sim.runner import run_batch
from streamtasks.sim.scenario import FAULT_KINDS, MOVE_WAIT_MS, RECORDED_FAULT_KINDS, Scenario, Step, generate
from tests.sim.helpers import COOPERATIVE, EAGER, scripted

GROWTH = [
    Step(at_ms=0, op="start", member="m0"),
    Step(at_ms=0, op="start", member="m1"),
    Step(at_ms=8_000, op="start", member="m2"),
]


def classic(scenario: Scenario, written_first: bool | None = None) -> Any:
    w = classic_world(scenario, WorldSettings(trace_limit=100_000))
    side: Any = w.side
    if written_first is not None:
        side.moves.written_first = lambda: written_first
    result = w.run()
    return w, result


def kip848(scenario: Scenario, mode: str, written_first: bool | None = None) -> Any:
    w = consumer_world(scenario, mode, ConsumerSettings(trace_limit=100_000))
    side: Any = w.side
    if written_first is not None:
        side.moves.written_first = lambda: written_first
    result = w.run()
    return w, result


def refused(w: Any, kind: str) -> list[str]:
    """Trace lines of requests of ``kind`` the old coordinator refused."""
    return [line for line in w.trace.lines() if "old coordinator" in line and kind in line]


def answered_with_coordinator_error(w: Any, kind: str) -> bool:
    return any(
        kind in line and ("NOT_COORDINATOR" in line or "COORDINATOR_NOT_AVAILABLE" in line)
        for line in w.trace.lines()
    )


def test_move_steps_come_from_their_own_random_stream() -> None:
    """With moves on, a seed's other steps are the same as without (the golden seeds)."""
    for seed in range(50):
        before = generate(seed, COOPERATIVE, frozenset(RECORDED_FAULT_KINDS))
        after = generate(seed, COOPERATIVE, frozenset(FAULT_KINDS))
        moves = [s for s in after.steps if s.op == "move"]
        assert 1 <= len(moves) <= 3
        assert tuple(s for s in after.steps if s.op != "move") == before.steps
        assert all(s.trigger for s in moves)


def test_a_move_step_ends_after_its_wait_and_its_load() -> None:
    step = Step(at_ms=1_000, op="move", duration_ms=300, trigger="commit")
    assert step.end_ms == 1_000 + MOVE_WAIT_MS + 300
    assert Step(at_ms=1_000, op="move", duration_ms=300, trigger="now").end_ms == 1_300
    assert "when commit" in step.describe()


@pytest.mark.parametrize("protocol", [EAGER, COOPERATIVE])
def test_classic_move_mid_join_group(protocol: Any) -> None:
    """m2 joins: the rebalance is under way (JoinGroups parked) when the coordinator moves. The
    parked joins are answered with the coordinator error, the new coordinator has the last
    stable generation only, and the group rebalances again and converges."""
    steps = [*GROWTH, Step(at_ms=7_000, op="move", duration_ms=1_500, trigger="rebalance")]
    w, result = classic(scripted(steps, topics=(("foo", 6),), protocol=protocol))
    assert result.violations == ()
    assert w.side.moves.fired == {"rebalance": 1}
    assert answered_with_coordinator_error(w, "JoinGroupResponse")
    assert result.converged_after_ms is not None
    assert {p.name for p in w.live()} == {"m0", "m1", "m2"}
    assert w.ledger.all_owned()


@pytest.mark.parametrize("protocol", [EAGER, COOPERATIVE])
def test_classic_move_mid_sync_group(protocol: Any) -> None:
    """The coordinator moves when the join phase completed (CompletingRebalance): the SyncGroups
    reach a broker that is not the coordinator any more, the leader's assignment is lost with
    it, and the members rejoin at the new coordinator."""
    steps = [*GROWTH, Step(at_ms=7_000, op="move", duration_ms=0, trigger="sync")]
    w, result = classic(scripted(steps, topics=(("foo", 6),), protocol=protocol))
    assert result.violations == ()
    assert w.side.moves.fired == {"sync": 1}
    assert answered_with_coordinator_error(w, "SyncGroupResponse")
    assert result.converged_after_ms is not None
    assert w.side.coordinator.generation >= 2


def test_classic_move_mid_heartbeat_keeps_the_generation() -> None:
    """A stable group's coordinator moves: heartbeats reach the old broker and are refused, the
    members find the new coordinator, which loaded the stable generation: no rebalance."""
    steps = [*GROWTH[:2], Step(at_ms=15_000, op="move", duration_ms=2_000, trigger="now")]
    w, result = classic(scripted(steps, topics=(("foo", 6),)))
    assert result.violations == ()
    assert refused(w, "Heartbeat")
    generation = w.side.coordinator.generation
    assert generation == 1
    assert result.rebalances == 1
    assert all(p.member.generation == generation for p in w.live())


@pytest.mark.parametrize("written_first", [False, True])
def test_classic_move_mid_commit(written_first: bool) -> None:
    """m2 joins a COOPERATIVE group: m0 and m1 revoke and commit; the coordinator moves as the
    first commit arrives. Not written: its answer is the coordinator error. Written: the offsets
    stay, the answer is the error all the same. Either way the handover goes on and every
    invariant (commit-before-handover, commit-fencing) holds."""
    steps = [*GROWTH, Step(at_ms=7_000, op="move", duration_ms=200, trigger="commit")]
    w, result = classic(scripted(steps, topics=(("foo", 6),)), written_first=written_first)
    assert result.violations == ()
    how = "commit-written" if written_first else "commit"
    assert w.side.moves.fired == {how: 1}
    assert answered_with_coordinator_error(w, "OffsetCommitResponse")
    assert result.converged_after_ms is not None
    if written_first:
        assert w.side.coordinator.offsets  # the interrupted commit was kept


@pytest.mark.parametrize("mode", MODES)
def test_kip848_move_mid_rebalance(mode: str) -> None:
    steps = [*GROWTH, Step(at_ms=7_000, op="move", duration_ms=1_000, trigger="rebalance")]
    w, result = kip848(scripted(steps, topics=(("foo", 6),)), mode)
    assert result.violations == ()
    assert w.side.moves.fired == {"rebalance": 1}
    assert result.converged_after_ms is not None
    assert w.ledger.all_owned()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("written_first", [False, True])
def test_kip848_move_mid_heartbeat_or_assignment(mode: str, written_first: bool) -> None:
    """The coordinator moves as a heartbeat (server mode) or an assignment RPC (client mode)
    arrives during the rebalance: written or not, its answer is the coordinator error; the new
    coordinator replays the records and the group converges."""
    steps = [*GROWTH, Step(at_ms=7_000, op="move", duration_ms=500, trigger="sync")]
    w, result = kip848(scripted(steps, topics=(("foo", 6),)), mode, written_first=written_first)
    assert result.violations == ()
    assert w.side.moves.fired == {("sync-written" if written_first else "sync"): 1}
    assert result.converged_after_ms is not None
    assert refused(w, "Heartbeat") or mode == CLIENT


@pytest.mark.parametrize("written_first", [False, True])
def test_kip848_move_mid_commit(written_first: bool) -> None:
    steps = [*GROWTH, Step(at_ms=7_000, op="move", duration_ms=300, trigger="commit")]
    w, result = kip848(scripted(steps, topics=(("foo", 6),)), SERVER, written_first=written_first)
    assert result.violations == ()
    assert w.side.moves.fired == {("commit-written" if written_first else "commit"): 1}
    assert result.converged_after_ms is not None
    # the member whose commit the move interrupted commits again at the new coordinator
    lines = w.trace.lines()
    at = next(i for i, line in enumerate(lines) if "coordinator moves" in line)
    conn = lines[at - 1].split()[2]
    assert "OffsetCommitRequest" in lines[at - 1]
    assert any(f"{conn} -> OffsetCommitRequest" in line for line in lines[at + 1 :])


#: Seeds with every fault, moves included, in the normal suite (the soak runs fresh ones).
MOVE_SEEDS = range(900, 912)


@pytest.mark.parametrize("protocol", [EAGER, COOPERATIVE])
def test_classic_seeds_with_moves(protocol: Any) -> None:
    summary = run_batch(protocol, MOVE_SEEDS, faults=frozenset(FAULT_KINDS), shrink_failures=False)
    assert summary.scenarios == len(MOVE_SEEDS)
    assert [f.replay for f in summary.failures] == []


@pytest.mark.parametrize("mode", [SERVER, CLIENT, MIXED])
def test_kip848_seeds_with_moves(mode: str) -> None:
    summary = run_consumer_batch(mode, MOVE_SEEDS, faults=frozenset(FAULT_KINDS), shrink_failures=False)
    assert summary.scenarios == len(MOVE_SEEDS)
    assert [f.replay for f in summary.failures] == []
