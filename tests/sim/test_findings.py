"""What the simulator found beyond the invariants holding (docs/simulation.md, "What the
simulator found"). Each test keeps its reproduction and pins the current behaviour of the
member machine and the coordinator model: fixed findings assert that they no longer happen."""

from __future__ import annotations

from dataclasses import replace

from assignors.partition.types import RebalanceProtocol
from streamtasks.sim.kip848.members import CLIENT
from streamtasks.sim.kip848.runner import MIXED, consumer_scenario, run_consumer_scenario
from streamtasks.sim.runner import SAME_ASSIGNOR
from streamtasks.sim.scenario import Step, Timeouts, generate
from tests.sim.helpers import owned, scripted, tp, world


def test_static_replacement_no_longer_strands_a_partition_withheld_for_its_old_process() -> None:
    """m0 (static) rejoins claiming t0-0..4, then crashes while the barrier waits; the leader
    keeps four of them for m0's stored claim and withholds t0-4 from its new owner until m0
    revokes it — which the dead process never does. m0's new process replaces it without a
    rebalance (KIP-345), gets the stored assignment and owns nothing it should revoke, so it
    starts no follow-up rebalance. Before the fix t0-4 stayed unowned until another change
    came (a ``convergence`` violation); now the leader, which remembers that it withheld
    partitions, rejoins when no follow-up started within a heartbeat interval, and the forced
    follow-up hands t0-4 out. Needs a static session timeout longer than the rebalance
    timeout."""
    steps = [
        Step(at_ms=283, op="start", member="m1", static=True),
        Step(at_ms=1_169, op="start", member="m0", static=True),
        Step(at_ms=1_293, op="start", member="m2", static=True),
        Step(at_ms=14_508, op="bounce", member="m2", static=True, duration_ms=18_343),
        Step(at_ms=19_426, op="start", member="m3", static=True),
        Step(at_ms=31_950, op="bounce", member="m0", static=True, duration_ms=19_397),
    ]
    scenario = scripted(
        steps,
        topics=(("t0", 6), ("t1", 6), ("t2", 1)),
        timeouts=Timeouts(static_session_ms=60_000),
        seed=300,
    )
    w = world(scenario)
    result = w.run()
    assert result.violations == ()
    assert tp("t0-4") in set().union(*(owned(w, m) for m in ("m0", "m1", "m2", "m3")))


FRESH_SEED_FAULTS = frozenset({"dup", "failover", "loss", "partition", "pause"})


def test_a_member_that_lost_what_its_joingroup_claimed_still_starts_the_followup() -> None:
    """Found on a fresh seed base (issue 24): seed 675166650, cooperative. m3 (static) sends
    JoinGroup claiming t0-0, t0-2 and t0-3, is paused, misses generation 11 and on resuming
    learns of generation 12 from that JoinGroup's answer: it loses the three partitions (the
    missed-generation rule). The leader worked from its claim, kept t0-0 and t0-2 for it and
    withheld t0-3 from m0 until m3 revokes it and rejoins; m3 had nothing left to revoke and
    never rejoined, the leader had forced the previous follow-up (at most one in a row), and
    t0-3 stayed unowned in a stable group for the last 120 s. Now a member rejoins when its
    assignment lacks partitions its JoinGroup claimed and it lost."""
    scenario = generate(675_166_650, RebalanceProtocol.COOPERATIVE, FRESH_SEED_FAULTS)
    w = world(scenario)
    result = w.run()
    assert result.violations == ()
    assert tp("t0-3") in set().union(*(owned(w, m) for m in ("m0", "m1", "m3")))


def test_a_restarted_static_leader_starts_the_followup_its_old_process_owed() -> None:
    """Found on a fresh seed base (issue 24): seed 705380203, cooperative. m0, the leader,
    withheld t1-2 and t2-* from m2 and was bounced while it still had to revoke them (its
    commit before revoking lost on a degraded network). Its new process rejoined the Stable
    group with the same instance id: KIP-814 SkipAssignment, the stored assignment, no memory
    of the withholding, and the leader's own forced follow-up (previous finding) died with the
    old process. Now a COOPERATIVE leader told to skip the assignment starts the follow-up when
    partitions of the group's topics are neither claimed by any member nor its own."""
    scenario = generate(705_380_203, RebalanceProtocol.COOPERATIVE, FRESH_SEED_FAULTS)
    w = world(scenario)
    result = w.run()
    assert result.violations == ()
    assert tp("t1-2") in set().union(*(owned(w, m) for m in ("m0", "m2")))


def test_with_default_timeouts_the_dead_static_member_expires_and_the_group_converges() -> None:
    steps = [
        Step(at_ms=283, op="start", member="m1", static=True),
        Step(at_ms=1_169, op="start", member="m0", static=True),
        Step(at_ms=1_293, op="start", member="m2", static=True),
        Step(at_ms=14_508, op="bounce", member="m2", static=True, duration_ms=18_343),
        Step(at_ms=19_426, op="start", member="m3", static=True),
        Step(at_ms=31_950, op="bounce", member="m0", static=True, duration_ms=19_397),
    ]
    result = world(scripted(steps, topics=(("t0", 6), ("t1", 6), ("t2", 1)), seed=300)).run()
    assert result.violations == ()


def test_enforce_rebalance_of_a_follower_with_unchanged_metadata_needs_the_marker() -> None:
    """Kafka's coordinator answers a follower whose JoinGroup metadata is byte-identical with
    the current generation. With the generation marker a member's subscription changes every
    generation, so each enforce_rebalance rebalances; without it the second one does not."""
    steps = [Step(at_ms=0, op="start", member="A"), Step(at_ms=0, op="start", member="B")]
    for marker, rebalances in ((True, 2), (False, 1)):
        w = world(scripted(steps, topics=(("foo", 4),), marker=marker))
        w.advance(19_000)
        follower = next(n for n in "AB" if not w.current[n].member.is_leader)
        start = w.coordinator.generation
        for at in (20_000, 40_000):
            w.inject(Step(at_ms=at, op="enforce", member=follower), at)
        w.advance(59_000)
        assert w.coordinator.generation - start == rebalances, marker


def test_leave_while_joining_no_longer_leaves_the_group_waiting_for_a_session_timeout() -> None:
    """Cooperative seed 3187 (``--faults none --same-assignor``): m2 is told to leave at 60,815 ms
    while its JoinGroup is in flight; its commit under the old generation is refused
    (ILLEGAL_GENERATION) and its partitions are lost. It used to close without LeaveGroup, so
    the group waited for its 10 s session timeout; it still has its member id (only the
    generation was refused), so it now sends LeaveGroup and the group rebalances at once.
    Replayed with the heartbeat timing it was found with (before members heartbeated soon
    after a rebalance, ``followup_heartbeat_ms``), which puts the leave into the JoinGroup."""
    found = generate(3187, RebalanceProtocol.COOPERATIVE, frozenset())
    scenario = replace(
        found,
        assignors=SAME_ASSIGNOR[RebalanceProtocol.COOPERATIVE],
        timeouts=replace(found.timeouts, followup_heartbeat_ms=0),
    )
    w = world(scenario)
    result = w.run()
    assert result.violations == ()
    lines = w.trace.lines()
    refused = next(
        i
        for i, line in enumerate(lines)
        if "m2#1 <- OffsetCommitResponse" in line and "ILLEGAL_GENERATION" in line
    )
    assert any("m2#1 -> coordinator: LeaveGroupRequest" in line for line in lines[refused:])


def test_an_assignment_in_an_unread_duplicate_answer_is_sent_again() -> None:
    """Found on a fresh seed base: seed 1691880284, ``--protocol mixed``. m2 (KIP-848) was
    paused past its session timeout and rejoined at epoch 6 with nothing, waiting for t0-4
    (added by the metadata change) while the classic m0 revoked it. A duplicated heartbeat of
    m2 (20 % duplication) reached the coordinator twice: the first copy was answered before
    m0 released t0-4, the second after, and its answer handed m2 t0-4. m2 does not read a
    second answer to one request; the coordinator counted the assignment as delivered and
    never repeated it, and t0-4 stayed unowned in a stable group for the last 120 s. Now an
    unread answer carrying an assignment makes the member's next heartbeat a full one; its
    owned partitions differ from the assignment and the coordinator sends it again
    (tests/membership/consumer/test_unread_answers.py)."""
    scenario = consumer_scenario(1_691_880_284, MIXED, FRESH_SEED_FAULTS)
    result = run_consumer_scenario(scenario, MIXED)
    assert result.violations == (), result.violations
    assert result.converged_after_ms is not None


def test_a_fenced_stray_copy_no_longer_frees_a_live_members_partitions() -> None:
    """Found on a fresh seed base (issue 27): seed 9872133, ``--protocol consumer-client``,
    faults dup, failover, loss, move, partition, pause. A duplicate of m0's heartbeat at its
    previous epoch 9 (without its owned list) reached the coordinator after m0 had moved to
    epoch 10; it was fenced, and the coordinator removed m0 and freed t0-2, t0-5 and t1-2. m0
    never saw that answer (it reads one answer per request), and a late copy of its old join
    re-created m0 empty at epoch 10, the epoch m0 still held: m0's heartbeats passed, and at
    46,661 ms m2 was given the three partitions at epoch 13 while m0 kept them. Now a fence
    changes nothing in the group (Apache Kafka's rule), and the late join finds m0 present
    (tests/coordinator/test_rejoin.py reproduces the mechanism)."""
    faults = frozenset({"dup", "failover", "loss", "move", "partition", "pause"})
    scenario = consumer_scenario(9_872_133, CLIENT, faults)
    result = run_consumer_scenario(scenario, CLIENT)
    assert result.violations == (), result.violations
