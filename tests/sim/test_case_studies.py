"""The case studies of KIP-429 and KIP-848 (those that apply to the classic protocol), run in
the simulator with the real member machine, the real assignors and the coordinator model.

KIP-848's "Online Migration" case study is not here: it is about converting a group to the
KIP-848 protocol, which the classic simulator does not model.
"""

from __future__ import annotations

from assignors.registry import get_partition_assignor
from streamtasks.membership.classic import ListenerKind
from streamtasks.sim.scenario import Step
from tests.sim.helpers import EAGER, listener_calls, owned, scripted, tp, tps, world

REVOKED, LOST, ASSIGNED = ListenerKind.REVOKED, ListenerKind.LOST, ListenerKind.ASSIGNED


def start(at: int, name: str, *, static: bool = False, assignors: tuple[str, ...] = ()) -> Step:
    return Step(at_ms=at, op="start", member=name, static=static, assignors=assignors)


def test_kip848_case_study_members_join_one_at_a_time() -> None:
    """foo has 3 partitions. A owns all; B joins and gets one partition A gives up; C joins
    and gets one more of A's. B never gives anything up; A revokes one partition each time."""
    w = world(scripted([start(0, "A"), start(20_000, "B"), start(40_000, "C")]))
    result = w.run()
    assert result.violations == ()
    revoked_by_a = listener_calls(w, "A", REVOKED)
    assert [len(parts) for _, parts in revoked_by_a] == [1, 1]
    assert listener_calls(w, "B", REVOKED) == []
    b_got = [parts for _, parts in listener_calls(w, "B", ASSIGNED)]
    c_got = [parts for _, parts in listener_calls(w, "C", ASSIGNED)]
    assert b_got == [revoked_by_a[0][1]]
    assert c_got == [revoked_by_a[1][1]]
    assert owned(w, "B") == b_got[0]
    assert owned(w, "A") | owned(w, "B") | owned(w, "C") == tps("foo-0", "foo-1", "foo-2")
    assert all(len(owned(w, m)) == 1 for m in "ABC")


def test_kip848_case_study_third_member_takes_one_partition_from_each() -> None:
    """foo has 6 partitions, A and B own three each; C joins: A revokes one, B revokes one,
    C gets exactly those two, and nothing else moves (two rebalances: join and follow-up)."""
    w = world(scripted([start(0, "A"), start(0, "B"), start(20_000, "C")], topics=(("foo", 6),)))
    w.advance(19_999)
    before = {m: owned(w, m) for m in "AB"}
    generation_before = w.coordinator.generation
    result = w.run()
    assert result.violations == ()
    revoked = {m: listener_calls(w, m, REVOKED, after_ms=20_000) for m in "AB"}
    assert [len(p) for _, p in revoked["A"]] == [1]
    assert [len(p) for _, p in revoked["B"]] == [1]
    moved = revoked["A"][0][1] | revoked["B"][0][1]
    assert owned(w, "C") == moved
    assert owned(w, "A") == before["A"] - moved
    assert owned(w, "B") == before["B"] - moved
    assert w.coordinator.generation - generation_before == 2


def test_kip848_case_study_member_failure() -> None:
    """A, B and C own two partitions each; A fails. After A's session times out, B and C each
    take one of A's partitions and keep their own: no revocation anywhere."""
    scenario = scripted(
        [start(0, "A"), start(0, "B"), start(0, "C"), Step(at_ms=30_000, op="crash", member="A")],
        topics=(("foo", 6),),
    )
    w = world(scenario)
    w.advance(29_999)
    before = {m: owned(w, m) for m in "ABC"}
    result = w.run()
    assert result.violations == ()
    assert listener_calls(w, "B", REVOKED) == listener_calls(w, "C", REVOKED) == []
    for m in "BC":
        assert before[m] < owned(w, m)
        assert len(owned(w, m)) == 3
    assert owned(w, "B") | owned(w, "C") == before["A"] | before["B"] | before["C"]
    # A's partitions waited for the session timeout (10 s) and one rebalance, not longer
    assert result.orphan_partition_ms <= 2 * (scenario.timeouts.session_ms + 1_000)


def test_kip848_case_study_partition_added() -> None:
    """foo has one partition, owned by A; foo-1 is created. The leader notices the partition
    count change, rejoins, and B gets foo-1; A keeps foo-0."""
    scenario = scripted(
        [start(0, "A"), start(0, "B"), Step(at_ms=20_000, op="metadata", topic="foo", partitions=2)],
        topics=(("foo", 1),),
    )
    w = world(scenario)
    w.advance(19_999)
    holder = "A" if owned(w, "A") else "B"
    other = "B" if holder == "A" else "A"
    assert owned(w, holder) == tps("foo-0")
    result = w.run()
    assert result.violations == ()
    assert owned(w, holder) == tps("foo-0")
    assert owned(w, other) == tps("foo-1")
    assert listener_calls(w, "A", REVOKED) == listener_calls(w, "B", REVOKED) == []


def test_kip429_new_member_joins_cooperative_revokes_only_what_moves() -> None:
    """KIP-429's example: the existing member now calls revoke on b-0 only, once, instead of
    revoking both a-0 and b-0 and getting a-0 back (the EAGER run below shows the old way)."""
    steps = [start(0, "A"), start(20_000, "B")]
    topics = (("a", 1), ("b", 1))
    coop = world(scripted(steps, topics=topics))
    assert coop.run().violations == ()
    revoked = listener_calls(coop, "A", REVOKED)
    assert len(revoked) == 1
    assert len(revoked[0][1]) == 1
    (moved,) = revoked[0][1]
    assert owned(coop, "B") == {moved}
    assert owned(coop, "A") == {tp("a-0"), tp("b-0")} - {moved}

    eager = world(scripted(steps, topics=topics, protocol=EAGER))
    assert eager.run().violations == ()
    eager_revoked = listener_calls(eager, "A", REVOKED, after_ms=20_000)
    assert [parts for _, parts in eager_revoked] == [tps("a-0", "b-0")]  # everything, once
    assert len(owned(eager, "A")) == len(owned(eager, "B")) == 1


def test_kip429_upgrade_path_two_rolling_bounces() -> None:
    """range → "cooperative_sticky, range" (still EAGER) → "cooperative_sticky" (COOPERATIVE),
    one rolling bounce each; the group keeps a valid assignment throughout, the coordinator
    picks range until everyone offers cooperative_sticky, and once the second bounce is over
    a new member makes nobody revoke more than what moves."""
    names = ("A", "B", "C")
    steps = [start(0, n, assignors=("range",)) for n in names]
    t = 20_000
    for assignors in (("cooperative_sticky", "range"), ("cooperative_sticky",)):
        for n in names:
            steps.append(Step(at_ms=t, op="bounce", member=n, duration_ms=500, assignors=assignors))
            t += 20_000
    steps.append(start(t, "D", assignors=("cooperative_sticky",)))
    w = world(scripted(steps, topics=(("foo", 6),), protocol=EAGER, assignors=("range",)))
    w.advance(39_000)  # first bounce under way: mixed range / "cooperative_sticky, range"
    assert w.coordinator.group.protocol_name == get_partition_assignor("range").name
    w.advance(t - 1)
    assert w.coordinator.group.protocol_name == get_partition_assignor("cooperative_sticky").name
    assert {w.current[n].protocol.name for n in names} == {"COOPERATIVE"}
    result = w.run()
    assert result.violations == ()
    for n in names:  # D's arrival: each old member gives up at most what D takes
        revoked = listener_calls(w, n, REVOKED, after_ms=t)
        assert sum(len(p) for _, p in revoked) <= 1
    assert len(owned(w, "D")) in (1, 2)


def test_kip814_static_leader_rejoin_skips_assignment_and_keeps_monitoring() -> None:
    """A static leader restarts: the coordinator tells the new process it leads but must skip
    the assignment (no rebalance: same generation, everyone keeps its partitions); the new
    leader still monitors metadata, so a partition added later is picked up."""
    steps = [start(0, "A", static=True), start(0, "B", static=True), start(0, "C", static=True)]
    w = world(scripted([*steps, Step(at_ms=60_000, op="metadata", topic="foo", partitions=4)]))
    w.advance(19_000)
    leader_name = next(n for n in "ABC" if w.current[n].member.is_leader)
    before = {n: owned(w, n) for n in "ABC"}
    generation = w.coordinator.generation
    w.inject(Step(at_ms=20_000, op="bounce", member=leader_name, static=True, duration_ms=300), 20_000)
    w.advance(40_000)
    new_leader = w.current[leader_name]
    assert new_leader.incarnation == 1
    assert new_leader.member.is_leader
    assert w.coordinator.generation == generation
    assert {n: owned(w, n) for n in "ABC"} == before
    result = w.run()
    assert result.violations == ()
    assert w.coordinator.generation > generation
    assert tp("foo-3") in owned(w, "A") | owned(w, "B") | owned(w, "C")


def test_kip568_enforce_rebalance_keeps_owned_partitions() -> None:
    """enforce_rebalance on a stable static member: one rebalance, nothing revoked."""
    steps = [start(0, "A", static=True), start(0, "B"), Step(at_ms=20_000, op="enforce", member="A")]
    w = world(scripted(steps, topics=(("foo", 4),)))
    w.advance(19_999)
    before = {n: owned(w, n) for n in "AB"}
    generation = w.coordinator.generation
    result = w.run()
    assert result.violations == ()
    assert w.coordinator.generation == generation + 1
    assert {n: owned(w, n) for n in "AB"} == before
    assert listener_calls(w, "A", REVOKED) == listener_calls(w, "B", REVOKED) == []


def test_kip345_replaced_static_member_fences_the_old_process() -> None:
    """A static member's old process is paused (a debugger) while a new process with the same
    group.instance.id takes over: the new one gets the old one's partitions without a
    rebalance; the old one is fenced (FENCED_INSTANCE_ID) when it wakes up and stops."""
    steps = [
        start(0, "A", static=True),
        start(0, "B", static=True),
        Step(at_ms=20_000, op="pause", member="A", duration_ms=8_000),
        Step(at_ms=21_000, op="replace", member="A"),
    ]
    w = world(scripted(steps, topics=(("foo", 4),)))
    w.advance(19_999)
    before = owned(w, "A")
    old = w.current["A"]
    generation = w.coordinator.generation
    result = w.run()
    assert result.violations == ()
    assert w.current["A"] is not old
    assert not old.alive
    assert old.member.state.value == "failed"
    assert owned(w, "A") == before
    assert w.coordinator.generation == generation
