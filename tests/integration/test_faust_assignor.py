"""Two faust-streaming workers (examples/faust_app) on the broker, placed by
streamtasks.faust.StreamtasksAssignor: both get work, and the table holds every user's exact
click count (read back from the table's changelog)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from streamtasks.embedded import EmbeddedBroker, ExternalCluster
from streamtasks.runtime.admin import create_topics_async

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
PARTITIONS = 4


def _worker(name: str, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    faust_bin = Path(sys.executable).with_name("faust")
    with log.open("wb") as out:  # the child keeps its own descriptor
        return subprocess.Popen(
            [str(faust_bin), "-A", "examples.faust_app.app", "worker", "-l", "info", "--without-web"],
            cwd=ROOT,
            env={**env, "FAUST_WORKER": name},
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def _decode(data: bytes | None) -> object:
    if data is None:
        return None
    try:
        return json.loads(data)
    except ValueError:
        return data.decode()


async def _produce(bootstrap: str, topic: str, n: int, users: int) -> Counter[str]:
    expected: Counter[str] = Counter()
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        for i in range(n):
            user = f"user-{i % users}"
            await producer.send(topic, key=user.encode(), value=str(i).encode())
            expected[user] += 1
            if i % 50 == 49:
                await asyncio.sleep(0.05)
        await producer.flush()
    finally:
        await producer.stop()
    return expected


async def _table(bootstrap: str, changelog: str) -> dict[object, object]:
    consumer = AIOKafkaConsumer(changelog, bootstrap_servers=bootstrap, auto_offset_reset="earliest")
    await consumer.start()
    out: dict[object, object] = {}
    try:
        while True:
            batch = await consumer.getmany(timeout_ms=1_000)
            if not batch:
                return out
            for records in batch.values():
                for r in records:
                    out[_decode(r.key)] = _decode(r.value)
    finally:
        await consumer.stop()


def test_two_faust_workers_with_streamtasks_placement(
    kafka: EmbeddedBroker | ExternalCluster, tmp_path: Path
) -> None:
    run = uuid.uuid4().hex[:8]
    app_id, topic = f"faust-{run}", f"clicks-{run}"
    bootstrap = kafka.bootstrap_servers
    # The changelog is created here, before anything reads it: a reader of a topic that does not
    # exist yet would have the broker auto-create it with one partition.
    changelog = f"{app_id}-counts-changelog"
    asyncio.run(create_topics_async(bootstrap, {topic: PARTITIONS, changelog: PARTITIONS}))
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "FAUST_BROKER": bootstrap,
        "FAUST_APP_ID": app_id,
        "FAUST_TOPIC": topic,
        "FAUST_DATADIR": str(tmp_path / "data"),
        "FAUST_PARTITIONS": str(PARTITIONS),
    }
    logs = [tmp_path / "w1.log", tmp_path / "w2.log"]
    workers = [_worker("1", env, logs[0]), _worker("2", env, logs[1])]
    try:
        expected = asyncio.run(_produce(bootstrap, topic, n=600, users=40))
        deadline = time.monotonic() + 240
        table: dict[object, object] = {}
        both: list[str] = []
        # Done when the table is complete and a placement has included both workers (one
        # worker alone can finish the counts before the other has joined).
        while time.monotonic() < deadline:
            table = asyncio.run(_table(bootstrap, changelog))
            text = [log.read_text(errors="replace") for log in logs]
            placements = [line for t in text for line in t.splitlines() if "streamtasks placement" in line]
            both = [p for p in placements if "worker-1" in p and "worker-2" in p]
            if (table == dict(expected) and both) or any(w.poll() is not None for w in workers):
                break
            time.sleep(3)
        text = [log.read_text(errors="replace") for log in logs]
        assert all(w.poll() is None for w in workers), "\n".join(t[-4000:] for t in text)
        assert table == dict(expected), "\n".join(t[-4000:] for t in text)
        assert both, "no StreamtasksAssignor placement included both workers"
    finally:
        for w in workers:
            if w.poll() is None:
                w.send_signal(signal.SIGTERM)
        for w in workers:
            try:
                w.wait(timeout=30)
            except subprocess.TimeoutExpired:
                w.kill()
                w.wait()
