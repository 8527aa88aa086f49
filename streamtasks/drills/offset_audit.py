"""The per-offset audit of a stateful drill: what the broker acknowledged against what was processed.

The drill's producer records every input record's (partition, offset) from the broker's
acknowledgement (:meth:`OffsetAudit.acknowledged`); the app under test writes the (partition,
offset) of every input record it processed to an audit topic (``stateful_app.audited``), and
:class:`AuditTopicReader` reads that topic back as it grows. An acknowledged offset that never
shows up there was lost, whatever the per-key totals say: a duplicate elsewhere cannot hide it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from dataclasses import dataclass
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from streamtasks.drills.ledger import RecordAudit, offset_id, offset_runs
from streamtasks.drills.topic_read import read_topic
from streamtasks.runtime.aiokafka_security import start_aiokafka
from streamtasks.runtime.security import ClientSettings

__all__ = ["AuditTopicReader", "OffsetAudit", "OffsetAuditReport", "reread_audit_topic"]


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetAuditReport:
    acknowledged: int
    processed: int
    lost: int
    #: The lost offsets as contiguous runs per partition (``"3:[120..229]"``), the first few.
    lost_runs: tuple[str, ...]
    duplicates: int

    def line(self) -> str:
        runs = f" ({', '.join(self.lost_runs)})" if self.lost_runs else ""
        return (
            f"{self.acknowledged:,} input offsets acknowledged by the broker; {self.lost:,} never "
            f"processed{runs}; {self.duplicates:,} processed more than once"
        )


class OffsetAudit:
    """Acknowledged input offsets versus processed ones (see the module docstring)."""

    def __init__(self) -> None:
        self._records = RecordAudit()
        #: The key of each acknowledged record, by its id.
        self._keys: dict[str, bytes] = {}
        #: The highest input offset seen processed, by partition.
        self._highest: dict[int, int] = {}

    async def send(
        self,
        producer: AIOKafkaProducer,
        topic: str,
        *,
        key: bytes,
        value: bytes,
        partition: int | None = None,
    ) -> asyncio.Future[Any]:
        """Send one input record; its offset (and key) is recorded when the broker acknowledges
        it. Returns the send's future (its metadata once acknowledged)."""
        future: asyncio.Future[Any] = await producer.send(topic, key=key, value=value, partition=partition)
        future.add_done_callback(functools.partial(self._acked, key))
        return future

    def _acked(self, key: bytes, future: asyncio.Future[object]) -> None:
        if not future.cancelled() and future.exception() is None:
            meta = future.result()
            record_id = offset_id(meta.partition, meta.offset)  # type: ignore[attr-defined]
            self._records.produced(record_id)
            self._keys[record_id] = key

    def key_of(self, record_id: str) -> bytes | None:
        """The key of the acknowledged record ``record_id`` (None: not acknowledged)."""
        return self._keys.get(record_id)

    def acknowledged(self, partition: int, offset: int) -> None:
        self._records.produced(offset_id(partition, offset))

    def processed(self, record_id: str) -> None:
        self._records.consumed(record_id)
        partition, _, offset = record_id.partition(":")
        if offset.isdigit() and partition.isdigit():
            p, o = int(partition), int(offset)
            self._highest[p] = max(o, self._highest.get(p, o))

    def highest_processed(self, partition: int) -> int | None:
        """The highest input offset of ``partition`` seen processed (None: none yet)."""
        return self._highest.get(partition)

    def lost(self) -> list[str]:
        """The ids of acknowledged offsets not (yet) seen processed."""
        return self._records.lost()

    def complete(self) -> bool:
        return not self._records.lost()

    def report(self, max_runs: int = 8) -> OffsetAuditReport:
        lost = self._records.lost()
        return OffsetAuditReport(
            acknowledged=self._records.produced_count,
            processed=self._records.consumed_count,
            lost=len(lost),
            lost_runs=tuple(offset_runs(lost)[:max_runs]),
            duplicates=self._records.duplicates(),
        )


class AuditTopicReader:
    """Reads the audit topic from its beginning into an :class:`OffsetAudit`, until stopped.

    The reader is a plain aiokafka consumer, so it also notes where its own reading of the
    audit topic jumped (``skipped``: (partition, expected offset, offset read)): a loss is only
    a loss if the audit records were never written, not if this reader missed them
    (:func:`reread_audit_topic` reads the topic again to tell)."""

    def __init__(
        self,
        bootstrap: str | ClientSettings,
        topic: str,
        audit: OffsetAudit,
        *,
        isolation_level: str = "read_uncommitted",
    ) -> None:
        self._settings, self._topic, self._audit = ClientSettings.of(bootstrap), topic, audit
        #: ``read_committed`` for an exactly-once app: only what its transactions committed counts.
        self._isolation_level = isolation_level
        self._task: asyncio.Task[None] | None = None
        self._next: dict[int, int] = {}
        self.skipped: list[tuple[int, int, int]] = []

    async def start(self) -> None:
        consumer = AIOKafkaConsumer(
            self._topic,
            **self._settings.aiokafka_kwargs(),
            group_id=None,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            isolation_level=self._isolation_level,
        )
        await start_aiokafka(consumer, self._settings, "the audit topic's reader")
        self._task = asyncio.get_running_loop().create_task(self._read(consumer))

    async def _read(self, consumer: AIOKafkaConsumer) -> None:
        try:
            while True:
                batch = await consumer.getmany(timeout_ms=500)
                for records in batch.values():
                    for r in records:
                        expected = self._next.get(r.partition)
                        if expected is not None and r.offset != expected:
                            self.skipped.append((r.partition, expected, r.offset))
                        self._next[r.partition] = r.offset + 1
                        if r.value is not None:
                            self._audit.processed(r.value.decode())
        finally:
            await consumer.stop()

    async def wait_complete(self, timeout_s: float) -> bool:
        """Wait until every acknowledged offset was seen processed (or the timeout)."""
        deadline = asyncio.get_running_loop().time() + timeout_s
        while not self._audit.complete():
            if asyncio.get_running_loop().time() >= deadline:
                return False
            await asyncio.sleep(0.25)
        return True

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None


async def reread_audit_topic(bootstrap: str | ClientSettings, topic: str) -> set[str]:
    """Every processed-offset id in ``topic``, read again from its beginning by a fresh
    consumer: the second opinion when the audit reports a loss."""
    seen: set[str] = set()
    await read_topic(bootstrap, topic, lambda r: seen.add(r.value.decode()) if r.value is not None else None)
    return seen
