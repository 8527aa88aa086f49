"""A KIP-848 / streams member's rebalance metrics from the states its loop sees (pure, injected
time): a live streams group's ``/metrics`` during a rolling bounce had no ``rebalance_*`` family
at all, only the member epoch."""

from __future__ import annotations

from streamtasks.membership.classic.states import MemberState as ClassicState
from streamtasks.membership.common.states import MemberState as S
from streamtasks.runtime.epoch_rebalances import EpochRebalances


def test_moves_to_a_new_assignment_are_rebalances_and_a_fence_fails_one() -> None:
    r = EpochRebalances(created_ms=0)
    before = r.snapshot(0)
    assert {"rebalance-total", "rebalance-latency-avg", "failed-rebalance-total"} <= set(before)
    assert not [name for name in before if name.startswith("partitions-")]
    assert (before["rebalance-total"], before["last-rebalance-seconds-ago"]) == (0.0, -1.0)
    for state, at in ((S.JOINING, 0), (S.RECONCILING, 100), (S.ACKNOWLEDGING, 150), (S.STABLE, 300)):
        r.observe(state, at)
    r.observe(S.STABLE, 1_000)  # heartbeats, nothing moves
    r.observe(S.ACKNOWLEDGING, 2_000)  # reconciled within one step (nothing to revoke)
    r.observe(S.STABLE, 2_050)
    got = r.snapshot(3_050)
    assert got["rebalance-total"] == 2.0
    assert (got["rebalance-latency-max"], got["rebalance-latency-total"], got["rebalance-latency-avg"]) == (
        200.0, 250.0, 125.0,
    )  # fmt: skip
    assert got["last-rebalance-seconds-ago"] == 1.0
    r.observe(S.RECONCILING, 3_100)
    r.observe(S.FENCED, 3_500)  # lost everything mid-move
    r.observe(S.JOINING, 3_600)
    r.observe(S.RECONCILING, 3_700)
    r.observe(S.STABLE, 3_800)
    got = r.snapshot(3_800)
    assert (got["rebalance-total"], got["failed-rebalance-total"]) == (3.0, 1.0)
    assert got["rebalance-latency-total"] == 350.0  # the fenced move's time is not counted
    r.observe(S.RECONCILING, 4_000)
    r.observe(S.PREPARE_LEAVING, 4_100)  # left: abandoned, neither completed nor failed
    r.observe(ClassicState.STABLE, 4_200)  # a classic member's state: its own metrics count it
    assert r.snapshot(4_200)["rebalance-total"] == 3.0
    assert r.snapshot(4_200)["failed-rebalance-total"] == 1.0
