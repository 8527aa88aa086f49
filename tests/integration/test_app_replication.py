"""The App's internal topics take the broker's default replication factor (``replication.factor``
-1, KIP-733): one replica on the single test broker, three on the three-broker cluster."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest
from kio.schema.metadata.v12.response import MetadataResponse

from streamtasks.app import App, ProcessorContext, Record
from streamtasks.embedded import Cluster, client_settings
from streamtasks.embedded.kafka_cluster import KafkaCluster
from streamtasks.runtime.admin import create_topics_async, metadata_request
from streamtasks.runtime.blocking import BlockingConnection
from topology import TopologyBuilder

pytestmark = pytest.mark.integration


def noop(ctx: ProcessorContext, record: Record) -> None:
    return None


async def _start_and_stop(bootstrap: str, state_dir: Path, **settings: Any) -> list[str]:
    """Start a wordcount-shaped App (a repartition topic and a changelogged store), stop it,
    and return the names of the internal topics it created."""
    app_id = f"rf-{uuid.uuid4().hex[:8]}"
    source = f"{app_id}-lines"
    await create_topics_async(bootstrap, {source: 2})
    builder = TopologyBuilder(app_id)
    builder.stream(source).repartition("words").store("counts")
    topology = builder.build()
    app = App(
        topology,
        {0: noop, 1: noop},
        application_id=app_id,
        bootstrap_servers=bootstrap,
        state_dir=str(state_dir),
        session_timeout_ms=6_000,
        heartbeat_interval_ms=500,
        **settings,
    )
    await app.start()
    await app.stop()
    changelogs = [s.changelog_topic(app_id) for sub in topology.subtopologies for s in sub.stores]
    return [r.topic(app_id) for r in topology.repartition_topics] + changelogs


def _replicas(response: MetadataResponse) -> dict[str, set[int]]:
    """Topic → the replica counts of its partitions."""
    return {str(t.name): {len(p.replica_nodes) for p in t.partitions} for t in response.topics}


def test_internal_topics_take_the_single_brokers_default(kafka: Cluster, tmp_path: Path) -> None:
    topics = asyncio.run(_start_and_stop(kafka.bootstrap_servers, tmp_path, **client_settings(kafka)))
    assert len(topics) == 2
    with BlockingConnection(kafka.host, kafka.port) as conn:
        replicas = _replicas(conn.call(metadata_request(topics), MetadataResponse))
    assert replicas == {t: {1} for t in topics}


def test_internal_topics_get_three_replicas_on_the_cluster(
    kafka_cluster: KafkaCluster, tmp_path: Path
) -> None:
    topics = asyncio.run(_start_and_stop(kafka_cluster.bootstrap_servers, tmp_path))
    assert len(topics) == 2
    assert _replicas(kafka_cluster.metadata(topics)) == {t: {3} for t in topics}
