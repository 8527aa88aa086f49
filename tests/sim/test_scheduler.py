"""The seeded scheduler and the simulated clock."""

from __future__ import annotations

import pytest

from streamtasks.errors import LocalProtocolError
from streamtasks.sim.scheduler import Scheduler, SimClock


def test_items_come_out_by_time_then_by_scheduling_order() -> None:
    s: Scheduler[str] = Scheduler()
    s.schedule(10, "late")
    s.schedule(5, "first")
    s.schedule(5, "second")
    out = []
    while (item := s.pop()) is not None:
        out.append((item.time_ms, item.item))
    assert out == [(5, "first"), (5, "second"), (10, "late")]
    assert s.now_ms == 10


def test_cancelled_items_are_skipped() -> None:
    s: Scheduler[str] = Scheduler()
    token = s.schedule(3, "gone")
    s.schedule(4, "kept")
    s.cancel(token)
    assert s.peek_time() == 4
    popped = s.pop()
    assert popped is not None
    assert popped.item == "kept"
    assert s.pop() is None


def test_an_item_in_the_past_runs_now() -> None:
    s: Scheduler[str] = Scheduler(SimClock(100))
    s.schedule(50, "overdue")
    popped = s.pop()
    assert popped is not None
    assert popped.time_ms == 100


def test_clock_never_goes_back() -> None:
    clock = SimClock()
    clock.advance_to(7)
    with pytest.raises(LocalProtocolError):
        clock.advance_to(6)
