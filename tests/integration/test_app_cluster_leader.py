"""On the three-broker cluster, an App whose changelog partition's leader is killed (kill -9)
keeps running: its sends fail over (or, past the producer's retries, revive the tasks within
``task_timeout_ms``), it processes and commits every input, and its store holds each key's last
value. Issue 27: the App used to treat any changelog delivery failure as fatal at once."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer

from streamtasks.app import AppEvent, OffsetsCommitted
from streamtasks.drills.stateful_app import make_app, record_for
from streamtasks.embedded.kafka_cluster import KafkaCluster
from streamtasks.runtime.admin import create_topics_async
from tests.ids import task
from topology.names import changelog_topic

pytestmark = [pytest.mark.integration]

PARTITIONS = 2
KEYS = 20
ROUND = 200


async def _produce(bootstrap: str, topic: str, first: int) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", request_timeout_ms=30_000)
    await producer.start()
    try:
        for seq in range(first, first + ROUND):
            key, value = record_for(seq, KEYS)
            await producer.send(topic, key=key, value=value, partition=seq % PARTITIONS)
        await producer.flush()
    finally:
        await producer.stop()


async def _wait(cond: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.1)


async def _scenario(cluster: KafkaCluster, tmp: str) -> dict[str, Any]:
    bootstrap = cluster.bootstrap_servers
    app_id = topic = f"leaderkill-{uuid.uuid4().hex[:8]}"
    await create_topics_async(bootstrap, {topic: PARTITIONS})
    events: list[AppEvent] = []
    settings = {
        "bootstrap_servers": bootstrap,
        "state_dir": tmp,
        "session_timeout_ms": 10_000,
        "heartbeat_interval_ms": 1_000,
        "commit_interval_ms": 500,
        "cache_max_bytes": 0,
    }
    app = make_app(app_id, topic, settings, on_event=events.append)
    await app.start()
    runner = asyncio.get_running_loop().create_task(app.run())

    def committed_total() -> int:
        last = [e for e in events if isinstance(e, OffsetsCommitted) and e.confirmed]
        return 0 if not last else sum(off for _, _, off in last[-1].offsets)

    try:
        await _produce(bootstrap, topic, 0)
        await _wait(lambda: committed_total() >= ROUND or runner.done(), 40, "the first round")
        changelog = changelog_topic(app_id, "counts")
        leader = await asyncio.to_thread(lambda: cluster.leaders([changelog])[(changelog, 0)])
        killed_at = time.monotonic()
        await asyncio.to_thread(cluster.broker(leader).kill)
        await _produce(bootstrap, topic, ROUND)
        await _wait(lambda: committed_total() >= 2 * ROUND or runner.done(), 45, "the second round")
        assert not runner.done(), runner.exception()  # still running
        latest = {
            f"k{j}": app.tasks.tasks[task(f"0_{j % PARTITIONS}")].typed["latest"].get(f"k{j}")
            for j in range(KEYS)
        }
        return {
            "leader": leader,
            "resumed_s": time.monotonic() - killed_at,
            "latest": latest,
            "metrics": app.metrics(),
        }
    finally:
        await app.stop()
        runner.cancel()
        await asyncio.gather(runner, return_exceptions=True)


def test_an_app_keeps_running_when_its_changelog_leader_is_killed(
    cluster_to_break: KafkaCluster, tmp_path: Path
) -> None:
    got = asyncio.run(_scenario(cluster_to_break, str(tmp_path)))
    print(
        f"changelog leader node {got['leader']} killed; every input committed {got['resumed_s']:.1f} s "
        f"later; revivals {got['metrics']['task-revivals-total']:.0f}"
    )
    last = {j: max(s for s in range(2 * ROUND) if s % KEYS == j) for j in range(KEYS)}
    assert got["latest"] == {f"k{j}": last[j] for j in range(KEYS)}
