"""Punctuation: callbacks a task runs on stream time or wall-clock time (Kafka Streams'
``ProcessorContext.schedule``).

A processor registers its schedules in its subtopology's ``init(ctx)`` hook
(:class:`~streamtasks.app.processor.ProcessorSpec`), which runs on every process that starts the
task (after its restore), so a task that moves to another process schedules again there::

    def init(ctx: ProcessorContext) -> None:
        ctx.schedule(60_000, PunctuationType.STREAM_TIME, emit_closed_windows)

    def emit_closed_windows(ctx: ProcessorContext, timestamp_ms: int) -> None: ...

The rules are Kafka Streams' (``PunctuationQueue``, ``PunctuationSchedule``):

* ``STREAM_TIME``: a task's stream time is the largest timestamp among the records it has
  processed (-1 before the first). A schedule is aligned to 0: it is first due at 0 (it fires
  on the first record) and then at the next multiple of ``interval_ms`` above the stream time
  it fired at. It fires at most once per advance, however many intervals the advance skipped
  (stream time 0 → 250 with a 100 ms interval fires once, at 250, and next at 300).
* ``WALL_CLOCK_TIME``: first due ``interval_ms`` after it was scheduled, then at the next
  ``start + k * interval_ms`` above the clock time it fired at (a stalled loop fires once on
  waking, not once per missed interval).

A callback gets ``(ctx, timestamp_ms)``: the stream time or the clock time that fired it (not the
time it was due). What it writes is sent and committed like what processing writes; its output
records carry ``timestamp_ms`` and no headers. A schedule ends when its :class:`Cancellable` is
cancelled (a callback may cancel its own) and when the task stops running here (revoked, closed,
recycled to standby).

This module is pure: :class:`TaskPunctuation` keeps the schedules and says which is due; the task
set (:mod:`streamtasks.app.tasks`) runs the callbacks.
"""

from __future__ import annotations

import enum
import heapq
import itertools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from streamtasks.errors import ConfigError

__all__ = [
    "Cancellable",
    "Punctuator",
    "PunctuationType",
    "Schedule",
    "ScheduleQueue",
    "TaskPunctuation",
]

#: A punctuation callback: ``callback(ctx, timestamp_ms)``, sync or async (``ctx`` is the task's
#: :class:`~streamtasks.app.context.ProcessorContext`).
Punctuator = Callable[[Any, int], Awaitable[None] | None]


class PunctuationType(enum.Enum):
    """Which time drives a schedule (Kafka Streams' ``PunctuationType``)."""

    STREAM_TIME = "stream_time"
    WALL_CLOCK_TIME = "wall_clock_time"


class Cancellable:
    """The handle :meth:`TaskPunctuation.schedule` returns; :meth:`cancel` ends the schedule."""

    __slots__ = ("_cancelled",)

    def __init__(self) -> None:
        self._cancelled = False

    def cancel(self) -> None:
        self._cancelled = True

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    def __repr__(self) -> str:
        return f"Cancellable(cancelled={self._cancelled})"


@dataclass(slots=True, kw_only=True, order=True)
class Schedule:
    """One schedule: due at ``due_ms``, every ``interval_ms``."""

    due_ms: int
    seq: int
    interval_ms: int = field(compare=False)
    callback: Punctuator = field(compare=False)
    handle: Cancellable = field(compare=False)

    def advance(self, now_ms: int) -> None:
        """Fired at ``now_ms``: move to the next due time above it (Kafka's
        ``PunctuationSchedule.next``: missed intervals are skipped, not fired)."""
        due = self.due_ms + self.interval_ms
        if now_ms >= due:
            missed = (now_ms - self.due_ms) // self.interval_ms
            due = self.due_ms + (missed + 1) * self.interval_ms
        self.due_ms = due


class ScheduleQueue:
    """The schedules of one time type of one task, earliest first (Kafka's ``PunctuationQueue``)."""

    __slots__ = ("_heap", "_seq")

    def __init__(self) -> None:
        self._heap: list[Schedule] = []
        self._seq = itertools.count()

    def add(self, due_ms: int, interval_ms: int, callback: Punctuator) -> Cancellable:
        handle = Cancellable()
        schedule = Schedule(
            due_ms=due_ms, seq=next(self._seq), interval_ms=interval_ms, callback=callback, handle=handle
        )
        heapq.heappush(self._heap, schedule)
        return handle

    def next_due_ms(self) -> int | None:
        """The earliest due time of a live schedule (None: none is left)."""
        while self._heap and self._heap[0].handle.cancelled:
            heapq.heappop(self._heap)
        return self._heap[0].due_ms if self._heap else None

    def pop_due(self, now_ms: int) -> Schedule | None:
        """The earliest live schedule due at ``now_ms`` (taken off the queue), or None. Fire it,
        then hand it to :meth:`done`."""
        due = self.next_due_ms()
        if due is None or due > now_ms:
            return None
        return heapq.heappop(self._heap)

    def done(self, schedule: Schedule, now_ms: int) -> None:
        """``schedule`` fired at ``now_ms``: queue its next time unless it was cancelled (by
        its own callback, say)."""
        if not schedule.handle.cancelled:
            schedule.advance(now_ms)
            heapq.heappush(self._heap, schedule)

    def cancel_all(self) -> None:
        for schedule in self._heap:
            schedule.handle.cancel()
        self._heap.clear()

    def __len__(self) -> int:
        return sum(1 for s in self._heap if not s.handle.cancelled)

    def __bool__(self) -> bool:
        """Whether any schedule (cancelled ones not yet dropped included) is queued: cheap."""
        return bool(self._heap)


class TaskPunctuation:
    """One running task's stream time and schedules (see the module docstring); ``clock``
    gives the wall-clock time in ms."""

    __slots__ = ("_clock", "_queues", "_stream", "stream_time")

    def __init__(self, clock: Callable[[], int]) -> None:
        self._clock = clock
        #: The largest timestamp among the records the task processed (-1 before the first).
        self.stream_time = -1
        self._queues = {kind: ScheduleQueue() for kind in PunctuationType}
        self._stream = self._queues[PunctuationType.STREAM_TIME]

    def schedule(self, interval_ms: int, kind: PunctuationType, callback: Punctuator) -> Cancellable:
        """Run ``callback(ctx, timestamp_ms)`` every ``interval_ms`` of ``kind`` time."""
        if not isinstance(kind, PunctuationType):
            raise ConfigError(f"punctuation type must be a PunctuationType, got {kind!r}")
        if isinstance(interval_ms, bool) or not isinstance(interval_ms, int) or interval_ms < 1:
            raise ConfigError(f"punctuation interval must be an int of at least 1 ms, got {interval_ms!r}")
        if not callable(callback):
            raise ConfigError(f"punctuation callback must be callable, got {callback!r}")
        # Kafka Streams: stream-time schedules are aligned to 0 (they fire on the first record),
        # wall-clock ones to the time they were made.
        first = 0 if kind is PunctuationType.STREAM_TIME else self._clock() + interval_ms
        return self._queues[kind].add(first, interval_ms, callback)

    def observe(self, timestamp_ms: int) -> bool:
        """A record with ``timestamp_ms`` was processed: advance the stream time. Returns
        whether a stream-time schedule is due now."""
        # called for every record: the common cases (no schedule, none due) stay short
        self.stream_time = max(self.stream_time, timestamp_ms)
        if not self._stream:
            return False
        due = self._stream.next_due_ms()
        return due is not None and 0 <= due <= self.stream_time

    def now(self, kind: PunctuationType) -> int:
        """The current time of ``kind``: the stream time or the clock's."""
        return self.stream_time if kind is PunctuationType.STREAM_TIME else self._clock()

    def queue(self, kind: PunctuationType) -> ScheduleQueue:
        return self._queues[kind]

    def next_wall_clock_ms(self) -> int | None:
        """When the earliest wall-clock schedule is due (None: there is none)."""
        return self._queues[PunctuationType.WALL_CLOCK_TIME].next_due_ms()

    def cancel_all(self) -> None:
        """The task stops running here: every schedule ends."""
        for queue in self._queues.values():
            queue.cancel_all()
