"""Restore progress of one active task: the one place its fields are written.

A task that becomes active restores its changelogged stores up to the changelog end offsets
listed when the restore started (its *target*) before it processes. :class:`RestoreProgress`
holds that target, the records applied since the restore started and when it started; its
methods are the only writers. The task set starts a restore (:meth:`RestoreProgress.start`) and
stops one when the task becomes a standby (:meth:`RestoreProgress.stop`), the task counts the
changelog records it applies (:meth:`RestoreProgress.count`), and the
:class:`~streamtasks.app.restorer.Restorer` finishes it (:meth:`RestoreProgress.finish`), which
is when ``RestoreCompleted`` is emitted. :class:`~streamtasks.app.task.StreamTask` and the rest
only read it (quixstreams' ``state/recovery.py`` keeps one such object per partition).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from topology.ids import TopicPartition

__all__ = ["RestoreProgress"]


class RestoreProgress:
    """One task's restore: target, records restored, start time (module docstring)."""

    __slots__ = ("_records", "_started_ms", "_target")

    def __init__(self) -> None:
        self._target: Mapping[TopicPartition, int] | None = None
        self._records = 0
        self._started_ms: int | None = None

    @property
    def target(self) -> Mapping[TopicPartition, int] | None:
        """The changelog end offsets to restore up to; None when not restoring."""
        return self._target

    @property
    def records(self) -> int:
        """Changelog records applied since the restore started."""
        return self._records

    @property
    def started_ms(self) -> int | None:
        """Wall-clock milliseconds when the restore started; None before any restore."""
        return self._started_ms

    def done(self, positions: Mapping[TopicPartition, int]) -> bool:
        """Whether ``positions`` reached the target (True when not restoring)."""
        if self._target is None:
            return True
        return all(positions.get(tp, 0) >= end for tp, end in self._target.items())

    def start(self, target: Mapping[TopicPartition, int], *, now_ms: int) -> None:
        """Restore up to ``target``, counting from 0, started at ``now_ms``."""
        self._target = MappingProxyType(dict(target))
        self._records = 0
        self._started_ms = now_ms

    def count(self, applied: int) -> None:
        """``applied`` changelog records were applied while restoring."""
        self._records += applied

    def stop(self) -> None:
        """The task is no longer restoring (it became a standby)."""
        self._target = None

    def finish(self, *, now_ms: int) -> tuple[int, int]:
        """The restore reached its target: stop, and return (records, duration in ms)."""
        started = self._started_ms or now_ms
        self._target = None
        return self._records, now_ms - started
