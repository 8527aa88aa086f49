"""Poison records, headers and timestamps on a real broker, read back from the topics.

Every input record carries an explicit timestamp and a ``seq`` header. The processor reads the
value with the STRING source serde, counts it in a logged store, and sends it to ``out``; a value
of ``boom`` makes it raise, bytes that are not UTF-8 make the serde fail, and a value of ``big``
makes it send 4 KB to a topic whose ``max.message.bytes`` is 1 KB (the broker refuses it).

* CONTINUE with a dead-letter topic: every input offset is either in ``out`` (with its input's
  timestamp and headers) or in the dead-letter topic (its key and value bytes as they arrived,
  KIP-1034's headers naming the error and the offset), and the committed offsets are the ends.
* FAIL (the default): ``run`` raises ProcessingError, ``stop`` returns, and the committed offset
  of the poison record's partition is the poison record's offset, read back from the broker.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import TopicPartition as AioTP

from streamtasks.app import App, ProcessingError, Processor, ProcessorContext, Record
from streamtasks.embedded import EmbeddedBroker, ExternalCluster
from streamtasks.runtime.admin import TopicSpec, create_topics_async
from streamtasks.state import INT64, STRING
from tests.integration.test_app_send_failure import _committed
from topology import TopologyBuilder
from topology.names import changelog_topic

pytestmark = [pytest.mark.integration]

PARTITIONS = 2
COUNT = 40
#: Near now: the broker's time retention (7 days by default) deletes segments whose records are
#: all older, so records stamped years ago could vanish mid-test (tests/integration/punctuation_apps.py).
BASE_TS = time.time_ns() // 1_000_000 - 60_000
#: seq -> poison value (partition = seq % 2).
POISON = {7: b"\xff\xfe not utf-8", 12: b"boom", 21: b"big"}


def value_of(seq: int) -> bytes:
    return POISON.get(seq, f"v{seq}".encode())


def processor_for(out: str, big: str) -> Processor:
    def process(ctx: ProcessorContext, rec: Record) -> None:
        if rec.value == "boom":
            raise ValueError(f"cannot process seq {dict(rec.headers)['seq'].decode()}")
        counts = ctx.store("counts")
        counts.put(rec.key, (counts.get(rec.key) or 0) + 1)
        if rec.value == "big":
            ctx.send(big, key=rec.key.encode(), value=b"x" * 4096)
        else:
            ctx.send(out, key=rec.key.encode(), value=rec.value.encode())

    return process


async def produce(bootstrap: str, topic: str, seqs: list[int]) -> dict[int, tuple[int, int]]:
    """seq -> (partition, offset)."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        where: dict[int, tuple[int, int]] = {}
        for seq in seqs:
            meta = await producer.send_and_wait(
                topic,
                key=f"k{seq % 5}".encode(),
                value=value_of(seq),
                partition=seq % PARTITIONS,
                timestamp_ms=BASE_TS + seq,
                headers=[("seq", str(seq).encode()), ("trace", b"t%d" % seq)],
            )
            where[seq] = (meta.partition, meta.offset)
        return where
    finally:
        await producer.stop()


async def read_all(
    bootstrap: str, topic: str, partitions: int = PARTITIONS, isolation_level: str = "read_uncommitted"
) -> list[Any]:
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, auto_offset_reset="earliest", isolation_level=isolation_level
    )
    await consumer.start()
    try:
        tps = [AioTP(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        ends = await consumer.end_offsets(tps)
        out: list[Any] = []
        for _ in range(100):
            positions = [await consumer.position(tp) for tp in tps]
            if all(pos >= ends[tp] for pos, tp in zip(positions, tps, strict=True)):
                break
            batch = await consumer.getmany(timeout_ms=200)
            out += [r for rs in batch.values() for r in rs]
        return out
    finally:
        await consumer.stop()


@dataclass(frozen=True, slots=True, kw_only=True)
class Setup:
    """A scenario's app and topics (the input ``topic`` is also the application id)."""

    app: App
    topic: str
    out: str
    big: str
    dlq: str


async def set_up(bootstrap: str, tmp: str, prefix: str, **settings: Any) -> Setup:
    """Create the topics and the app (not started) of a scenario."""
    app_id = topic = f"{prefix}-{uuid.uuid4().hex[:8]}"
    out, big, dlq = f"{topic}-out", f"{topic}-big", f"{topic}-dlq"
    await create_topics_async(
        bootstrap,
        [
            TopicSpec(name=topic, partitions=PARTITIONS),
            TopicSpec(name=out, partitions=PARTITIONS),
            TopicSpec(name=big, partitions=1, configs={"max.message.bytes": "1024"}),
            TopicSpec(name=dlq, partitions=1),
        ],
    )
    builder = TopologyBuilder(app_id)
    builder.stream(topic).store("counts")
    app = App(
        builder.build(),
        {0: processor_for(out, big)},
        application_id=app_id,
        bootstrap_servers=bootstrap,
        state_dir=tmp,
        session_timeout_ms=6_000,
        heartbeat_interval_ms=500,
        commit_interval_ms=600_000,  # commits when the test asks (and on stop)
        stores={"counts": (STRING, INT64)},
        source_serdes={topic: (STRING, STRING)},
        dead_letter_queue_topic=dlq,
        **settings,
    )
    return Setup(app=app, topic=topic, out=out, big=big, dlq=dlq)


async def scenario(bootstrap: str, tmp: str, seqs: list[int], **handlers: Any) -> dict[str, Any]:
    setup = await set_up(bootstrap, tmp, "errors", **handlers)
    app, topic, app_id, out, dlq = setup.app, setup.topic, setup.topic, setup.out, setup.dlq
    where = await produce(bootstrap, topic, seqs)
    failure: BaseException | None = None
    await app.start()
    try:
        await asyncio.wait_for(app.run(until=lambda: app.tasks.records_processed >= len(seqs)), 60)
        await app.commit()
    except ProcessingError as exc:
        failure = exc
    finally:
        await app.stop()
    return {
        "topic": topic,
        "where": where,
        "failure": failure,
        "dropped": app.tasks.records_dropped,
        "committed": await _committed(bootstrap, app_id, topic),
        "out": await read_all(bootstrap, out),
        "dlq": await read_all(bootstrap, dlq, 1),
        "changelog": await read_all(bootstrap, changelog_topic(app_id, "counts")),
    }


CONTINUE = {
    "deserialization_exception_handler": "log_and_continue",
    "processing_exception_handler": "log_and_continue",
    "production_exception_handler": "log_and_continue",
}


def test_continue_skips_and_dead_letters_each_poison_record_and_commits_past_it(
    kafka: EmbeddedBroker | ExternalCluster, tmp_path: Any
) -> None:
    seqs = list(range(COUNT))
    got = asyncio.run(scenario(kafka.bootstrap_servers, str(tmp_path), seqs, **CONTINUE))
    assert got["failure"] is None
    where: dict[int, tuple[int, int]] = got["where"]
    # the committed offsets are past every record, the poison ones included
    ends = {p: 1 + max(o for q, o in where.values() if q == p) for p in range(PARTITIONS)}
    assert got["committed"] == ends
    # the per-offset audit: every input offset reached `out` or the dead-letter topic
    out_seqs = {int(dict(r.headers)["seq"]) for r in got["out"]}
    dead = {int(dict(r.headers)["seq"]): r for r in got["dlq"]}
    assert out_seqs | set(dead) == set(seqs)
    assert out_seqs & set(dead) == set()
    assert set(dead) == set(POISON)
    assert got["dropped"] == len(POISON)
    # outputs carry their input's timestamp and headers
    for r in got["out"]:
        seq = int(dict(r.headers)["seq"])
        assert r.timestamp == BASE_TS + seq
        assert list(r.headers) == [("seq", str(seq).encode()), ("trace", b"t%d" % seq)]
        assert r.value == value_of(seq)
    # dead letters: the input's bytes, timestamp and headers, then KIP-1034's six
    expected_class = {
        7: "streamtasks.errors.SerdeError",
        12: "builtins.ValueError",
        21: "aiokafka.errors.MessageSizeTooLargeError",
    }
    for seq, r in dead.items():
        headers = dict(r.headers)
        partition, offset = where[seq]
        assert (r.key, r.value, r.timestamp) == (f"k{seq % 5}".encode(), value_of(seq), BASE_TS + seq)
        assert headers["trace"] == b"t%d" % seq
        assert headers["__streams.errors.exception"].decode() == expected_class[seq]
        assert headers["__streams.errors.topic"].decode() == got["topic"]
        assert headers["__streams.errors.partition"] == str(partition).encode()
        assert headers["__streams.errors.offset"] == str(offset).encode()
        # a raised error's trace; the producer's error was never raised: its one line
        trace = headers["__streams.errors.stacktrace"]
        assert trace.startswith(b"Traceback") if seq != 21 else trace.startswith(b"aiokafka.errors.")
    assert b"cannot process seq 12" in dict(dead[12].headers)["__streams.errors.message"]
    # changelog records keep the timestamp of the write: each key's last write is its
    # latest processed input (compaction aside, the last record of each key)
    # (per task: partition p's store counts the inputs of partition p)
    last: dict[tuple[int, bytes], int] = {}
    for r in sorted(got["changelog"], key=lambda r: (r.partition, r.offset)):
        last[r.partition, r.key] = r.timestamp
    processed = [s for s in seqs if s not in (7, 12)]  # `big` was counted before its send failed
    assert len(last) == 10
    for (partition, key), ts in last.items():
        mine = [s for s in processed if s % PARTITIONS == partition and f"k{s % 5}".encode() == key]
        assert ts == BASE_TS + max(mine)


@pytest.mark.parametrize("poison", [7, 12], ids=["undeserializable", "processor-raises"])
def test_fail_stops_cleanly_with_nothing_committed_past_the_poison_record(
    kafka: EmbeddedBroker | ExternalCluster, tmp_path: Any, poison: int
) -> None:
    seqs = [s for s in range(COUNT) if s not in POISON or s == poison]
    got = asyncio.run(scenario(kafka.bootstrap_servers, str(tmp_path), seqs))
    assert isinstance(got["failure"], ProcessingError)
    partition, offset = got["where"][poison]
    assert f"@{offset}" in str(got["failure"])
    committed = got["committed"]
    assert committed[partition] is not None
    assert committed[partition] == offset  # up to the poison record, nothing past it
    # every record before it in its partition reached `out`
    before = {s for s, (p, o) in got["where"].items() if p == partition and o < committed[partition]}
    assert before <= {int(dict(r.headers)["seq"]) for r in got["out"]}
    # the built-in FAIL handler dead-letters the record it failed on, as Kafka Streams 4.x does
    assert [int(dict(r.headers)["seq"]) for r in got["dlq"]] == [poison]


def test_a_refused_output_under_fail_stops_the_commits(
    kafka: EmbeddedBroker | ExternalCluster, tmp_path: Any
) -> None:
    seqs = [s for s in range(COUNT) if s not in POISON or s == 21]
    got = asyncio.run(scenario(kafka.bootstrap_servers, str(tmp_path), seqs))
    assert isinstance(got["failure"], ProcessingError)
    assert "MessageSizeTooLargeError" in str(got["failure"])
    assert got["committed"] == {0: None, 1: None}  # no commit passed the refused record
    assert [int(dict(r.headers)["seq"]) for r in got["dlq"]] == [21]
