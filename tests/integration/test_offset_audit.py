"""The per-offset audit's second opinion: reading the audit topic again from its beginning."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from aiokafka import AIOKafkaProducer

from streamtasks.drills.ledger import offset_id
from streamtasks.drills.offset_audit import reread_audit_topic
from streamtasks.embedded import EmbeddedBroker, ExternalCluster
from streamtasks.runtime.admin import create_topics_async

pytestmark = [pytest.mark.integration]


async def _write_and_reread(bootstrap: str) -> tuple[set[str], set[str]]:
    topic = f"audit-reread-{uuid.uuid4().hex[:8]}"
    await create_topics_async(bootstrap, {topic: 2})
    written = {offset_id(i % 8, i) for i in range(700)}
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    await producer.start()
    try:
        for i, rid in enumerate(sorted(written)):
            await producer.send(topic, value=rid.encode(), partition=i % 2)
        await producer.flush()
    finally:
        await producer.stop()
    return written, await reread_audit_topic(bootstrap, topic)


def test_reread_finds_every_id_the_topic_holds(kafka: EmbeddedBroker | ExternalCluster) -> None:
    written, reread = asyncio.run(_write_and_reread(kafka.bootstrap_servers))
    assert reread == written
