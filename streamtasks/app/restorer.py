"""The restorer: one owner of everything the app reads from changelogs.

It owns the :class:`~streamtasks.app.changelog.ChangelogReader`, the restore progress of active
tasks (which changelogs are read, when a restore is done and its ``RestoreCompleted`` event; the
per-task fields are a :class:`~streamtasks.app.restore_progress.RestoreProgress`, written only by
its methods and read by the task),
the changelog end offsets the leader computes lags from (refreshed by :meth:`read_lags`), and the
standby and warm-up lags. The app calls down into it; it never calls back up: what it needs from
the member's consumer (pausing the source partitions of restoring tasks) is passed to the calls
that change it, as a :class:`SourcePartitions`. The shape follows quixstreams'
``state/recovery.py``.

Every method but :meth:`fetch`, :meth:`end_offsets` and :meth:`read_lags` mutates tasks and
runs under the app lock.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Any, Protocol

from streamtasks.app.changelog import ChangelogReader
from streamtasks.app.events import AppEvent, RestoreCompleted, wall_ms
from streamtasks.app.task import StreamTask
from streamtasks.app.tasks import TaskSet
from topology.ids import TaskId, TopicPartition

__all__ = ["Restorer", "SourcePartitions"]


class SourcePartitions(Protocol):
    """What the restorer pauses: the member consumer's owned source partitions."""

    def assignment(self) -> frozenset[TopicPartition]: ...

    def pause(self, partitions: Iterable[TopicPartition]) -> None: ...

    def resume(self, partitions: Iterable[TopicPartition]) -> None: ...


class Restorer:
    """Restores active tasks, keeps standbys reading and measures lags (module docstring)."""

    def __init__(
        self,
        reader: ChangelogReader,
        tasks: TaskSet,
        *,
        topics: Iterable[str],
        emit: Callable[[AppEvent], None],
        read_racks: bool = False,
    ) -> None:
        self._reader = reader
        self._tasks = tasks
        #: The topics tasks read; owned partitions of any other (a faust group's changelogs and
        #: leader topic, while the group runs faust's protocol) are never handed out.
        self._topics = frozenset(topics)
        self._emit = emit
        #: Changelog end offsets as last listed (:meth:`read_lags`), for the leader's lags.
        self._ends: Mapping[TopicPartition, int] = MappingProxyType({})
        #: KIP-925: the replica racks of the topics' partitions, refreshed with the end offsets
        #: when ``read_racks`` (a rack-aware assignment strategy is set).
        self._read_racks = read_racks
        self._racks: Mapping[TopicPartition, frozenset[str]] = MappingProxyType({})

    # -- lifecycle -----------------------------------------------------------------------------

    async def start(self) -> None:
        await self._reader.start()

    async def stop(self) -> None:
        await self._reader.stop()

    # -- end offsets and lags ------------------------------------------------------------------

    @property
    def reader(self) -> ChangelogReader:
        return self._reader

    def cached_end_offsets(self) -> Mapping[TopicPartition, int]:
        """The changelog end offsets as last listed (what the leader computes lags from)."""
        return self._ends

    def remember_end_offsets(self, ends: Mapping[TopicPartition, int]) -> None:
        """Keep ``ends`` as the changelog end offsets (:meth:`cached_end_offsets`)."""
        self._ends = MappingProxyType(dict(ends))

    async def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """The end offsets of ``partitions`` listed now (restore targets)."""
        return await self._reader.end_offsets(partitions)

    async def refresh_end_offsets(self) -> Mapping[TopicPartition, int]:
        """List the end offset of every changelog partition of the topology and keep them
        (and, with ``read_racks``, the replica racks of the input and changelog partitions)."""
        self.remember_end_offsets(await self._reader.end_offsets(self._tasks.all_changelog_partitions()))
        if self._read_racks:
            # the changelogs too: the assignor moves standbys to read them on their rack
            changelogs = {tp.topic for tp in self._tasks.all_changelog_partitions()}
            self._racks = MappingProxyType(await self._reader.partition_racks(self._topics | changelogs))
        return self._ends

    def cached_partition_racks(self) -> Mapping[TopicPartition, frozenset[str]]:
        """The input and changelog partitions' replica racks as last read (what the leader's
        assignor weighs)."""
        return self._racks

    async def read_lags(self) -> dict[TaskId, int]:
        """Refresh the end offsets (:meth:`refresh_end_offsets`), then the lag of every standby
        and warm-up task that has one, in task order. Raises ``StreamTasksError`` when the end
        offsets cannot be listed (the cache is left as it was)."""
        ends = await self.refresh_end_offsets()
        lags: dict[TaskId, int] = {}
        for task in self._tasks.standbys():
            lag = task.lag(ends)
            if lag is not None:
                lags[task.id] = lag
        return lags

    # -- restore progress ----------------------------------------------------------------------

    def sync(self, source: SourcePartitions) -> None:
        """Pause the source partitions of restoring tasks (and owned partitions no task reads),
        resume the others, and point the changelog reader at the tasks that read changelogs now
        (after any task change)."""
        owned = source.assignment()
        paused = self._tasks.paused_partitions() | {tp for tp in owned if tp.topic not in self._topics}
        source.resume(tp for tp in owned if tp not in paused)
        source.pause(paused)
        self._reader.track(self._tasks.changelog_readers())

    def finish_restores(self, source: SourcePartitions) -> None:
        """Active tasks that reached their restore target start processing."""
        finished = [t for t in self._tasks.restoring() if t.restore_done()]
        for task in finished:
            self._restored(task)
        if finished:
            self.sync(source)

    def _restored(self, task: StreamTask) -> None:
        now = wall_ms()
        records, duration_ms = task.restore.finish(now_ms=now)
        self._emit(RestoreCompleted(at_ms=now, task=task.id, records=records, duration_ms=duration_ms))

    # -- reading changelogs --------------------------------------------------------------------

    async def fetch(self) -> dict[TopicPartition, list[Any]]:
        """Fetch once for the tracked changelogs (outside the lock; :meth:`apply` applies)."""
        if self._reader.tracked:
            return await self._reader.fetch(timeout_ms=100)
        await asyncio.sleep(0.05)
        return {}

    async def apply(self, batch: Mapping[TopicPartition, list[Any]], source: SourcePartitions) -> None:
        """Apply a fetched batch (the reader drops one fetched before it last moved). After an
        empty fetch, a restoring task's position moves to the reader's (past compacted gaps and
        transaction markers). Then finish the restores that are done."""
        reader = self._reader
        reader.apply(batch)
        if not batch and reader.tracked:
            for tp, pos in (await reader.positions()).items():
                owner = reader.tracked.get(tp)
                if owner is not None and owner.restoring:
                    owner.changelog_offsets[tp] = max(owner.changelog_offsets.get(tp, 0), pos)
        self.finish_restores(source)
