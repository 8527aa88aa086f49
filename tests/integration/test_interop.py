"""Mixed groups: streamtasks members next to clients no one here wrote.

Cooperative groups mix streamtasks (`cooperative_sticky`) with librdkafka (confluent-kafka,
`cooperative-sticky`) and kafka-python 3 (`CooperativeStickyAssignor`); an eager group mixes
streamtasks (`range`) with aiokafka (`RangePartitionAssignor`). Whoever leads, every partition
ends owned exactly once, none is owned twice at any moment of a rolling bounce (tracked from
every member's callbacks), and every produced record is consumed at least once.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
from aiokafka.coordinator.assignors.range import RangePartitionAssignor

from streamtasks.embedded import EmbeddedBroker, ExternalCluster, client_settings
from tests.integration.harness import (
    Audit,
    SteadyProducer,
    StreamtasksWorker,
    ThreadWorker,
    confluent_worker,
    kafka_python_worker,
    stable,
    wait_until,
)
from topology import TopicPartition

pytestmark = pytest.mark.integration

PARTITIONS = 6
WAIT_S = 90


class AiokafkaWorker:
    """A plain aiokafka consumer (eager, `range`) in the same group."""

    def __init__(self, name: str, audit: Audit, bootstrap: str, group: str, topic: str) -> None:
        self.name, self.audit, self.bootstrap, self.group, self.topic = name, audit, bootstrap, group, topic
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        audit, name = self.audit, self.name

        class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
            async def on_partitions_revoked(self, revoked: Any) -> None:
                audit.revoked(name, [TopicPartition(p.topic, p.partition) for p in revoked])

            async def on_partitions_assigned(self, assigned: Any) -> None:
                audit.assigned(name, [TopicPartition(p.topic, p.partition) for p in assigned])

        self.consumer = AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap,
            group_id=self.group,
            partition_assignment_strategy=[RangePartitionAssignor],
            session_timeout_ms=6000,
            heartbeat_interval_ms=500,
            auto_offset_reset="earliest",
            enable_auto_commit=True,
            auto_commit_interval_ms=200,
        )
        self.consumer.subscribe([self.topic], listener=Listener())
        await self.consumer.start()
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while True:
            batch = await self.consumer.getmany(timeout_ms=200)
            ids = [r.value.decode() for records in batch.values() for r in records]
            if ids:
                self.audit.consumed(ids)

    async def stop(self) -> None:
        """End the poll loop, then close (last auto-commit, LeaveGroup).

        aiokafka calls no listener on close, so the worker reports the release itself, at the
        moment it stops consuming: from then on it processes nothing, and the LeaveGroup sent by
        ``consumer.stop()`` lets the broker hand its partitions on while that call is still
        closing connections (seen on a busy CI machine: another member was assigned the
        partitions before the close returned, and a release recorded only after the close
        looked like double ownership)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        held = [TopicPartition(p.topic, p.partition) for p in self.consumer.assignment()]
        self.audit.revoked(self.name, held)
        await self.consumer.stop()


async def _start(worker: Any) -> None:
    if isinstance(worker, ThreadWorker):
        worker.start()
    else:
        await worker.start()


async def _stop(worker: Any) -> None:
    if isinstance(worker, ThreadWorker):
        await asyncio.to_thread(worker.stop)
        assert worker.error is None, worker.error
    else:
        await worker.stop()


async def mixed_group(kafka: EmbeddedBroker | ExternalCluster, peer: str, peer_leads: bool) -> Audit:
    topic = f"interop-{peer}-{uuid.uuid4().hex[:6]}"
    group = f"g-{topic}"
    kafka.create_topics({topic: PARTITIONS})
    partitions = {TopicPartition(topic, p) for p in range(PARTITIONS)}
    audit = Audit(partitions)
    bootstrap = kafka.bootstrap_servers
    assignor = "range" if peer == "aiokafka" else "cooperative_sticky"

    def make(name: str) -> Any:
        if name.startswith("st"):
            return StreamtasksWorker(
                name,
                audit,
                topic,
                bootstrap_servers=bootstrap,
                group_id=group,
                assignors=[assignor],
                **client_settings(kafka),
            )
        if peer == "confluent":
            return confluent_worker(name, audit, bootstrap, group, topic)
        if peer == "kafka-python":
            return kafka_python_worker(name, audit, bootstrap, group, topic)
        return AiokafkaWorker(name, audit, bootstrap, group, topic)

    order = ["peer", "st1", "st2"] if peer_leads else ["st1", "st2", "peer"]
    producer = SteadyProducer(bootstrap, topic, audit, partitions=PARTITIONS)
    await producer.start()
    workers: dict[str, Any] = {}
    try:
        for name in order:  # the first to join leads the first generation
            workers[name] = make(name)
            await _start(workers[name])
            await wait_until(stable(audit, partitions, set(workers)), WAIT_S, f"{name} to get partitions")
        for name in order:  # rolling bounce
            await _stop(workers.pop(name))
            audit.gone(name)
            await wait_until(stable(audit, partitions, set(workers)), WAIT_S, f"the group without {name}")
            workers[name] = make(name)
            await _start(workers[name])
            await wait_until(stable(audit, partitions, set(workers)), WAIT_S, f"{name} back")
        await producer.stop()
        await wait_until(lambda: not audit.records.lost(), WAIT_S, "every record consumed")
    finally:
        for w in workers.values():
            with contextlib.suppress(Exception):
                await _stop(w)
    return audit


@pytest.mark.parametrize(
    ("peer", "peer_leads"),
    [("confluent", False), ("confluent", True), ("kafka-python", True), ("aiokafka", True)],
)
def test_mixed_group_rolling_bounce(
    kafka: EmbeddedBroker | ExternalCluster, peer: str, peer_leads: bool
) -> None:
    audit = asyncio.run(mixed_group(kafka, peer, peer_leads))
    report = audit.ledger.report(0)
    assert report.violations == (), audit.timeline()
    assert audit.records.lost() == []
    assert audit.records.produced_count > 0
