"""Session and revocation timeouts, and static membership, on the streams coordinator."""

from __future__ import annotations

from streamtasks.coordinator.streams import StreamsCoordinatorConfig
from streamtasks.coordinator.timers import TimerKey, TimerKind
from streamtasks.protocol.errors import KafkaErrorCode

from .support import GROUP, Harness

ALL = frozenset(("0", p) for p in range(4))
CONFIG = StreamsCoordinatorConfig(session_timeout_ms=10_000, heartbeat_interval_ms=1_000)


def test_a_member_that_stops_heartbeating_is_removed_and_its_tasks_move() -> None:
    h = Harness(CONFIG)
    a, b = h.add("a"), h.add("b")
    h.round(3)
    assert len(a.active) == 2
    h.advance(6_000)
    h.beat(a)
    h.advance(6_000)  # b silent for 12 s
    g = h.coordinator.group(GROUP)
    assert g is not None
    assert set(g.members) == {"a"}
    del h.members["b"]
    h.round(2)
    assert a.active == ALL
    b.epoch = 5
    assert h.beat(b).error is KafkaErrorCode.UNKNOWN_MEMBER_ID


def test_a_member_that_does_not_revoke_in_time_is_removed() -> None:
    h = Harness(CONFIG)
    a, b = h.add("a"), h.add("b")
    h.beat(a)
    h.beat(b)
    key = TimerKey(TimerKind.REVOCATION, GROUP, "a")
    # a is told to give up two tasks but keeps reporting all four (it never revokes)
    response = h.apply(h.coordinator.heartbeat(a.request(), h.now))
    assert response.error is KafkaErrorCode.NONE
    assert h.coordinator.timer_deadline(key) == 30_000
    g = h.coordinator.group(GROUP)
    assert g is not None
    while True:
        h.advance(1_000)
        g = h.coordinator.group(GROUP)
        if g is None or "a" not in g.members:
            break
        h.apply(h.coordinator.heartbeat(a.request(), h.now))
        h.beat(b)
        assert b.active == frozenset()
    assert h.now == 30_000
    del h.members["a"]  # removed (a zombie from here on: fenced at its next heartbeat)
    assert h.beat(a).error is KafkaErrorCode.UNKNOWN_MEMBER_ID
    h.round(2)
    assert b.active == ALL


def test_a_static_member_keeps_its_tasks_while_it_restarts() -> None:
    h = Harness(CONFIG)
    a = h.add("a", "p1", instance_id="i-a")
    b = h.add("b", "p2", instance_id="i-b")
    h.round(3)
    kept = a.active
    assert len(kept) == 2
    a.epoch = -2
    assert h.beat(a).member_epoch == -2
    del h.members["a"]
    h.round(2)
    assert b.active.isdisjoint(kept), "nobody takes a static member's tasks while it is away"
    back = h.add("a2", "p1", instance_id="i-a")
    r = h.beat(back)
    assert r.error is KafkaErrorCode.NONE
    assert back.active == kept
    g = h.coordinator.group(GROUP)
    assert g is not None
    assert set(g.members) == {"a2", "b"}
    h.round(2)
    assert h.all_active() == ALL


def test_an_instance_id_in_use_is_refused() -> None:
    h = Harness(CONFIG)
    h.beat(h.add("a", instance_id="i"))
    assert h.beat(h.add("b", instance_id="i")).error is KafkaErrorCode.UNRELEASED_INSTANCE_ID


def test_a_static_member_away_beyond_its_session_is_removed() -> None:
    h = Harness(CONFIG)
    a = h.add("a", instance_id="i-a")
    b = h.add("b")
    h.round(3)
    a.epoch = -2
    h.beat(a)
    del h.members["a"]
    for _ in range(12):
        h.advance(1_000)
        h.round()
    assert b.active == ALL
