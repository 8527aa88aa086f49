"""The member-side rebalance triggers: warm-up caught up, standby lag growing, rate limit."""

from __future__ import annotations

import pytest

from streamtasks.errors import ConfigError, LocalProtocolError
from streamtasks.streams import LagTrigger, RebalanceTrigger
from topology import TaskId

W, W2, SB, OTHER = TaskId(1, 0), TaskId(1, 1), TaskId(1, 2), TaskId(0, 0)


def trigger(*, lag: int = 100, window: int = 1_000, interval: int = 500) -> LagTrigger:
    t = LagTrigger(acceptable_recovery_lag=lag, growth_window_ms=window, min_interval_ms=interval)
    t.reset(warmups=[W, W2], standbys=[SB], now_ms=0)
    return t


def test_nothing_observed_nothing_to_do() -> None:
    t = trigger()
    assert t.poll(0) is None
    assert t.next_deadline_ms(0) is None


def test_warmup_within_acceptable_lag_triggers_caught_up() -> None:
    t = trigger()
    t.observe(W, 500, 10)
    assert t.poll(10) is None
    t.observe(W, 100, 20)
    assert t.next_deadline_ms(20) == 20
    got = t.poll(20)
    assert isinstance(got, RebalanceTrigger)
    assert (got.task, got.lag, got.kind) == (W, 100, "caught_up")
    assert "caught up" in got.reason


def test_warmup_caught_up_triggers_once_per_assignment() -> None:
    t = trigger(interval=0)
    t.observe(W, 0, 10)
    assert t.poll(10) is not None
    t.observe(W, 0, 20)
    assert t.poll(20) is None


def test_plain_standby_caught_up_never_triggers() -> None:
    t = trigger()
    for now in range(0, 5_000, 100):
        t.observe(SB, 0, now)
    assert t.poll(5_000) is None


def test_tasks_that_are_neither_warmup_nor_standby_are_ignored() -> None:
    t = trigger()
    t.observe(OTHER, 0, 0)
    t.observe(OTHER, 10, 5_000)
    assert t.poll(5_000) is None
    assert t.pending == ()


def test_standby_lag_rising_over_the_window_triggers_lag_growing() -> None:
    t = trigger(window=1_000)
    t.observe(SB, 10, 0)
    t.observe(SB, 10, 400)
    t.observe(SB, 30, 900)
    assert t.poll(900) is None  # not for a whole window yet
    t.observe(SB, 40, 1_000)
    got = t.poll(1_000)
    assert got is not None
    assert (got.task, got.lag, got.kind) == (SB, 40, "lag_growing")


def test_lag_growing_triggers_once_per_assignment() -> None:
    t = trigger(window=100, interval=0)
    t.observe(SB, 1, 0)
    t.observe(SB, 2, 100)
    assert t.poll(100) is not None
    t.observe(SB, 3, 200)
    assert t.poll(200) is None


def test_a_lag_that_falls_restarts_the_window() -> None:
    t = trigger(window=1_000)
    t.observe(SB, 10, 0)
    t.observe(SB, 50, 600)
    t.observe(SB, 20, 700)  # fell: the run starts again here
    t.observe(SB, 60, 1_600)
    assert t.poll(1_600) is None
    t.observe(SB, 70, 1_700)
    got = t.poll(1_700)
    assert got is not None
    assert got.kind == "lag_growing"


def test_a_flat_lag_is_not_growing() -> None:
    t = trigger(window=100)
    for now in range(0, 1_000, 50):
        t.observe(SB, 500, now)
    assert t.poll(1_000) is None


def test_warmup_lag_growing_triggers_too() -> None:
    t = trigger(lag=0, window=100)
    t.observe(W, 5, 0)
    t.observe(W, 9, 100)
    got = t.poll(100)
    assert got is not None
    assert (got.task, got.kind) == (W, "lag_growing")


def test_rate_limit_holds_the_second_trigger_back_until_the_interval_passed() -> None:
    t = trigger(interval=500)
    t.observe(W, 0, 0)
    t.observe(W2, 0, 10)
    first = t.poll(10)
    assert first is not None
    assert first.task == W
    assert t.poll(300) is None  # suppressed, still pending
    assert t.next_deadline_ms(300) == 510
    assert [p.task for p in t.pending] == [W2]
    second = t.poll(510)
    assert second is not None
    assert second.task == W2
    assert t.next_deadline_ms(510) is None


def test_rate_limit_survives_a_reset() -> None:
    t = trigger(interval=500)
    t.observe(W, 0, 0)
    assert t.poll(0) is not None
    t.reset(warmups=[W], standbys=[], now_ms=100)
    t.observe(W, 0, 100)
    assert t.poll(100) is None
    assert t.next_deadline_ms(100) == 500
    assert t.poll(500) is not None


def test_reset_forgets_observations_and_pending_triggers() -> None:
    t = trigger(window=1_000)
    t.observe(SB, 1, 0)
    t.observe(W, 0, 10)
    t.reset(warmups=[W], standbys=[SB], now_ms=20)
    assert t.pending == ()
    t.observe(SB, 5, 1_000)  # the run before the reset does not count
    assert t.poll(1_000) is None


def test_a_warmup_already_caught_up_at_reset_triggers_once_more() -> None:
    t = trigger(interval=0)
    t.observe(W, 0, 0)
    assert t.poll(0) is not None
    t.reset(warmups=[W], standbys=[], now_ms=10)
    t.observe(W, 0, 20)
    got = t.poll(20)
    assert got is not None
    assert got.kind == "caught_up"


def test_a_task_in_both_sets_is_a_warmup() -> None:
    t = LagTrigger(acceptable_recovery_lag=10)
    t.reset(warmups=[W], standbys=[W, SB], now_ms=0)
    assert (t.warmups, t.standbys) == (frozenset({W}), frozenset({SB}))


def test_time_going_backwards_restarts_the_window() -> None:
    t = trigger(window=100)
    t.observe(SB, 1, 1_000)
    t.observe(SB, 2, 500)
    t.observe(SB, 3, 550)
    assert t.poll(550) is None


def test_negative_lag_is_refused() -> None:
    with pytest.raises(LocalProtocolError):
        trigger().observe(W, -1, 0)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"acceptable_recovery_lag": -1},
        {"acceptable_recovery_lag": 0, "growth_window_ms": 0},
        {"acceptable_recovery_lag": 0, "min_interval_ms": -1},
    ],
)
def test_bad_settings_are_refused(kwargs: dict[str, int]) -> None:
    with pytest.raises(ConfigError):
        LagTrigger(**kwargs)
