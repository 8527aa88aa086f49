"""Batches per partition on a real broker: every record lands, in order, and the batch
callbacks name each batch's offsets; keyed records land where ``producer.send`` puts them."""

from __future__ import annotations

import asyncio
import itertools
import uuid
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from streamtasks.app.sending import Row, by_partition, partition_for, partitions_of, send_rows
from streamtasks.embedded import Cluster
from streamtasks.runtime.admin import create_topics_async
from streamtasks.runtime.aio import to_aio
from topology.ids import TopicPartition


async def _read_all(bootstrap: str, tp: TopicPartition, count: int) -> list[Any]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest")
    await consumer.start()
    try:
        consumer.assign([to_aio(tp)])
        records: list[Any] = []
        for _ in range(200):
            if len(records) >= count:
                break
            batch = await consumer.getmany(timeout_ms=200)
            records += [r for rs in batch.values() for r in rs]
        return records
    finally:
        await consumer.stop()


def test_by_partition_keeps_the_order_within_each_partition() -> None:
    a, b = TopicPartition("t", 0), TopicPartition("t", 1)
    h = (("trace", b"t1"),)
    grouped = by_partition([(a, b"1", b"x", 5, h), (b, b"2", None, None, ()), (a, b"3", b"y", 7, ())])
    assert grouped == {a: [(b"1", b"x", 5, h), (b"3", b"y", 7, ())], b: [(b"2", None, None, ())]}


def test_rows_span_several_batches_in_order(kafka: Cluster) -> None:
    async def run() -> None:
        topic = f"sending-{uuid.uuid4().hex[:8]}"
        await create_topics_async(kafka.bootstrap_servers, {topic: 3})
        producer = AIOKafkaProducer(
            bootstrap_servers=kafka.bootstrap_servers, acks="all", max_batch_size=1024
        )
        await producer.start()
        tp = TopicPartition(topic, 2)
        rows: list[Row] = [
            (f"k{i % 7}".encode(), f"{i:0100d}".encode(), 1_000 + i, ((f"h{i}", b"x"),)) for i in range(300)
        ]
        rows.append((b"gone", None, None, ()))  # a tombstone, timestamped by the producer's clock
        done: list[tuple[int, int, int]] = []
        try:
            await send_rows(producer, tp, rows, lambda i, n, f: done.append((f.result().offset, n, i)))
            await producer.flush()
            known = await partitions_of(producer, topic)
            keyed = {partition_for(k, known) for k in (b"k1", b"k2", b"other")}
            sent = [await (await producer.send(topic, key=k, value=b"v")) for k in (b"k1", b"k2", b"other")]
        finally:
            await producer.stop()
        assert keyed == {m.partition for m in sent}
        assert len(done) > 1  # 30 KB of rows do not fit in one 1 KB batch
        spans = sorted(done)
        assert sum(n for _, n, _ in spans) == len(rows)
        assert all(o + n == nxt for (o, n, _), (nxt, _, _) in itertools.pairwise(spans))
        # each batch names the index of its first row: offsets and indexes move together
        assert all(o - spans[0][0] == i for o, _, i in spans)
        read = await _read_all(kafka.bootstrap_servers, tp, len(rows))
        assert [(r.key, r.value) for r in read[: len(rows)]] == [(k, v) for k, v, _, _ in rows]
        # timestamps and headers go out as given; a None timestamp is the producer's clock
        got = [(r.timestamp, tuple(r.headers)) for r in read[:300]]
        assert got == [(ts, h) for _, _, ts, h in rows[:300]]
        assert read[300].timestamp > 1_000_000_000_000
        assert read[0].offset == spans[0][0]

    asyncio.run(run())
