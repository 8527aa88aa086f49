"""``/metrics`` of live Apps scraped during a bounce (issue 30, item 2): two App processes
(``num_standby_replicas=1``) count records; one is stopped and started again while the other's
``/metrics`` is scraped. The rebalance counter rises, records are processed, commits are timed,
tasks report their lag by role, and the events of the bounce are counted; an excerpt is printed
(``-s``) for the closing note."""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
import uuid
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiokafka import AIOKafkaProducer

from streamtasks.app.app import App
from streamtasks.drills.stateful_app import make_app, record_for
from streamtasks.embedded import Cluster, client_settings
from streamtasks.runtime.security import ClientSettings
from tests.integration.streams_cluster import require_streams_groups

pytestmark = pytest.mark.integration

WAIT_S = 90
PARTITIONS = 4


def sample(text: str, name: str, **labels: str) -> float | None:
    """The value of the first sample of ``name`` whose labels include ``labels``."""
    for line in text.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        if all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return None


async def scrape(app: App) -> str:
    cfg = app.config
    assert cfg.metrics_port is not None
    port = app.http.port(cfg.metrics_host, cfg.metrics_port)
    async with aiohttp.ClientSession() as session, session.get(f"http://127.0.0.1:{port}/metrics") as answer:
        assert answer.status == 200
        assert answer.headers["Content-Type"].startswith("text/plain")
        return await answer.text()


async def until(check: Any, what: str) -> Any:
    deadline = time.monotonic() + WAIT_S
    while True:
        found = await check()
        if found:
            return found
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.5)


@pytest.mark.parametrize("protocol", ["classic", "streams"])
def test_metrics_are_scraped_from_live_apps_during_a_bounce(
    kafka: Cluster, tmp_path: Path, protocol: str
) -> None:
    """The rebalance families under both protocols (a streams group's App had only its member
    epoch before: its rebalances are its moves to a new assignment)."""
    if protocol == "streams":
        require_streams_groups(kafka)
    topic = f"metrics-{uuid.uuid4().hex[:6]}"
    kafka.create_topics({topic: PARTITIONS})
    settings = {
        **({"group_protocol": "streams"} if protocol == "streams" else {}),
        "bootstrap_servers": kafka.bootstrap_servers,
        "session_timeout_ms": 6_000,
        "heartbeat_interval_ms": 500,
        "rebalance_timeout_ms": 10_000,
        "commit_interval_ms": 200,
        "num_standby_replicas": 1,
        "metrics_port": 0,
        "metrics_host": "127.0.0.1",
        **client_settings(kafka),
    }

    def app(name: str) -> App:
        return make_app(topic, topic, {**settings, "state_dir": str(tmp_path / name), "client_id": name})

    async def produce(count: int, start: int) -> None:
        producer = AIOKafkaProducer(**ClientSettings.of(kafka.bootstrap_servers).aiokafka_kwargs())
        await producer.start()
        try:
            for seq in range(start, start + count):
                key, value = record_for(seq, 40)
                await producer.send(topic, value, key=key)
            await producer.flush()
        finally:
            await producer.stop()

    async def scenario() -> tuple[str, str, str]:
        a, b = app("a"), app("b")
        runners: dict[str, asyncio.Task[None]] = {}
        try:
            for x in (a, b):
                await x.start()
                runners[x.config.client_id] = asyncio.create_task(x.run())
            await produce(400, 0)

            async def settled() -> str | None:
                text = await scrape(a)
                processed = sample(text, "kafka_streams_stream_thread_metrics_process_total")
                active = sample(text, "streamtasks_active_tasks")
                # its first rebalance done (a streams member processes while it acknowledges) and
                # its replicas placed (a streams group's broker may place them a heartbeat later)
                done = (sample(text, "kafka_consumer_coordinator_metrics_rebalance_total") or 0) >= 1
                replicas = re.search(r'_changelog_lag_records\{[^}]*role="(standby|warmup)"', text)
                halved = bool(processed and active and 0 < active < PARTITIONS)
                return text if halved and done and replicas else None

            before = await until(settled, "a to process records with half the tasks and a replica")
            await b.stop()
            await runners.pop("b")
            during = await until(
                lambda: _after(a, "streamtasks_active_tasks", PARTITIONS), "a to take every task"
            )
            b2 = app("b")
            await b2.start()
            runners["b2"] = asyncio.create_task(b2.run())
            await produce(200, 400)
            try:
                after = await until(
                    lambda: _after(a, "streamtasks_active_tasks", PARTITIONS // 2, below=True),
                    "b to come back and take tasks",
                )
                b2_text = await until(lambda: _nonempty(b2), "b2 to serve metrics")
                assert sample(b2_text, "kafka_consumer_coordinator_metrics_rebalance_total") is not None
            finally:
                await b2.stop()
            return before, during, after
        finally:
            for x in (a, b):
                await x.stop()
            for runner in runners.values():
                with contextlib.suppress(Exception):
                    await runner

    before, during, after = asyncio.run(scenario())
    rebalances = [
        sample(t, "kafka_consumer_coordinator_metrics_rebalance_total") or 0 for t in (before, during, after)
    ]
    assert rebalances[0] >= 1
    assert rebalances[0] < rebalances[1] <= rebalances[2], rebalances
    assert (
        (sample(after, "kafka_streams_stream_thread_metrics_process_total") or 0)
        >= (sample(before, "kafka_streams_stream_thread_metrics_process_total") or 0)
        > 0
    )
    commits = sample(after, "kafka_streams_stream_thread_metrics_commit_latency_seconds_count")
    assert commits is not None
    assert commits > 0
    roles = set(re.findall(r'streamtasks_task_changelog_lag_records\{[^}]*role="(\w+)"', before))
    assert "active" in roles
    assert roles & {"standby", "warmup"}, before
    assert sample(during, "streamtasks_app_events_total", event="TaskCreated") is not None
    assert sample(after, "kafka_streams_stream_record_cache_metrics_hit_ratio") is not None
    assert sample(after, "streamtasks_dead_lettered_records_total") == 0
    excerpt = [
        line
        for line in during.splitlines()
        if line.startswith(
            (
                "kafka_consumer_coordinator_metrics_rebalance_total",
                "kafka_consumer_coordinator_metrics_rebalance_latency_total",
                "kafka_consumer_coordinator_metrics_last_rebalance_seconds_ago",
                "kafka_streams_stream_thread_metrics_process_total",
                "kafka_streams_stream_thread_metrics_commit_latency_seconds_count",
                "kafka_streams_stream_thread_metrics_commit_latency_seconds_sum",
                "streamtasks_active_tasks",
                "streamtasks_standby_tasks",
                "streamtasks_task_changelog_lag_records",
                "streamtasks_app_events_total",
                "kafka_streams_stream_record_cache_metrics_hit_ratio",
            )
        )
    ]
    print("\n/metrics of a while b is down (rebalances before/during/after:", rebalances, ")")
    print("\n".join(excerpt[:40]))


async def _after(app: App, name: str, value: float, *, below: bool = False) -> str | None:
    text = await scrape(app)
    found = sample(text, name)
    if found is None:
        return None
    return text if (found <= value if below else found >= value) else None


async def _nonempty(app: App) -> str | None:
    text = await scrape(app)
    return text if "kafka_consumer_coordinator_metrics_rebalance_total" in text else None
