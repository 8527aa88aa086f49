"""Workers for live group tests: streamtasks consumers and peers no one here wrote
(confluent-kafka, kafka-python, aiokafka), all reporting their rebalance callbacks to one
:class:`~streamtasks.drills.OwnershipLedger` and their records to one
:class:`~streamtasks.drills.RecordAudit`."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from aiokafka import AIOKafkaProducer

from streamtasks.drills import OwnershipLedger, RecordAudit
from streamtasks.runtime.consumer import Consumer
from streamtasks.runtime.driver import monotonic_ms
from topology import TopicPartition

FAST_GROUP = {"session_timeout_ms": 6000, "heartbeat_interval_ms": 500, "rebalance_timeout_ms": 10000}


class Audit:
    """Ledger + record audit behind one lock (peers call in from their own threads)."""

    def __init__(self, partitions: Iterable[TopicPartition]) -> None:
        self.lock = threading.Lock()
        self.ledger = OwnershipLedger(partitions, start_ms=monotonic_ms())
        self.records = RecordAudit()
        self.owned: dict[str, set[TopicPartition]] = {}

    def assigned(self, member: str, tps: Iterable[TopicPartition]) -> None:
        with self.lock:
            tps = list(tps)
            self.ledger.assigned(member, tps, monotonic_ms())
            self.owned.setdefault(member, set()).update(tps)

    def revoked(self, member: str, tps: Iterable[TopicPartition]) -> None:
        with self.lock:
            tps = list(tps)
            self.ledger.revoked(member, tps, monotonic_ms())
            self.owned.setdefault(member, set()).difference_update(tps)

    def consumed(self, record_ids: Iterable[str]) -> None:
        with self.lock:
            for rid in record_ids:
                self.records.consumed(rid)

    def gone(self, member: str) -> None:
        with self.lock:
            self.ledger.member_gone(member, monotonic_ms())
            self.owned.pop(member, None)

    def snapshot(self) -> dict[str, set[TopicPartition]]:
        with self.lock:
            return {m: set(p) for m, p in self.owned.items() if p}


class StreamtasksWorker:
    """A streamtasks Consumer that records its callbacks and commits after every batch."""

    def __init__(self, name: str, audit: Audit, topic: str, **settings: Any) -> None:
        self.name = name
        self.audit = audit
        self.topic = topic
        self.settings = {
            **FAST_GROUP,
            "auto_offset_reset": "earliest",
            "enable_auto_commit": False,
            **settings,
        }
        self.consumer: Consumer | None = None
        self._task: asyncio.Task[None] | None = None

    def on_partitions_assigned(self, tps: tuple[TopicPartition, ...]) -> None:
        self.audit.assigned(self.name, tps)

    def on_partitions_revoked(self, tps: tuple[TopicPartition, ...]) -> None:
        self.audit.revoked(self.name, tps)

    def on_partitions_lost(self, tps: tuple[TopicPartition, ...]) -> None:
        self.audit.revoked(self.name, tps)

    async def start(self) -> None:
        self.consumer = Consumer([self.topic], listener=self, **self.settings)
        await self.consumer.start()
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        assert self.consumer is not None
        while True:
            batch = await self.consumer.getmany(timeout_ms=200)
            ids = [r.value.decode() for records in batch.values() for r in records]
            if ids:
                self.audit.consumed(ids)
                with contextlib.suppress(Exception):
                    await self.consumer.commit()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self.consumer is not None:
            await self.consumer.stop()


class ThreadWorker:
    """A blocking peer client (confluent-kafka or kafka-python) polled on its own thread."""

    def __init__(
        self, name: str, audit: Audit, make: Callable[[ThreadWorker], Any], poll: Callable[[Any], list[str]]
    ):
        self.name = name
        self.audit = audit
        self._make = make
        self._poll = poll
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: BaseException | None = None

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            client = self._make(self)
            try:
                while not self._stop.is_set():
                    ids = self._poll(client)
                    if ids:
                        self.audit.consumed(ids)
            finally:
                client.close()  # commits (if configured), revokes, leaves the group
        except BaseException as exc:  # surfaced by the test
            self.error = exc

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)


def confluent_worker(name: str, audit: Audit, bootstrap: str, group: str, topic: str) -> ThreadWorker:
    from confluent_kafka import Consumer as CKConsumer

    def make(worker: ThreadWorker) -> Any:
        c = CKConsumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "partition.assignment.strategy": "cooperative-sticky",
                "session.timeout.ms": 6000,
                "heartbeat.interval.ms": 500,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": True,
                "auto.commit.interval.ms": 200,
            }
        )

        def on_assign(_c: Any, parts: list[Any]) -> None:
            audit.assigned(name, [TopicPartition(p.topic, p.partition) for p in parts])

        def on_revoke(_c: Any, parts: list[Any]) -> None:
            audit.revoked(name, [TopicPartition(p.topic, p.partition) for p in parts])

        c.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_revoke)
        return c

    def poll(c: Any) -> list[str]:
        msg = c.poll(0.1)
        if msg is None or msg.error():
            return []
        return [msg.value().decode()]

    return ThreadWorker(name, audit, make, poll)


def kafka_python_worker(name: str, audit: Audit, bootstrap: str, group: str, topic: str) -> ThreadWorker:
    from kafka import KafkaConsumer
    from kafka.consumer.subscription_state import ConsumerRebalanceListener
    from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor

    class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
        def on_partitions_revoked(self, revoked: Any) -> None:
            audit.revoked(name, [TopicPartition(p.topic, p.partition) for p in revoked])

        def on_partitions_assigned(self, assigned: Any) -> None:
            audit.assigned(name, [TopicPartition(p.topic, p.partition) for p in assigned])

        def on_partitions_lost(self, lost: Any) -> None:
            audit.revoked(name, [TopicPartition(p.topic, p.partition) for p in lost])

    def make(worker: ThreadWorker) -> Any:
        c = KafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=group,
            partition_assignment_strategy=[CooperativeStickyAssignor],
            session_timeout_ms=6000,
            heartbeat_interval_ms=500,
            auto_offset_reset="earliest",
            enable_auto_commit=True,
            auto_commit_interval_ms=200,
        )
        c.subscribe([topic], listener=Listener())
        return c

    def poll(c: Any) -> list[str]:
        batch = c.poll(timeout_ms=100)
        return [r.value.decode() for records in batch.values() for r in records]

    return ThreadWorker(name, audit, make, poll)


class SteadyProducer:
    """Produces ``rate`` records per second with unique ids until stopped."""

    def __init__(self, bootstrap: str, topic: str, audit: Audit, partitions: int, rate: int = 50) -> None:
        self.bootstrap, self.topic, self.audit, self.partitions, self.rate = (
            bootstrap,
            topic,
            audit,
            partitions,
            rate,
        )
        self._task: asyncio.Task[None] | None = None
        self._ids = itertools.count()

    async def start(self) -> None:
        self._producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, linger_ms=5)
        await self._producer.start()
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while True:
            for _ in range(max(1, self.rate // 10)):
                n = next(self._ids)
                rid = f"{self.topic}:{n}"
                await self._producer.send(self.topic, rid.encode(), partition=n % self.partitions)
                with self.audit.lock:
                    self.audit.records.produced(rid)
            await asyncio.sleep(0.1)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self._producer.flush()
        await self._producer.stop()


async def wait_until(predicate: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
        await asyncio.sleep(0.1)


def stable(audit: Audit, partitions: set[TopicPartition], members: set[str]) -> Callable[[], bool]:
    """Every partition owned exactly once, each by one of ``members``, each member owning some."""

    def check() -> bool:
        snap = audit.snapshot()
        owned = [tp for m in members for tp in snap.get(m, set())]
        return (
            sorted(owned) == sorted(partitions) and set(snap) <= members and all(snap.get(m) for m in members)
        )

    return check
