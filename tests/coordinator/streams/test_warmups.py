"""The high-availability assignor on the streams coordinator: a new process warms a stateful
task up and gets it as active as soon as it reports a lag within the acceptable recovery lag
(the lag-triggered hand-over: the report bumps the group epoch), not only at the probing
rebalance (KIP-441's hand-over, which Apache Kafka 4.4's streams groups lack)."""

from __future__ import annotations

from streamtasks.coordinator.streams import StreamsCoordinatorConfig
from streamtasks.coordinator.timers import TimerKey, TimerKind

from .support import GROUP, Harness, Member

ALL = frozenset(("0", p) for p in range(4))
CONFIG = StreamsCoordinatorConfig(
    assignor="high_availability",
    acceptable_recovery_lag=100,
    probing_rebalance_interval_ms=60_000,
    session_timeout_ms=600_000,
    heartbeat_interval_ms=1_000,
)


def _epoch(h: Harness) -> int:
    group = h.coordinator.group(GROUP)
    assert group is not None
    return group.epoch


def _warming(h: Harness) -> tuple[Member, Member]:
    """``a`` runs the four tasks, 10,000 records into each changelog; ``b`` joins and warms two."""
    a = h.add("a", "p1")
    h.round(2)
    a.offsets = {t: 10_000 for t in ALL}
    a.end_offsets = {t: 10_000 for t in ALL}
    h.round()
    b = h.add("b", "p2")
    h.round(3)
    assert a.active == ALL
    assert b.active == frozenset()
    assert len(b.warmup) == 2
    return a, b


def test_a_warm_up_that_catches_up_takes_its_active_task_at_once() -> None:
    h = Harness(CONFIG)
    a, b = _warming(h)
    epoch = _epoch(h)
    b.offsets = {t: 5_000 for t in b.warmup}  # halfway: still behind, nothing moves
    h.round(3)
    assert b.active == frozenset()
    assert _epoch(h) == epoch
    warmed = b.warmup
    b.offsets = {t: 9_950 for t in b.warmup}  # within the acceptable lag (100): no clock moves
    h.round(4)
    assert b.active == warmed
    assert len(a.active) == 2
    assert h.all_active() == ALL
    assert b.warmup == frozenset()
    assert _epoch(h) == epoch + 1


def test_a_caught_up_warm_up_bumps_the_epoch_once() -> None:
    """The report that brings a warm-up within the lag moves the epoch; the same report again
    (every TaskOffsetIntervalMs) does not: no rebalance storm while it stays caught up."""
    h = Harness(CONFIG)
    _, b = _warming(h)
    epoch = _epoch(h)
    b.offsets = {t: 9_950 for t in b.warmup}
    h.beat(b)
    assert _epoch(h) == epoch + 1
    h.beat(b)
    assert _epoch(h) == epoch + 1


def test_the_sticky_assignor_never_bumps_for_lags() -> None:
    h = Harness(StreamsCoordinatorConfig(assignor="sticky", acceptable_recovery_lag=100))
    a = h.add("a", "p1")
    h.round(2)
    epoch = _epoch(h)
    a.offsets = {t: 10_000 for t in ALL}
    a.end_offsets = {t: 10_000 for t in ALL}
    h.round(2)
    assert _epoch(h) == epoch


def test_a_warm_up_still_behind_stays_one_over_probing_rebalances() -> None:
    """The probing rebalance computes the target again; a process still behind by more than
    the acceptable lag gets no active task and keeps warming up."""
    h = Harness(CONFIG)
    a, b = _warming(h)
    probing = h.coordinator.timer_deadline(TimerKey(TimerKind.PROBING, GROUP))
    assert probing is not None
    epoch = _epoch(h)
    b.offsets = {t: 5_000 for t in b.warmup}
    h.round()
    h.advance(probing - h.now)
    h.round(3)
    assert _epoch(h) == epoch + 1
    assert a.active == ALL
    assert b.active == frozenset()
    assert len(b.warmup) == 2
    assert h.coordinator.timer_deadline(TimerKey(TimerKind.PROBING, GROUP)) is not None


def test_the_sticky_assignor_moves_tasks_cold() -> None:
    h = Harness(StreamsCoordinatorConfig(assignor="sticky"))
    a = h.add("a", "p1")
    h.round(2)
    a.offsets = {t: 10_000 for t in ALL}
    b = h.add("b", "p2")
    h.round(4)
    assert len(b.active) == 2
    assert b.warmup == frozenset()
    assert h.coordinator.timer_deadline(TimerKey(TimerKind.PROBING, GROUP)) is None
