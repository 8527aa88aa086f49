"""The durable log of ``streamtasks coordinator``: one compacted topic in the backing cluster
holding the coordinator's records, the committed offsets (:mod:`streamtasks.coordinator.record_codec`)
and the streams groups' records (:mod:`streamtasks.coordinator.streams.record_codec`, told apart
by their record types 1071-1076).

Writes are appended in the order they were applied, by one writer task: each append is
acknowledged (``acks=all``) before its future resolves, and an append with no records
resolves only after every earlier one (Kafka's rule: a response that reads state waits until
that state is durable). A failed write is fatal: the host stops, and a restart replays the topic.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TypeGuard, cast, get_args

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from streamtasks.coordinator.record_codec import LogRecord, decode_log_record, encode_log_record
from streamtasks.coordinator.streams.record_codec import (
    StreamsRecordType,
    decode_streams_record,
    encode_streams_record,
)
from streamtasks.coordinator.streams.records import StreamsRecord
from streamtasks.coordinator.txn_commits import (
    TRANSACTIONAL_GROUP_RECORD_TYPE,
    TransactionalGroupRecord,
    decode_transactional_group,
    encode_transactional_group,
)
from streamtasks.errors import BrokerError
from streamtasks.runtime.admin import TopicSpec, create_topics_async
from streamtasks.runtime.aiokafka_security import start_aiokafka
from streamtasks.runtime.security import ClientSettings

__all__ = [
    "DEFAULT_TOPIC",
    "CoordinatorLog",
    "LogStats",
    "ServerRecord",
    "decode_record",
    "encode_record",
    "is_streams_record",
]

DEFAULT_TOPIC = "_streamtasks_coordinator"
#: Large enough for a PreparedAssignment record of a group of many thousand members.
MAX_RECORD_BYTES = 16 * 1024 * 1024


#: What the log holds: the consumer groups' records and offsets, the streams groups' records,
#: the marks of the groups that committed transactionally.
ServerRecord = LogRecord | StreamsRecord | TransactionalGroupRecord
_STREAMS_TYPES = frozenset(int(t) for t in StreamsRecordType)
_STREAMS_CLASSES: tuple[type, ...] = get_args(StreamsRecord)


def is_streams_record(record: ServerRecord) -> TypeGuard[StreamsRecord]:
    """A streams group's record (else a consumer group's record or a committed offset)."""
    return isinstance(record, _STREAMS_CLASSES)


def encode_record(record: ServerRecord) -> tuple[bytes, bytes | None]:
    """(key, value) of any record the server writes; ``value`` None for a tombstone."""
    if is_streams_record(record):
        return encode_streams_record(record)
    if isinstance(record, TransactionalGroupRecord):
        return encode_transactional_group(record)
    return encode_log_record(cast("LogRecord", record))


def decode_record(key: bytes, value: bytes | None) -> ServerRecord:
    """The record a (key, value) pair of the log holds, by its record type."""
    kind = int.from_bytes(key[:2], "big", signed=True) if len(key) >= 2 else None
    if kind in _STREAMS_TYPES:
        return decode_streams_record(key, value)
    if kind == TRANSACTIONAL_GROUP_RECORD_TYPE:
        return decode_transactional_group(key, value)
    return decode_log_record(key, value)


@dataclass(slots=True)
class LogStats:
    appended_records: int = 0
    appended_bytes: int = 0
    batches: int = 0
    replayed_records: int = 0


class CoordinatorLog:
    """Reads the topic back once at start; appends in order afterwards."""

    def __init__(
        self,
        bootstrap: str | ClientSettings,
        topic: str = DEFAULT_TOPIC,
        *,
        client_id: str = "streamtasks-coordinator",
    ) -> None:
        self._settings = ClientSettings.of(bootstrap)
        self._topic = topic
        self._client_id = client_id
        self._producer: AIOKafkaProducer | None = None
        self._queue: asyncio.Queue[tuple[list[tuple[bytes, bytes | None]], asyncio.Future[None]]] = (
            asyncio.Queue()
        )
        self._writer: asyncio.Task[None] | None = None
        self.failure: BaseException | None = None
        self.failed = asyncio.Event()
        self.stats = LogStats()

    @property
    def topic(self) -> str:
        return self._topic

    async def open(self) -> list[ServerRecord]:
        """Create the topic if needed, read every record in it, start the writer."""
        await create_topics_async(
            self._settings,
            [
                TopicSpec(
                    name=self._topic,
                    partitions=1,
                    configs={"cleanup.policy": "compact", "max.message.bytes": str(MAX_RECORD_BYTES)},
                )
            ],
            exist_ok=True,
            client_id=self._client_id,
        )
        records = await self._read_all()
        self.stats.replayed_records = len(records)
        self._producer = AIOKafkaProducer(
            **self._settings.aiokafka_kwargs(),
            client_id=self._client_id,
            acks="all",
            # Not idempotent (Tansu has no InitProducerId): a retried batch may be written
            # twice, which replay tolerates (every record is an upsert of its key); order holds
            # because the writer sends the next batch only after this one is acknowledged.
            enable_idempotence=False,
            max_request_size=MAX_RECORD_BYTES,
            linger_ms=0,
        )
        await start_aiokafka(self._producer, self._settings, "the coordinator's log producer")
        self._writer = asyncio.get_running_loop().create_task(self._write_loop())
        return records

    async def _read_all(self) -> list[ServerRecord]:
        tp = TopicPartition(self._topic, 0)
        consumer = AIOKafkaConsumer(
            **self._settings.aiokafka_kwargs(),
            client_id=self._client_id,
            enable_auto_commit=False,
            group_id=None,
            max_partition_fetch_bytes=MAX_RECORD_BYTES,
            fetch_max_bytes=4 * MAX_RECORD_BYTES,
        )
        await start_aiokafka(consumer, self._settings, "the coordinator's log reader")
        try:
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            end = (await consumer.end_offsets([tp]))[tp]
            records: list[ServerRecord] = []
            while await consumer.position(tp) < end:
                batch = await consumer.getmany(tp, timeout_ms=1000, max_records=10_000)
                for message in batch.get(tp, []):
                    if message.key is None:
                        raise BrokerError(f"{self._topic}@{message.offset}: a record without a key")
                    records.append(decode_record(message.key, message.value))
            return records
        finally:
            await consumer.stop()

    def append(self, records: Iterable[ServerRecord]) -> asyncio.Future[None]:
        """Queue records (in apply order); the future resolves once they are acknowledged,
        and not before every earlier append is."""
        encoded = [encode_record(r) for r in records]
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self.failure is not None:
            done.set_exception(BrokerError(f"coordinator log failed: {self.failure}"))
            return done
        self._queue.put_nowait((encoded, done))
        return done

    async def _write_loop(self) -> None:
        assert self._producer is not None
        while True:
            batch = [await self._queue.get()]
            while not self._queue.empty():
                batch.append(self._queue.get_nowait())
            try:
                acks = []
                for encoded, _ in batch:
                    for key, value in encoded:
                        acks.append(await self._producer.send(self._topic, key=key, value=value, partition=0))
                        self.stats.appended_bytes += len(key) + len(value or b"")
                await asyncio.gather(*acks)
            except Exception as exc:  # any failure to persist is fatal for the server
                self.failure = exc
                self.failed.set()
                for _, done in batch:
                    if not done.done():
                        done.set_exception(BrokerError(f"coordinator log write failed: {exc}"))
                self._fail_queued(exc)
                return
            self.stats.batches += 1
            for encoded, done in batch:
                self.stats.appended_records += len(encoded)
                if not done.done():
                    done.set_result(None)

    def _fail_queued(self, exc: BaseException) -> None:
        while not self._queue.empty():
            _, done = self._queue.get_nowait()
            if not done.done():
                done.set_exception(BrokerError(f"coordinator log write failed: {exc}"))

    async def flush(self) -> None:
        """Wait until everything appended so far is acknowledged (or failed)."""
        if self._writer is None or self._writer.done():
            return
        with contextlib.suppress(BrokerError):
            await self.append(())

    async def close(self) -> None:
        await self.flush()
        if self._writer is not None:
            self._writer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._writer
        if self._producer is not None:
            await self._producer.stop()
