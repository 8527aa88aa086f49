"""Classic-protocol members and KIP-848 members in one group on streamtasks' coordinator (the
KIP-848 world, ``--protocol mixed``): the real classic member machine's JoinGroup / SyncGroup /
Heartbeat / LeaveGroup go to the coordinator's classic writes, parked joins are answered when a
later write says so, and members are restarted on the other protocol. The invariants are the
KIP-848 world's, checked after every event."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from streamtasks.membership.classic import phases
from streamtasks.sim.kip848 import SERVER, consumer_world
from streamtasks.sim.kip848.runner import MIXED, consumer_scenario, run_consumer_batch, run_consumer_scenario
from streamtasks.sim.network import LinkProfile
from streamtasks.sim.scenario import Step
from tests.sim.helpers import scripted

CLASSIC = ("cooperative_sticky",)


def _migration(members: int, *, partitions: int = 12, seed: int = 7) -> Any:
    """Every member starts classic, is bounced to KIP-848, then back (the drill's script)."""
    names = [f"m{i}" for i in range(members)]
    steps = [
        Step(at_ms=10 * i, op="start", member=n, group_protocol="classic", assignors=CLASSIC)
        for i, n in enumerate(names)
    ]
    at = 30_000
    for protocol, assignors in (("consumer", ("uniform",)), ("classic", CLASSIC)):
        for name in names:
            steps.append(Step(at_ms=at, op="leave", member=name))
            steps.append(
                Step(at_ms=at + 500, op="restart", member=name, group_protocol=protocol, assignors=assignors)
            )
            at += 800
        at += 30_000
    return scripted(steps, topics=(("t0", partitions),), seed=seed)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_group_migrates_to_kip848_and_back_without_double_ownership(seed: int) -> None:
    world = consumer_world(_migration(6, seed=seed), SERVER)
    result = world.run()
    assert result.violations == (), f"seed {seed}"
    assert result.converged_after_ms is not None
    assert result.handover_without_commit == 0
    assert result.parked_joins > 0  # classic joins waited for partitions other members released
    assert {p.group_protocol for p in world.procs.values()} == {"classic", "consumer"}
    assert all(p.group_protocol == "classic" for p in world.live())


def test_mixed_batch_with_every_fault() -> None:
    """Fixed seeds: every process on a protocol drawn from the seed, under message loss and
    duplication, cut-off and paused members and coordinator fail-overs (loss and pauses were
    left out until the stale-JoinGroup zombie was fixed; docs/simulation.md)."""
    faults = frozenset({"dup", "partition", "failover", "loss", "pause"})
    summary = run_consumer_batch(MIXED, range(60), faults=faults, shrink_failures=False)
    assert [f.report() for f in summary.failures] == []
    assert summary.scenarios == 60
    assert summary.failovers_mid_rebalance > 0
    assert summary.group_epochs > 0


def test_the_invariants_catch_a_classic_member_that_hides_what_it_owns(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A classic member whose JoinGroup reports owning nothing while it keeps its partitions
    lets the coordinator treat them as released and hand them to another member: two current
    members own them, and the simulator says so."""
    scenario = _migration(4, seed=1)
    assert run_consumer_scenario(scenario, SERVER).violations == ()
    original = phases.join_protocols

    def hiding(config: Any, **kwargs: Any) -> Any:
        return original(config, **{**kwargs, "owned": ()})

    monkeypatch.setattr(phases, "join_protocols", hiding)
    result = run_consumer_scenario(scenario, SERVER)
    assert {v.invariant for v in result.violations} == {"exclusive-ownership"}


def test_mixed_scenarios_draw_a_protocol_per_started_process() -> None:
    scenario = consumer_scenario(5, MIXED, frozenset())
    starting = [s for s in scenario.steps if s.op in ("start", "restart", "bounce")]
    assert starting
    assert all(s.group_protocol in ("classic", "consumer") for s in starting)
    assert consumer_scenario(5, MIXED, frozenset()) == scenario


def _classic(at_ms: int, member: str, *, static: bool = False) -> Step:
    return Step(
        at_ms=at_ms, op="start", member=member, static=static, group_protocol="classic", assignors=CLASSIC
    )


def _kip848(at_ms: int, member: str, *, static: bool = False) -> Step:
    return Step(
        at_ms=at_ms,
        op="start",
        member=member,
        static=static,
        group_protocol="consumer",
        assignors=("uniform",),
    )


def test_a_removed_classic_member_rejoining_with_what_it_owned_is_refused() -> None:
    """Found by the simulator (seed 97 of ``--protocol mixed``, shrunk): a dynamic classic
    member owning partitions is told to rejoin; its JoinGroup is lost (20 % loss) and, not
    heartbeating while it waits for the answer (as the classic protocol does), its session
    expires: the coordinator removes it and gives its partitions to others. When its JoinGroup
    times out it rejoins with its old member id, still claiming them. The coordinator used to
    create a member with that id, so the zombie was a member again holding partitions another
    member owned (an exclusive-ownership violation); it now answers UNKNOWN_MEMBER_ID to a
    dynamic member id it does not have whose subscription claims owned partitions, and the
    member gives them up as lost and joins afresh (docs/simulation.md,
    tests/coordinator/test_classic_zombie.py)."""
    steps = [
        _classic(53, "m1"),
        _kip848(145, "m2", static=True),
        _classic(753, "m0"),
        Step(at_ms=15_301, op="failover", duration_ms=1_026),
        Step(
            at_ms=32_020,
            op="bounce",
            member="m2",
            static=True,
            duration_ms=17_664,
            group_protocol="consumer",
            assignors=("uniform",),
        ),
        _classic(50_035, "m5", static=True),
        Step(at_ms=60_965, op="leave", member="m0"),
        Step(at_ms=80_266, op="leave", member="m2"),
        _classic(92_392, "m0"),
        _kip848(97_204, "m4"),
        Step(at_ms=97_706, op="degrade", duration_ms=1_759, loss=0.2, duplication=0.05),
    ]
    scenario = replace(scripted(steps, topics=(("t0", 7),), seed=97), link=LinkProfile(max_delay_ms=20))
    result = run_consumer_scenario(scenario, MIXED)
    assert result.violations == (), result.violations
    assert result.converged_after_ms is not None
