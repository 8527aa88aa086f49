"""KIP-429's rebalance metrics, from injected time."""

from __future__ import annotations

from streamtasks.membership.classic import ResponseReceived
from streamtasks.membership.classic.actions import ListenerKind
from streamtasks.membership.classic.metrics import HOUR_MS, RebalanceMetrics
from streamtasks.protocol.classic_group import JoinGroupResponse
from tests.membership.classic.helpers import E, cooperative, join, join_ok, rejoin, sync_ok, tps

KIP429_NAMES = {
    "rebalance-latency-avg",
    "rebalance-latency-max",
    "rebalance-latency-total",
    "rebalance-total",
    "rebalance-rate-per-hour",
    "failed-rebalance-total",
    "failed-rebalance-rate-per-hour",
    "last-rebalance-seconds-ago",
    "partitions-revoked-latency-avg",
    "partitions-revoked-latency-max",
    "partitions-assigned-latency-avg",
    "partitions-assigned-latency-max",
    "partitions-lost-latency-avg",
    "partitions-lost-latency-max",
}


def test_every_kip429_metric_is_there() -> None:
    assert set(cooperative().metrics(0)) >= KIP429_NAMES


def test_member_measures_rebalances_from_injected_time() -> None:
    member = cooperative()
    assert member.metrics(0)["last-rebalance-seconds-ago"] == -1
    rid, _ = join(member, 1_000)
    _, sid, _ = join_ok(member, rid, now=1_200)
    sync_ok(member, sid, tps("t0"), now=1_500)
    member.enforce_rebalance()
    _, rid, _ = rejoin(member, 10_000)
    member.handle(
        ResponseReceived(request_id=rid, response=JoinGroupResponse(error=E.REBALANCE_IN_PROGRESS)), 10_100
    )
    metrics = member.metrics(11_500)
    assert metrics["rebalance-total"] == 1
    assert metrics["rebalance-latency-max"] == 500
    assert metrics["rebalance-latency-total"] == 500
    assert metrics["failed-rebalance-total"] == 1
    assert metrics["last-rebalance-seconds-ago"] == 10.0


def test_rates_count_the_trailing_hour() -> None:
    m = RebalanceMetrics(created_ms=0)
    for t in (0, 10 * 60_000, 20 * 60_000):
        m.rebalance_started(t)
        m.rebalance_completed(t + 100)
    assert m.snapshot(HOUR_MS)["rebalance-rate-per-hour"] == 3  # all three in the last hour
    assert m.snapshot(HOUR_MS + 15 * 60_000)["rebalance-rate-per-hour"] == 1
    assert m.snapshot(HOUR_MS + 15 * 60_000)["rebalance-total"] == 3


def test_rate_is_extrapolated_while_younger_than_an_hour() -> None:
    m = RebalanceMetrics(created_ms=0)
    m.rebalance_completed(1_000)
    assert m.snapshot(HOUR_MS // 2)["rebalance-rate-per-hour"] == 2


def test_listener_latencies() -> None:
    m = RebalanceMetrics()
    m.listener_completed(ListenerKind.LOST, 30)
    m.listener_completed(ListenerKind.LOST, 10)
    snap = m.snapshot(0)
    assert (snap["partitions-lost-latency-avg"], snap["partitions-lost-latency-max"]) == (20, 30)
    assert snap["partitions-revoked-latency-max"] == 0
