"""KIP-341's debugger scenario: a member is paused long enough for the group to rebalance
without it, its partitions move, and it comes back believing it still owns them.

Setup (COOPERATIVE, static members with a 60 s session and an 8 s rebalance timeout, the
configuration Kafka recommends for static members): B owns foo-5 under generation 2, having
got it after its last JoinGroup (so the coordinator's copy of B's subscription does not claim
it). B is paused; C joins; the rebalance completes without B (static members are not removed
by the join barrier) and foo-5, claimed by nobody, goes to C. B resumes with a rejoin pending
(an ``enforce_rebalance`` the application called) and sends JoinGroup before anything told it
that it missed a generation: it claims foo-5 under generation 2 while C claims it under 3.

What the simulator shows, with the generation marker on and off:

* both times B becomes a member of the new generation (JoinGroup response) while still
  holding foo-5, which C holds too: the ``exclusive-ownership`` check fails until B's
  SyncGroup response makes it revoke foo-5. The marker cannot prevent this window: B learns
  which claims the leader honoured only from its assignment.
* with the marker, the leader honours C's newer claim: C keeps foo-5 and only B revokes it;
  without it the two claims tie, the leader honours neither, and C loses foo-5 too until the
  follow-up rebalance. With ``cooperative_sticky`` the leader never hands foo-5 to both (the
  tie rule of ``assignors.cooperative`` is a second defence), so there disabling the marker
  costs a partition move, not a duplicate assignment.
* EAGER with the ``sticky`` assignor (whose userdata carries the KIP-341 marker): B revokes
  foo-5 before rejoining but its sticky userdata still reports it (its previous assignment),
  next to C's claim. With the marker the leader sees B's claim is from an older generation and
  ignores it: exclusive ownership holds. Without it the leader runs the legacy pre-KIP-341
  mode (``legacy_trust_claims``, simulation only): it trusts both claims and foo-5 stays
  assigned to B and to C in the same generation — KAFKA-7026's duplicate, which the
  simulator's ``exclusive-ownership`` check reports.
* EAGER (``cooperative_sticky``, ``range``): B revokes everything before rejoining and its
  pre-revocation commit is rejected (ILLEGAL_GENERATION), so it loses the partitions without
  ever holding them as a current member: no violation.
* a dynamic member paused past its session is removed and fenced (UNKNOWN_MEMBER_ID): no
  violation either way.
"""

from __future__ import annotations

from streamtasks.membership.classic import ListenerKind
from streamtasks.sim.invariants import Invariants
from streamtasks.sim.ledger import OwnershipLedger
from streamtasks.sim.scenario import Step, Timeouts
from tests.sim.helpers import EAGER, listener_calls, owned, scripted, tp, world

STATIC_TIMEOUTS = Timeouts(session_ms=10_000, static_session_ms=60_000, rebalance_ms=8_000)


def debugger_scenario(*, marker: bool, protocol: object = None, static: bool = True) -> list[Step]:
    return [
        Step(at_ms=0, op="start", member="A", static=static),
        Step(at_ms=0, op="start", member="B", static=static),
        Step(at_ms=10_000, op="metadata", topic="foo", partitions=6),
        Step(at_ms=30_000, op="pause", member="B", duration_ms=13_000),
        Step(at_ms=30_001, op="enforce", member="B"),  # reaches B when it resumes
        Step(at_ms=31_000, op="start", member="C", static=static),
    ]


def run(  # type: ignore[no-untyped-def]
    *, marker: bool, protocol: object = None, static: bool = True, assignors: tuple[str, ...] | None = None
):
    kwargs: dict[str, object] = {"protocol": protocol} if protocol is not None else {}
    if assignors is not None:
        kwargs["assignors"] = assignors
    scenario = scripted(
        debugger_scenario(marker=marker, static=static),
        topics=(("foo", 4),),
        timeouts=STATIC_TIMEOUTS,
        marker=marker,
        **kwargs,  # type: ignore[arg-type]
    )
    w = world(scenario)
    return w, w.run()


def test_kip341_stale_member_loses_a_moved_partition_at_its_join_response_without_marker() -> None:
    w, result = run(marker=False)
    assert result.violations == ()
    b_lost = set().union(*(p for _, p in listener_calls(w, "B", ListenerKind.LOST)))
    assert tp("foo-5") in b_lost
    assert tp("foo-5") not in set().union(*(p for _, p in listener_calls(w, "B", ListenerKind.REVOKED)))
    # B's JoinGroup still claimed foo-5: the claims tied, the leader honoured neither, so C
    # gave foo-5 up as well ...
    assert tp("foo-5") in set().union(*(p for _, p in listener_calls(w, "C", ListenerKind.REVOKED)))
    assert owned(w, "C") >= {tp("foo-5")}  # ... and got it back in the follow-up rebalance


def test_kip341_marker_keeps_the_fresh_owner_and_the_missed_generation_closes_the_window() -> None:
    w, result = run(marker=True)
    assert result.violations == ()
    assert listener_calls(w, "C", ListenerKind.REVOKED) == []  # C's newer claim won
    b_lost = set().union(*(p for _, p in listener_calls(w, "B", ListenerKind.LOST)))
    assert tp("foo-5") in b_lost  # lost at the JoinGroup response, never revoked (no stale commit)
    assert tp("foo-5") not in set().union(*(p for _, p in listener_calls(w, "B", ListenerKind.REVOKED)))
    assert tp("foo-5") in owned(w, "C")
    assert tp("foo-5") not in owned(w, "B")


def test_kip341_eager_member_loses_stale_partitions_before_rejoining() -> None:
    w, result = run(marker=True, protocol=EAGER)
    assert result.violations == ()
    lost = set().union(*(p for _, p in listener_calls(w, "B", ListenerKind.LOST)))
    assert tp("foo-5") in lost


def test_kip341_eager_sticky_with_the_marker_keeps_ownership_exclusive() -> None:
    w, result = run(marker=True, protocol=EAGER, assignors=("sticky",))
    assert result.violations == ()
    assert tp("foo-5") in owned(w, "C")
    assert tp("foo-5") not in owned(w, "B")


def test_kip341_eager_sticky_without_the_marker_duplicates_a_partition_kafka_7026() -> None:
    # legacy pre-KIP-341 leader: B's stale claim and C's valid one both stand
    w, result = run(marker=False, protocol=EAGER, assignors=("sticky",))
    assert result.violations, "the simulator must find the duplicate the marker prevents"
    assert {v.invariant for v in result.violations} == {"exclusive-ownership"}
    first = result.violations[0]
    assert first.detail.startswith("foo-5 owned by B#0 (gen 4, ")
    assert ", C#0 (gen 4, " in first.detail
    assert tp("foo-5") in owned(w, "B") & owned(w, "C")  # and it stays duplicated


def test_kip341_dynamic_member_paused_past_its_session_is_fenced() -> None:
    for marker in (True, False):
        w, result = run(marker=marker, static=False)
        assert result.violations == ()
        lost = set().union(*(p for _, p in listener_calls(w, "B", ListenerKind.LOST)))
        assert tp("foo-5") in lost


def test_exclusive_ownership_check_fails_for_two_current_holders() -> None:
    ledger = OwnershipLedger()
    for conn in ("x#0", "y#0"):
        ledger.acquire(conn, name=conn[0], partitions=(tp("t-0"),), now_ms=5, generation=3, start_offsets={})
    checks = Invariants()
    assert checks.exclusive_ownership(9, ledger, lambda holding: True)[0].invariant == "exclusive-ownership"
    assert checks.exclusive_ownership(9, ledger, lambda holding: holding.conn == "x#0") == []
