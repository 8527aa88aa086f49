"""The simulator's clock and its seeded, deterministic event queue.

Events are kept in a heap of ``(time_ms, seq, item)``: ``seq`` increases with every
:meth:`Scheduler.schedule` call, so two events due at the same millisecond run in the order they
were scheduled and a run is a pure function of its seed. Nothing here reads a real clock.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Generic, TypeVar

from streamtasks.errors import LocalProtocolError

__all__ = ["Scheduled", "Scheduler", "SimClock"]

T = TypeVar("T")


class SimClock:
    """Simulated time in milliseconds; only the scheduler moves it, and only forward."""

    __slots__ = ("_now_ms",)

    def __init__(self, start_ms: int = 0) -> None:
        self._now_ms = start_ms

    @property
    def now_ms(self) -> int:
        return self._now_ms

    def advance_to(self, when_ms: int) -> None:
        if when_ms < self._now_ms:
            raise LocalProtocolError(f"simulated time cannot go back from {self._now_ms} to {when_ms}")
        self._now_ms = when_ms


@dataclass(frozen=True, slots=True, kw_only=True)
class Scheduled(Generic[T]):
    """One event taken off the queue."""

    time_ms: int
    seq: int
    item: T


class Scheduler(Generic[T]):
    """A heap of timed items; ``pop`` advances the clock to the popped item's time."""

    __slots__ = ("_cancelled", "_heap", "_seq", "clock")

    def __init__(self, clock: SimClock | None = None) -> None:
        self.clock = clock if clock is not None else SimClock()
        self._heap: list[tuple[int, int, T]] = []
        self._seq = 0
        self._cancelled: set[int] = set()

    @property
    def now_ms(self) -> int:
        return self.clock.now_ms

    def schedule(self, at_ms: int, item: T) -> int:
        """Queue ``item`` at ``at_ms`` (not before now); returns a token for :meth:`cancel`."""
        at_ms = max(at_ms, self.clock.now_ms)
        self._seq += 1
        heapq.heappush(self._heap, (at_ms, self._seq, item))
        return self._seq

    def cancel(self, token: int) -> None:
        """Drop a queued item (lazily: it is skipped when it reaches the top)."""
        self._cancelled.add(token)

    def peek_time(self) -> int | None:
        self._drop_cancelled()
        return self._heap[0][0] if self._heap else None

    def pop(self) -> Scheduled[T] | None:
        """The next item, or ``None`` when the queue is empty."""
        self._drop_cancelled()
        if not self._heap:
            return None
        at_ms, seq, item = heapq.heappop(self._heap)
        self.clock.advance_to(at_ms)
        return Scheduled(time_ms=at_ms, seq=seq, item=item)

    def __len__(self) -> int:
        return len(self._heap) - len(self._cancelled)

    def _drop_cancelled(self) -> None:
        while self._heap and self._heap[0][1] in self._cancelled:
            _, seq, _ = heapq.heappop(self._heap)
            self._cancelled.discard(seq)
