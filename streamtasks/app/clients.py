"""The app's producer and its topics: the producer (exactly-once: transactional, with its
:class:`~streamtasks.app.transactions.ExactlyOnce`), the partition counts of the topics it
reads and writes, and the internal topics it creates (repartition topics, changelogs)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Mapping
from typing import Any

from aiokafka import AIOKafkaProducer

from streamtasks.app.config import AppConfig
from streamtasks.app.transactions import ExactlyOnce, transactional_id
from streamtasks.errors import ConfigError
from streamtasks.runtime.admin import TopicSpec, create_topics_async
from streamtasks.runtime.aiokafka_security import start_aiokafka
from streamtasks.runtime.connection import open_any
from streamtasks.runtime.consumer import Consumer
from streamtasks.runtime.consumer_driver import require_api
from topology.model import Topology

__all__ = ["create_internal_topics", "partition_count", "require_transactional_commits", "start_producer"]

#: TxnOffsetCommit v3 (KIP-447: with the member's id and epoch), what exactly-once commits send.
TXN_OFFSET_COMMIT_API_KEY, TXN_OFFSET_COMMIT_VERSION = 28, 3


async def start_producer(
    cfg: AppConfig, process_id: uuid.UUID | None, consumer: Consumer
) -> tuple[AIOKafkaProducer, ExactlyOnce | None]:
    """Create and start the app's producer; exactly-once: transactional, its ``transactional_id``
    that of the process (a new one fences its predecessor), with its :class:`ExactlyOnce`."""
    settings = cfg.client_settings()
    txn: dict[str, Any] = {}
    if cfg.exactly_once:
        txn = {
            "transactional_id": transactional_id(cfg.application_id, str(process_id)),
            "transaction_timeout_ms": cfg.transaction_timeout_ms,
            "enable_idempotence": True,
        }
    producer = AIOKafkaProducer(
        **settings.aiokafka_kwargs(), client_id=cfg.client_id, acks="all", linger_ms=5, **txn
    )
    await start_aiokafka(producer, settings, "the app's producer")
    if not cfg.exactly_once:
        return producer, None
    eos = ExactlyOnce(
        producer, consumer, group_id=cfg.application_id, request_timeout_ms=cfg.request_timeout_ms
    )
    return producer, eos


async def require_transactional_commits(cfg: AppConfig) -> None:
    """Exactly-once: raise :class:`~streamtasks.errors.BrokerError` unless the bootstrap server
    (where the App finds its group coordinator) serves TxnOffsetCommit v3. Apache Kafka and
    ``streamtasks coordinator`` (which forwards it to its backing cluster: docs/coordinator.md,
    "Exactly-once") do; a server that does not advertise it (a coordinator on a secured
    listener, an older coordinator, a proxy) would let the App start and abort every transaction
    at its first commit."""
    settings = cfg.client_settings()
    conn = await open_any(settings, cfg.client_id, timeout_s=cfg.request_timeout_ms / 1000)
    try:
        await require_api(
            conn,
            f"the group coordinator at {settings.bootstrap_servers}",
            api_key=TXN_OFFSET_COMMIT_API_KEY,
            version=TXN_OFFSET_COMMIT_VERSION,
            what="TxnOffsetCommit",
            hint="processing_guarantee='exactly_once_v2' commits the input offsets in the producer's "
            "transaction through the group coordinator (a streamtasks coordinator serves it on an open "
            'listener only: docs/coordinator.md, "Exactly-once"); run the App at_least_once there, '
            "or exactly-once with its group on a server that serves it",
        )
    finally:
        await conn.close()


async def partition_count(producer: AIOKafkaProducer, topic: str, kind: str) -> int:
    """How many partitions ``topic`` has (a :class:`ConfigError` if it does not exist)."""
    for _ in range(50):
        parts = await producer.partitions_for(topic)
        if parts:
            return len(parts)
        await asyncio.sleep(0.1)
    raise ConfigError(f"{kind} topic {topic!r} does not exist (create it first)")


async def create_internal_topics(
    cfg: AppConfig, topology: Topology, source_counts: Mapping[str, int]
) -> None:
    """Create the repartition topics and the changelogs (with their stores' configs: compacted,
    or compact,delete for window stores), if missing."""
    counts = topology.partition_counts(source_counts)
    app_id = cfg.application_id
    specs = [
        TopicSpec(
            name=r.topic(app_id),
            partitions=counts[r.topic(app_id)],
            replication_factor=cfg.replication_factor,
        )
        for r in topology.repartition_topics
    ]
    specs += [
        TopicSpec(
            name=store.changelog_topic(app_id),
            partitions=counts[store.changelog_topic(app_id)],
            configs=store.changelog_configs(),
            replication_factor=cfg.replication_factor,
        )
        for sub in topology.subtopologies
        for store in sub.stores
        if store.logging
    ]
    await create_topics_async(cfg.client_settings(), specs, client_id=cfg.client_id)
