"""``kill -9`` of an app worker whose record cache is full of dirty entries loses nothing.

A worker runs the stateful drill app with the default 10 MiB record cache and a 5 s commit
interval, so at the kill its cache holds seconds of updates that never reached RocksDB or the
changelog. A fresh worker (empty state directory) takes over: it restores from the changelog
and reprocesses from the last committed offset. Two proofs, from what the broker holds:

* per input offset (:mod:`streamtasks.drills.offset_audit`): every offset the broker
  acknowledged was processed;
* per key, from the ``latest`` store's changelog read back after the survivor stopped cleanly
  (its cache flushed): the last record of each key in the changelog holds the last value
  produced for that key.
"""

from __future__ import annotations

import asyncio
import io
import tempfile

import pytest
from aiokafka import AIOKafkaConsumer

from streamtasks.drills.offset_audit import AuditTopicReader
from streamtasks.drills.stateful_demo import DrillRun
from streamtasks.embedded import EmbeddedBroker, ExternalCluster
from streamtasks.runtime.admin import create_topics_async
from streamtasks.runtime.aio import AioTopicPartition
from topology.names import changelog_topic

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PARTITIONS = 4


async def _last_per_key(bootstrap: str, topic: str) -> dict[str, int]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, auto_offset_reset="earliest")
    await consumer.start()
    try:
        tps = [AioTopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        ends = await consumer.end_offsets(tps)
        last: dict[str, int] = {}
        for _ in range(600):
            positions = [await consumer.position(tp) for tp in tps]
            if all(pos >= ends[tp] for pos, tp in zip(positions, tps, strict=True)):
                break
            batch = await consumer.getmany(timeout_ms=200)
            for records in batch.values():
                for r in records:
                    if r.value is not None:
                        last[r.key.decode()] = int.from_bytes(r.value, "big", signed=True)
        return last
    finally:
        await consumer.stop()


async def _drill(bootstrap: str, out: io.StringIO) -> tuple[DrillRun, dict[str, int], bool]:
    run = DrillRun(bootstrap, out, PARTITIONS, keys=400, rate=800)
    await create_topics_async(bootstrap, {run.topic: PARTITIONS, run.audit_topic: 1})
    reader = AuditTopicReader(bootstrap, run.audit_topic, run.offsets)
    await reader.start()
    stop = asyncio.Event()
    try:
        with tempfile.TemporaryDirectory(prefix="streamtasks-cache-crash-") as root:
            first = run.worker("w1", root)
            first.argv += ["--commit-interval-ms", "5000"]
            await first.start()
            producer = asyncio.get_running_loop().create_task(run.produce(stop))
            try:
                assert await run.wait_for("w1 processing", lambda: first.processed > 500, 90)
                await asyncio.sleep(3.0)  # well inside the 5 s commit interval: the cache is dirty
                await first.kill()
                run.say("kill -9 w1 with a dirty cache")
                survivor = run.worker("w2", root)
                await survivor.start()
                await asyncio.sleep(4.0)
            finally:
                stop.set()
                await producer
            complete = await reader.wait_complete(120)
            await survivor.stop()  # a clean close flushes its cache to the changelog
    finally:
        await reader.stop()
    last = await _last_per_key(bootstrap, changelog_topic(run.app_id, "latest"))
    return run, last, complete


def test_kill_9_with_a_full_cache_loses_nothing(kafka: EmbeddedBroker | ExternalCluster) -> None:
    out = io.StringIO()
    run, last, complete = asyncio.run(_drill(kafka.bootstrap_servers, out))
    report = run.offsets.report()
    print(out.getvalue(), report.line())
    assert complete, report.line()
    assert report.acknowledged > 1_000, report.line()
    assert report.lost == 0, report.line()
    assert last == run.last_value  # every key's last produced value is its last changelog record
