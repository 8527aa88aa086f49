"""The coordinator link both members hold: lookups with their backoff, found / lost, timers."""

from __future__ import annotations

from dataclasses import dataclass

from streamtasks.membership.common import CoordinatorLink, FindCoordinator, lookup_backoff_ms
from tests.membership.common.test_kernel import kernel


@dataclass(frozen=True, slots=True, kw_only=True)
class Link:
    coordinator_known: bool = False
    find_retry_ms: int = 0
    find_failures: int = 0
    hb_next_ms: int = 0
    hb_last_ok_ms: int = 0
    join_retry_ms: int = 0  # a protocol's own timer


@dataclass(frozen=True, slots=True, kw_only=True)
class Timing:
    group_id: str = "g"
    request_timeout_ms: int = 1_000
    retry_backoff_ms: int = 100
    retry_backoff_max_ms: int = 1_000


def test_a_lookup_goes_out_once_and_backs_off_after_failures() -> None:
    k = kernel()
    link = CoordinatorLink(Link(), Timing(), k)
    link.lookup(0, 3)
    link.lookup(0, 3)  # one in flight: no second
    (find,) = k.flush()
    assert isinstance(find, FindCoordinator)
    assert find.group_id == "g"
    assert k.requests.inflight[find.request_id].deadline_ms == 1_000
    k.fail(find.request_id)
    link.lookup_failed(500)
    link.lookup_failed(600)
    assert link.record.find_failures == 2
    assert link.record.find_retry_ms == 600 + lookup_backoff_ms(100, 1_000, 2)
    link.lookup(601, 3)
    assert k.flush() == []


def test_found_and_lost_move_the_timers() -> None:
    link = CoordinatorLink(Link(find_failures=4, hb_next_ms=900), Timing(), kernel())
    link.found(50, hb_last_ok_ms=50)
    assert link.known
    assert link.record == Link(coordinator_known=True, hb_next_ms=50, hb_last_ok_ms=50)
    link.lost(70, join_retry_ms=170)
    assert not link.known
    assert (link.record.find_retry_ms, link.record.join_retry_ms) == (170, 170)


def test_heartbeat_timers_and_the_session_check() -> None:
    link = CoordinatorLink(Link(hb_next_ms=500), Timing(), kernel())
    link.beat_by(600)
    assert link.record.hb_next_ms == 500
    link.beat_by(400)
    assert link.record.hb_next_ms == 400
    link.beat_at(800)
    assert link.record.hb_next_ms == 800
    link.heard(1_000)
    assert not link.silent(1_300, 300)
    assert link.silent(1_301, 300)
    link.change(join_retry_ms=9)
    assert link.record.join_retry_ms == 9
