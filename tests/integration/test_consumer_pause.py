"""Pausing a partition while a fetch is in flight loses nothing (issue 10's reproducer, live).

Every record is audited by what the broker acknowledged (partition, offset): each must be
handed out by ``getmany`` at least once. The fetch side is the same under both group protocols,
and so is the test (KIP-848 only where the broker serves it).
"""

from __future__ import annotations

import asyncio
import uuid

import pytest
from aiokafka import AIOKafkaProducer

import streamtasks
from streamtasks.embedded import EmbeddedBroker, ExternalCluster
from tests.integration.harness import FAST_GROUP, wait_until
from topology import TopicPartition

pytestmark = [pytest.mark.integration, pytest.mark.smoke]


async def _produce(producer: AIOKafkaProducer, topic: str, partition: int, values: list[str]) -> set[int]:
    acked: set[int] = set()
    for value in values:
        meta = await producer.send_and_wait(topic, value.encode(), partition=partition)
        acked.add(meta.offset)
    return acked


async def _drain(
    consumer: streamtasks.Consumer, seen: dict[TopicPartition, list[int]], seconds: float
) -> None:
    deadline = asyncio.get_running_loop().time() + seconds
    while asyncio.get_running_loop().time() < deadline:
        batch = await consumer.getmany(timeout_ms=200)
        for tp, records in batch.items():
            seen.setdefault(tp, []).extend(r.offset for r in records)


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_records_fetched_while_a_partition_is_paused_are_handed_out_after_resume(
    kafka: EmbeddedBroker | ExternalCluster, protocol: str
) -> None:
    if protocol == "consumer" and isinstance(kafka, EmbeddedBroker):
        pytest.skip("Tansu does not serve ConsumerGroupHeartbeat (API 68)")

    async def go() -> None:
        topic = f"pause-{uuid.uuid4().hex[:6]}"
        kafka.create_topics({topic: 2})
        tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
        producer = AIOKafkaProducer(bootstrap_servers=kafka.bootstrap_servers, acks="all")
        await producer.start()
        consumer = streamtasks.Consumer(
            [topic],
            bootstrap_servers=kafka.bootstrap_servers,
            group_id=f"g-{topic}",
            auto_offset_reset="earliest",
            group_protocol=protocol,
            **FAST_GROUP,
        )
        await consumer.start()
        seen: dict[TopicPartition, list[int]] = {}
        try:
            await wait_until(lambda: len(consumer.assignment()) == 2, 60, "the member to own both partitions")
            acked = await _produce(producer, topic, 1, ["warm-up"])
            await _drain(consumer, seen, 2.0)
            assert sorted(seen.get(tp1, [])) == sorted(acked)
            # A fetch for every partition is in flight (nothing is paused) ...
            in_flight = asyncio.get_running_loop().create_task(consumer.getmany(timeout_ms=3000))
            await asyncio.sleep(0.2)
            # ... when partition 1 is paused and records arrive for it.
            consumer.pause([tp1])
            acked |= await _produce(producer, topic, 1, [f"r{i}" for i in range(10)])
            batch = await in_flight
            assert tp1 not in batch, "a paused partition's records were handed out"
            for tp, records in batch.items():
                seen.setdefault(tp, []).extend(r.offset for r in records)
            consumer.resume([tp1])
            acked |= await _produce(producer, topic, 1, [f"r{i}" for i in range(10, 15)])
            await _drain(consumer, seen, 4.0)
            missing = sorted(acked - set(seen.get(tp1, [])))
            assert not missing, f"acknowledged offsets of {tp1} never handed out: {missing}"
            assert tp0 not in seen or seen[tp0] == []
        finally:
            await consumer.stop()
            await producer.stop()

    asyncio.run(go())
