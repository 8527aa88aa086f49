"""The three-broker cluster of issue 27, measured: start time, a killed broker back with its
replicas in sync, and the fault proxy's overhead.

    .venv/bin/python benchmarks/cluster.py [--round-trips 200] [--kills 2]

Rows (one table on stdout, progress on stderr):

1. ``start_cluster(3, proxied=True)``: formatting the three storages side by side, starting the
   three JVMs, until every broker is in the cluster's metadata.
2. per kill (``--kills`` times): SIGKILL the leader of an RF-3 topic's partition; the time
   until an ``acks=all`` produce is acknowledged again (the controller fences the broker after
   ``broker.session.timeout.ms`` = 4 s and elects another leader); then ``start()`` (same ports
   and data: until it is in the metadata again) and the time from that call until the ISR of
   every partition, ``__consumer_offsets`` included, is full again.
3. the proxy's overhead: a produce (``acks=all``) then a fetch of that record by an assigned
   consumer, ``--round-trips`` times, through the proxies (``bootstrap_servers``) and around them
   (``direct_bootstrap_servers``: the brokers' INTERNAL listener), alternating in rounds of 20;
   p50 / p95 / max in ms.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import sys
import time

from _paths import project_imports  # benchmarks/assignors.py would shadow the package

with project_imports():
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    from streamtasks.embedded.kafka_cluster import KafkaCluster, start_cluster

TOPIC = "bench-cluster"


def note(text: str) -> None:
    print(f"[cluster] {text}", file=sys.stderr, flush=True)


async def _until_acknowledged(bootstrap: str) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", request_timeout_ms=60_000)
    await producer.start()
    try:
        await producer.send_and_wait(TOPIC, b"after-kill", partition=0)
    finally:
        await producer.stop()


def kill_and_restart(cluster: KafkaCluster) -> tuple[float, float, float]:
    """(kill → acks=all acknowledged, start() → in the metadata, start() → ISR full) in seconds."""
    victim = cluster.broker(cluster.leaders([TOPIC])[(TOPIC, 0)])
    killed = time.monotonic()
    victim.kill()
    asyncio.run(_until_acknowledged(cluster.bootstrap_servers))
    failover = time.monotonic() - killed
    started = time.monotonic()
    victim.start()
    back = time.monotonic() - started
    cluster.wait_under_replicated(0, timeout_s=180)
    return failover, back, time.monotonic() - started


async def _round_trips(bootstrap: str, count: int) -> list[float]:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0)
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, fetch_max_wait_ms=10)
    await producer.start()
    await consumer.start()
    try:
        tp = TopicPartition(TOPIC, 0)
        consumer.assign([tp])
        await consumer.seek_to_end(tp)
        times = []
        for i in range(count):
            value = f"rt-{i}-{time.monotonic_ns()}".encode()
            start = time.monotonic()
            await producer.send_and_wait(TOPIC, value, partition=0)
            while True:
                batch = await consumer.getone()
                if batch.value == value:
                    break
            times.append(time.monotonic() - start)
        return times
    finally:
        await consumer.stop()
        await producer.stop()


def ms(values: list[float]) -> str:
    ordered = sorted(values)
    p95 = ordered[max(0, round(0.95 * len(ordered)) - 1)]
    return f"{statistics.median(ordered) * 1000:.1f} / {p95 * 1000:.1f} / {ordered[-1] * 1000:.1f}"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--round-trips", type=int, default=200)
    parser.add_argument("--kills", type=int, default=2)
    args = parser.parse_args()
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)  # the kills' connection errors
    rows: list[tuple[str, str]] = []
    note("starting three brokers behind proxies")
    start = time.monotonic()
    cluster = start_cluster(3, proxied=True)
    try:
        rows.append(("start_cluster(3, proxied=True)", f"{time.monotonic() - start:.1f} s"))
        cluster.create_topics({TOPIC: 1})
        cluster.wait_isr_full([TOPIC])
        for n in range(args.kills):
            note(f"kill {n + 1}: SIGKILL the leader of {TOPIC}-0")
            failover, back, isr = kill_and_restart(cluster)
            rows.append((f"kill {n + 1}: kill -> acks=all acknowledged", f"{failover:.1f} s"))
            rows.append((f"kill {n + 1}: start() -> in the metadata", f"{back:.1f} s"))
            rows.append((f"kill {n + 1}: start() -> ISR full (all topics)", f"{isr:.1f} s"))
        through: list[float] = []
        around: list[float] = []
        for done in range(0, args.round_trips, 20):
            size = min(20, args.round_trips - done)
            note(f"round trips {done + 1}-{done + size} through and around the proxies")
            through += asyncio.run(_round_trips(cluster.bootstrap_servers, size))
            around += asyncio.run(_round_trips(cluster.direct_bootstrap_servers, size))
        rows.append(
            (f"produce+fetch through the proxies, p50/p95/max (n={len(through)})", f"{ms(through)} ms")
        )
        rows.append((f"produce+fetch around the proxies, p50/p95/max (n={len(around)})", f"{ms(around)} ms"))
    finally:
        cluster.stop()
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
