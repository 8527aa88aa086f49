"""The high-availability assignor on the streams coordinator: a new process warms a stateful
task up and gets it as active at the probing rebalance after its lag reached the acceptable
recovery lag (KIP-441's hand-over, which Apache Kafka 4.4's streams groups lack)."""

from __future__ import annotations

from streamtasks.coordinator.streams import StreamsCoordinatorConfig
from streamtasks.coordinator.timers import TimerKey, TimerKind

from .support import GROUP, Harness

ALL = frozenset(("0", p) for p in range(4))
CONFIG = StreamsCoordinatorConfig(
    assignor="high_availability",
    acceptable_recovery_lag=100,
    probing_rebalance_interval_ms=60_000,
    session_timeout_ms=600_000,
    heartbeat_interval_ms=1_000,
)


def test_a_new_process_warms_up_then_takes_over_at_the_probing_rebalance() -> None:
    h = Harness(CONFIG)
    a = h.add("a", "p1")
    h.round(2)
    assert a.active == ALL
    a.offsets = {t: 10_000 for t in ALL}
    a.end_offsets = {t: 10_000 for t in ALL}
    h.round()
    b = h.add("b", "p2")
    h.round(3)
    assert a.active == ALL, "no process is caught up but a: the actives stay"
    assert b.active == frozenset()
    assert len(b.warmup) == 2
    probing = h.coordinator.timer_deadline(TimerKey(TimerKind.PROBING, GROUP))
    assert probing is not None
    # b restores halfway: still behind by more than the acceptable lag
    b.offsets = {t: 5_000 for t in b.warmup}
    h.round()
    h.advance(probing - h.now)
    h.round(3)
    assert b.active == frozenset()
    # b catches up; at the next probing rebalance it takes the two tasks
    b.offsets = {t: 9_950 for t in b.warmup}
    h.round()
    probing = h.coordinator.timer_deadline(TimerKey(TimerKind.PROBING, GROUP))
    assert probing is not None
    h.advance(probing - h.now)
    h.round(4)
    assert len(b.active) == 2
    assert len(a.active) == 2
    assert h.all_active() == ALL
    assert b.warmup == frozenset()


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
