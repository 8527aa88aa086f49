"""The changelog reader: restores active tasks and keeps standby tasks up to date.

One aiokafka consumer without a group, manually assigned the changelog partitions of every
restoring active task and every standby task, each positioned at the task's changelog offset
(its checkpoint, or 0). :meth:`ChangelogReader.poll` applies what it fetched to the tasks'
stores and moves their positions. It also lists changelog end offsets, which give restore
targets, standby lags and the leader's view of every task's lag.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from typing import Any

from aiokafka import AIOKafkaConsumer
from aiokafka.errors import KafkaError

from streamtasks.app.racks import cluster_partition_racks
from streamtasks.app.task import StreamTask
from streamtasks.errors import BrokerError
from streamtasks.runtime.aio import AioTopicPartition, from_aio, to_aio
from streamtasks.runtime.aiokafka_security import start_aiokafka
from streamtasks.runtime.security import ClientSettings
from topology.ids import TopicPartition

__all__ = ["ChangelogReader"]

log = logging.getLogger("streamtasks.app.changelog")


class ChangelogReader:
    """Reads changelog partitions into task stores (see the module docstring)."""

    def __init__(
        self,
        bootstrap: str | ClientSettings,
        *,
        client_id: str,
        max_records: int = 10_000,
        isolation_level: str = "read_uncommitted",
    ) -> None:
        self._settings = ClientSettings.of(bootstrap)
        #: ``read_committed`` under exactly-once: aborted writes never reach a store.
        self._isolation_level = isolation_level
        self._client_id = client_id
        self._max_records = max_records
        self._owners: dict[TopicPartition, StreamTask] = {}
        self._consumer_obj: AIOKafkaConsumer | None = None
        self._probe_obj: AIOKafkaConsumer | None = None
        self._probe_lock = asyncio.Lock()
        #: How often :meth:`track` moved the reader, and that count when the last fetch returned:
        #: a batch fetched before a move must not be applied (see :meth:`apply`).
        self._moves = 0
        self._fetched_at_move = 0

    @property
    def _consumer(self) -> AIOKafkaConsumer:
        if self._consumer_obj is None:
            raise BrokerError("the changelog reader is not started")
        return self._consumer_obj

    @property
    def _probe(self) -> AIOKafkaConsumer:
        if self._probe_obj is None:
            raise BrokerError("the changelog reader is not started")
        return self._probe_obj

    async def start(self) -> None:
        """Create and start the clients (aiokafka needs a running event loop for that)."""
        if self._consumer_obj is not None:
            return
        self._consumer_obj = AIOKafkaConsumer(
            **self._settings.aiokafka_kwargs(),
            group_id=None,
            client_id=f"{self._client_id}-restore",
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            isolation_level=self._isolation_level,
        )
        self._probe_obj = AIOKafkaConsumer(
            **self._settings.aiokafka_kwargs(),
            group_id=None,
            client_id=f"{self._client_id}-end-offsets",
            enable_auto_commit=False,
            fetch_max_wait_ms=20,
            max_partition_fetch_bytes=1024,
        )
        await start_aiokafka(self._consumer_obj, self._settings, "the changelog reader")
        await start_aiokafka(self._probe_obj, self._settings, "the changelog end-offset reader")

    async def stop(self) -> None:
        consumer, probe = self._consumer_obj, self._probe_obj
        self._consumer_obj = self._probe_obj = None
        for client in (consumer, probe):
            if client is not None:
                await client.stop()

    def track(self, tasks: Iterable[StreamTask]) -> None:
        """Read the changelogs of exactly ``tasks`` (restoring actives and standbys), each from
        its task's current changelog offset."""
        owners = {tp: t for t in tasks for tp in t.changelog_partitions}
        changed = set(owners) != set(self._owners) or any(owners[tp] is not self._owners[tp] for tp in owners)
        self._owners = owners
        if not changed:
            return
        self._moves += 1
        self._consumer.assign([to_aio(tp) for tp in sorted(owners)])
        for tp, task in sorted(owners.items()):
            self._consumer.seek(to_aio(tp), task.changelog_offsets.get(tp, 0))

    @property
    def tracked(self) -> Mapping[TopicPartition, StreamTask]:
        return self._owners

    async def fetch(self, timeout_ms: int = 100) -> dict[TopicPartition, list[Any]]:
        """Fetch once (without applying: the caller applies under its lock)."""
        if not self._owners:
            return {}
        try:
            batch = await self._consumer.getmany(timeout_ms=timeout_ms, max_records=self._max_records)
        except KafkaError as exc:
            raise BrokerError(f"changelog fetch failed: {exc}") from exc
        self._fetched_at_move = self._moves
        return {from_aio(a): records for a, records in batch.items() if records}

    def apply(self, batch: Mapping[TopicPartition, list[Any]]) -> int:
        """Apply fetched records to the tasks that track their partitions now; records below a
        task's position (fetched before a seek) are skipped. Returns how many were applied.

        A batch that was fetched before :meth:`track` last moved the reader is dropped whole:
        its records may start above where a newly tracked task stands (a task rebuilt from
        offset 0 after a dirty close, say), and applying them would skip the records between;
        the reader fetches them again from the task's own offsets."""
        if self._fetched_at_move != self._moves:
            return 0
        applied = 0
        for tp, records in batch.items():
            task = self._owners.get(tp)
            if task is None or task.closed:
                continue
            floor = task.changelog_offsets.get(tp, 0)
            fresh = [(r.key or b"", r.value) for r in records if r.offset >= floor]
            if fresh:
                applied += task.apply_changelog(tp, fresh, records[-1].offset + 1)
        return applied

    async def partition_racks(self, topics: Iterable[str]) -> dict[TopicPartition, frozenset[str]]:
        """The racks of the replicas of ``topics``' partitions, from the end-offset reader's
        cluster metadata (the topics are added to what it tracks, which refreshes it once)."""
        client = self._probe._client  # aiokafka has no public accessor of its cluster metadata
        wanted = sorted(set(topics))
        for topic in wanted:
            await client.add_topic(topic)
        return cluster_partition_racks(client.cluster, wanted)

    async def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """The log end offset (high watermark) of every partition.

        ListOffsets(latest) first, then a fetch from there on a separate consumer, whose
        response carries the high watermark: the larger of the two is the answer. On Apache
        Kafka both agree; the embedded broker answers ListOffsets with the base offset of the
        last batch plus one, short of the end by up to a batch (docs/testing.md), and a restore
        that trusted it would stop early.
        """
        wanted = sorted(set(partitions))
        if not wanted:
            return {}
        atps = [to_aio(tp) for tp in wanted]
        async with self._probe_lock:
            try:
                listed = await self._probe.end_offsets(atps)
                if self._probe.assignment() != set(atps):  # assign() also refreshes metadata
                    self._probe.assign(atps)
                for atp in atps:
                    self._probe.seek(atp, listed[atp])
                marks: dict[AioTopicPartition, int | None] = {}
                for _ in range(20):
                    await self._probe.getmany(timeout_ms=50, max_records=1)
                    marks = {atp: self._probe.highwater(atp) for atp in atps}
                    if all(m is not None for m in marks.values()):
                        break
            except KafkaError as exc:
                raise BrokerError(f"listing changelog end offsets failed: {exc}") from exc
        return {from_aio(a): max(int(listed[a]), int(marks.get(a) or 0)) for a in atps}

    async def positions(self) -> dict[TopicPartition, int]:
        """The reader's fetch position of every tracked partition (skips over compacted gaps
        and transaction markers, which record offsets alone do not)."""
        out: dict[TopicPartition, int] = {}
        for tp in sorted(self._owners):
            try:
                out[tp] = int(await self._consumer.position(to_aio(tp)))
            except (KafkaError, AssertionError, ValueError):
                continue
        return out
