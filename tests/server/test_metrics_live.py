"""``streamtasks coordinator --metrics-port``: its ``/metrics`` scraped while two KIP-848
members (streamtasks Consumers) share a group on it (issue 30, item 2)."""

from __future__ import annotations

import asyncio
import urllib.request
import uuid

import pytest

from streamtasks.embedded import Cluster
from streamtasks.embedded._process import free_port
from tests.integration.harness import Audit, StreamtasksWorker, stable, wait_until
from tests.integration.test_metrics_live import sample
from tests.server.support import FAST, ServerProcess
from topology import TopicPartition

pytestmark = pytest.mark.integration

WAIT_S = 60


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        assert answer.status == 200
        return str(answer.read().decode())


def test_the_coordinator_serves_groups_members_epochs_and_heartbeats(kafka: Cluster) -> None:
    metrics_port = free_port("127.0.0.1")
    server = ServerProcess(
        kafka.bootstrap_servers, extra=(*FAST, "--metrics-port", str(metrics_port))
    ).start()
    topic = f"coord-metrics-{uuid.uuid4().hex[:6]}"
    group = f"g-{topic}"
    kafka.create_topics({topic: 4})
    partitions = {TopicPartition(topic, p) for p in range(4)}
    audit = Audit(partitions)
    workers = [
        StreamtasksWorker(
            n,
            audit,
            topic,
            client_id=n,
            bootstrap_servers=server.address,
            group_id=group,
            group_protocol="consumer",
        )
        for n in ("m1", "m2")
    ]

    async def scenario() -> tuple[str, str]:
        try:
            for w in workers:
                await w.start()
            await wait_until(
                stable(audit, partitions, {"m1", "m2"}), WAIT_S, "two members on the coordinator"
            )
            first = await asyncio.to_thread(_scrape, metrics_port)
            await asyncio.sleep(2)  # heartbeats every 500 ms
            return first, await asyncio.to_thread(_scrape, metrics_port)
        finally:
            for w in workers:
                await w.stop()

    try:
        assert any(f"metrics at http://127.0.0.1:{metrics_port}/metrics" in line for line in server.lines)
        first, second = asyncio.run(scenario())
    finally:
        server.stop()
    assert sample(second, "kafka_server_group_coordinator_metrics_group_count", protocol="consumer") == 1
    assert sample(second, "streamtasks_coordinator_members", group_id=group) == 2
    epoch = sample(second, "streamtasks_coordinator_group_epoch", group_id=group)
    assert epoch is not None
    assert epoch >= 2
    assert sample(second, "streamtasks_coordinator_assignment_epoch", group_id=group) == epoch
    beats = [sample(t, "streamtasks_coordinator_heartbeats_total") or 0 for t in (first, second)]
    assert beats[1] - beats[0] >= 4, beats  # two members, 500 ms apart, for 2 s
    print(
        "\n"
        + "\n".join(
            line
            for line in second.splitlines()
            if line.startswith(("kafka_server", "streamtasks_coordinator_"))
        )
    )
