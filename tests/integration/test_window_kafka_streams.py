"""A window store changelog written by Kafka Streams itself, restored into streamtasks' window
store: ``java/windowkey/WindowCounts.java`` (kafka-streams 4.4.0, ``Stores.persistentWindowStore``,
String keys, Long counts) counts records per key per minute on the embedded broker; its changelog,
read back with aiokafka, restores a :class:`WindowStore` whose windows hold exactly the counts
Python computes. The changelog topic Kafka Streams created carries the configs streamtasks
gives a window store's (``StateStore.changelog_configs``)."""

from __future__ import annotations

import asyncio
import collections
import random
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from streamtasks.embedded import EmbeddedBroker, ExternalCluster
from streamtasks.embedded.java import JavaUnavailable, compiled_program
from streamtasks.embedded.kafka_broker import kafka_classpath
from streamtasks.errors import BrokerError
from streamtasks.runtime.admin import create_topics_async
from streamtasks.state import INT64, STRING, KeyValueStore, TypedWindowStore, WindowStore
from tests.integration.test_windowed_count import _topic_configs
from tests.oracle import ORACLE_POM
from topology.model import StateStore

pytestmark = pytest.mark.integration

SOURCE = Path(__file__).resolve().parents[2] / "java/windowkey/WindowCounts.java"
RUN = uuid.uuid4().hex[:8]  # this session's own topics on the shared session broker
APP = f"ks-window-interop-{RUN}"
TOPIC = f"ks-window-clicks-{RUN}"
CHANGELOG = f"{APP}-counts-changelog"
MINUTE = 60_000


def _program() -> list[str]:
    try:
        return compiled_program(SOURCE, kafka_classpath(ORACLE_POM), cache="java-windowcounts").command()
    except (JavaUnavailable, BrokerError) as exc:  # pragma: no cover - no JDK, or no Maven
        pytest.skip(f"Kafka Streams cannot run here: {exc}")


async def _produce(bootstrap: str, rows: list[tuple[str, int]]) -> None:
    await create_topics_async(bootstrap, {TOPIC: 1})
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        for user, ts in rows:
            await producer.send_and_wait(TOPIC, key=user.encode(), value=b"click", timestamp_ms=ts)
    finally:
        await producer.stop()


async def _changelog(bootstrap: str) -> list[tuple[bytes, bytes | None]]:
    consumer = AIOKafkaConsumer(CHANGELOG, bootstrap_servers=bootstrap, auto_offset_reset="earliest")
    await consumer.start()
    out: list[tuple[bytes, bytes | None]] = []
    try:
        idle = 0
        while idle < 3:
            batch = await consumer.getmany(timeout_ms=1_000)
            idle = 0 if batch else idle + 1
            out += [(r.key or b"", r.value) for records in batch.values() for r in records]
    finally:
        await consumer.stop()
    return out


def test_a_kafka_streams_window_changelog_restores_into_a_window_store(
    kafka: EmbeddedBroker | ExternalCluster, tmp_path: Path
) -> None:
    command = _program()
    base = int(time.time() * 1000) // MINUTE * MINUTE - 5 * MINUTE  # recent: the changelog deletes by time
    rng = random.Random(4)
    rows = [(f"user-{rng.randrange(4)}", base + rng.randrange(0, 5 * MINUTE)) for _ in range(120)]
    expected = collections.Counter((user, ts - ts % MINUTE) for user, ts in rows)
    asyncio.run(_produce(kafka.bootstrap_servers, rows))
    done = subprocess.run(
        [*command, kafka.bootstrap_servers, APP, TOPIC, str(len(rows)), str(tmp_path / "kafka-streams")],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    changelog = asyncio.run(_changelog(kafka.bootstrap_servers))
    assert len(changelog) == len(rows)  # caching off: one changelog record per update

    db = KeyValueStore(tmp_path / "restored", name="counts")
    try:
        store = WindowStore(db, size_ms=MINUTE, retention_ms=10 * MINUTE)
        assert store.restore_batch(changelog) == len(rows)
        typed = TypedWindowStore(store, STRING, INT64)
        assert {(user, start): n for user, start, n in typed.all()} == dict(expected)
        for user in {u for u, _ in rows}:
            assert list(typed.fetch(user, base, base + 5 * MINUTE)) == sorted(
                (start, n) for (u, start), n in expected.items() if u == user
            )
    finally:
        db.close()

    configs = asyncio.run(_topic_configs(kafka.bootstrap_servers, CHANGELOG))
    ours = StateStore(name="counts", kind="window", window_size_ms=MINUTE, retention_ms=10 * MINUTE)
    assert {k: configs[k] for k in ("cleanup.policy", "retention.ms")} == ours.changelog_configs()
