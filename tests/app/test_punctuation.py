"""The schedule logic of punctuation, pure: an injected clock, no task set, no event loop."""

from __future__ import annotations

from typing import Any

import pytest

from streamtasks.app.punctuation import PunctuationType, Schedule, ScheduleQueue, TaskPunctuation
from streamtasks.errors import ConfigError

STREAM = PunctuationType.STREAM_TIME
WALL = PunctuationType.WALL_CLOCK_TIME


class Clock:
    def __init__(self, now: int = 0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def fire(p: TaskPunctuation, kind: PunctuationType, log: list[tuple[str, int]]) -> None:
    """What the task set does: pop each due schedule, call it, hand it back."""
    queue, now = p.queue(kind), p.now(kind)
    while (s := queue.pop_due(now)) is not None:
        s.callback(None, now)
        queue.done(s, now)


def recorder(log: list[tuple[str, int]], name: str) -> Any:
    return lambda _ctx, ts: log.append((name, ts))


def advance(p: TaskPunctuation, ts: int, log: list[tuple[str, int]]) -> None:
    if p.observe(ts):
        fire(p, STREAM, log)


def test_stream_time_is_the_largest_timestamp_seen() -> None:
    p = TaskPunctuation(Clock())
    assert p.stream_time == -1
    for ts in (5, 3, 9, 7):
        p.observe(ts)
    assert p.stream_time == 9


def test_stream_time_fires_on_the_first_record_then_once_per_advance_past_each_due_time() -> None:
    p, log = TaskPunctuation(Clock()), list[tuple[str, int]]()
    p.schedule(100, STREAM, recorder(log, "a"))
    for ts in (10, 50, 99, 100, 150, 120, 250, 299, 300, 1_000):
        advance(p, ts, log)
    # due at 0 (first record), then aligned to multiples of 100; 100 → 250 skipped the 200 slot
    # (fires once, with the stream time, not the due time); 300 is due after 250; 1000 once.
    assert log == [("a", 10), ("a", 100), ("a", 250), ("a", 300), ("a", 1_000)]


def test_out_of_order_records_do_not_move_stream_time_back_nor_fire() -> None:
    p, log = TaskPunctuation(Clock()), list[tuple[str, int]]()
    p.schedule(10, STREAM, recorder(log, "a"))
    for ts in (25, 5, 12, 29):
        advance(p, ts, log)
    assert log == [("a", 25)]
    assert p.stream_time == 29


def test_no_record_no_stream_time_punctuation() -> None:
    p, log = TaskPunctuation(Clock()), list[tuple[str, int]]()
    p.schedule(10, STREAM, recorder(log, "a"))
    fire(p, STREAM, log)  # stream time -1: nothing due at it
    assert log == []


def test_wall_clock_starts_one_interval_after_scheduling_and_skips_missed_intervals() -> None:
    clock, log = Clock(1_000), list[tuple[str, int]]()
    p = TaskPunctuation(clock)
    p.schedule(100, WALL, recorder(log, "w"))
    assert p.next_wall_clock_ms() == 1_100
    for now in (1_050, 1_100, 1_150, 1_200, 1_730, 1_799, 1_800):
        clock.now = now
        fire(p, WALL, log)
    # 1200 → 1730 missed 1300..1700: one call at 1730, next due 1800 (the grid of 1000 + k*100)
    assert log == [("w", 1_100), ("w", 1_200), ("w", 1_730), ("w", 1_800)]


def test_schedules_fire_in_due_order_and_a_callback_may_cancel_itself() -> None:
    p, log = TaskPunctuation(Clock()), list[tuple[str, int]]()
    handles: dict[str, Any] = {}

    def once(_ctx: Any, ts: int) -> None:
        log.append(("once", ts))
        handles["once"].cancel()

    p.schedule(30, STREAM, recorder(log, "every30"))
    handles["once"] = p.schedule(20, STREAM, once)
    for ts in (1, 45, 70):
        advance(p, ts, log)
    assert log == [("every30", 1), ("once", 1), ("every30", 45), ("every30", 70)]
    assert handles["once"].cancelled


def test_cancel_stops_a_schedule_and_cancel_all_stops_every_one() -> None:
    clock, log = Clock(), list[tuple[str, int]]()
    p = TaskPunctuation(clock)
    a = p.schedule(10, STREAM, recorder(log, "a"))
    b = p.schedule(10, WALL, recorder(log, "b"))
    a.cancel()
    advance(p, 50, log)
    assert log == []
    assert len(p.queue(STREAM)) == 0
    assert len(p.queue(WALL)) == 1
    p.cancel_all()
    assert b.cancelled
    assert p.next_wall_clock_ms() is None
    clock.now = 1_000
    fire(p, WALL, log)
    assert log == []


@pytest.mark.parametrize("interval", [0, -5, 1.5, True])
def test_a_bad_interval_is_a_config_error(interval: Any) -> None:
    with pytest.raises(ConfigError, match="interval"):
        TaskPunctuation(Clock()).schedule(interval, STREAM, lambda _c, _t: None)


def test_a_bad_type_or_callback_is_a_config_error() -> None:
    p = TaskPunctuation(Clock())
    with pytest.raises(ConfigError, match="PunctuationType"):
        p.schedule(10, "stream_time", lambda _c, _t: None)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="callable"):
        p.schedule(10, STREAM, 42)  # type: ignore[arg-type]


def test_schedule_advance_is_kafkas_next() -> None:
    s = Schedule(due_ms=0, seq=0, interval_ms=100, callback=lambda _c, _t: None, handle=None)  # type: ignore[arg-type]
    s.advance(0)
    assert s.due_ms == 100
    s.advance(100)
    assert s.due_ms == 200
    s.advance(999)
    assert s.due_ms == 1_000


def test_queue_pops_only_what_is_due() -> None:
    q = ScheduleQueue()
    q.add(50, 10, lambda _c, _t: None)
    assert q.pop_due(49) is None
    s = q.pop_due(50)
    assert s is not None
    assert s.due_ms == 50
    assert q.next_due_ms() is None  # popped until done() hands it back
    q.done(s, 50)
    assert q.next_due_ms() == 60
