"""End-to-end throughput of streamtasks.Consumer versus a plain aiokafka consumer, and
rebalance latency (a member joining a live group until it holds partitions), eager versus
cooperative, on the same broker.

    .venv/bin/python benchmarks/runtime.py [--records 200000] [--sizes 3,10,30] [--quick]
        [--broker auto|kafka|tansu]

Uses the embedded broker (``--broker``, else ``$STREAMTASKS_BROKER``, else auto: Apache Kafka where
Java 17+ and Maven are on PATH, otherwise Tansu) unless STREAMTASKS_BOOTSTRAP names a cluster.
Prints which broker, then two tables.

The throughput table gains SASL_SSL rows where Apache Kafka can run (``--no-secure`` skips them):
the secured embedded broker (:mod:`streamtasks.embedded.secure_broker`) is started in the same
run, the same records are produced there, and both consumers drain them over its SASL_SSL
listener (SCRAM-SHA-512), interleaved as above. Every TLS session either opens is counted (a
TLS context whose ``sslobject_class`` counts handshakes started and completed): one handshake
per connection, and as many connections as the consumer needs, means no reconnect churn.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import ssl
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

_HERE = Path(__file__).parent.resolve()
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer  # noqa: E402
from aiokafka.structs import TopicPartition as AioTP  # noqa: E402

from streamtasks.embedded import BROKER_ENV, BROKER_KINDS, cluster_from_env  # noqa: E402
from streamtasks.runtime.client_file import security_kwargs  # noqa: E402
from streamtasks.runtime.consumer import Consumer  # noqa: E402
from streamtasks.runtime.security import ClientSettings, make_client_settings  # noqa: E402

sys.path.insert(0, str(_HERE))
from _table import format_table  # noqa: E402

PARTITIONS = 6


async def produce(bootstrap: str | ClientSettings, topic: str, records: int) -> None:
    producer = AIOKafkaProducer(
        **ClientSettings.of(bootstrap).aiokafka_kwargs(), linger_ms=20, max_batch_size=256 * 1024
    )
    await producer.start()
    try:
        payload = b"x" * 100
        for i in range(records):
            await producer.send(topic, payload, partition=i % PARTITIONS)
        await producer.flush()
    finally:
        await producer.stop()


async def drain_aiokafka(bootstrap: str | ClientSettings, topic: str, records: int) -> tuple[float, float]:
    consumer = AIOKafkaConsumer(
        **ClientSettings.of(bootstrap).aiokafka_kwargs(),
        group_id=None,
        auto_offset_reset="earliest",
        max_poll_records=500,
    )
    await consumer.start()
    consumer.assign([AioTP(topic, p) for p in range(PARTITIONS)])
    await consumer.seek_to_beginning()
    try:
        return await _steady_rate(consumer, records)
    finally:
        await consumer.stop()


async def _steady_rate(consumer: AIOKafkaConsumer | Consumer, records: int) -> tuple[float, float]:
    """(records per second, CPU microseconds of this process per record), measured from the
    first batch received to the last: start-up, group join and the fetcher's first prefetch are
    excluded alike for both consumers. The broker runs in another process, so the CPU figure is
    the consumer's own cost, which is what a wrapper adds to; wall-clock throughput here is
    bounded by the broker and varies run to run."""
    first = await consumer.getmany(timeout_ms=5000)
    while not first:
        first = await consumer.getmany(timeout_ms=5000)
    start, cpu_start = time.perf_counter(), time.process_time()
    opened_before = _CountedSSLObject.started
    seen = sum(len(v) for v in first.values())
    counted = 0
    while seen < records:
        batch = await consumer.getmany(timeout_ms=1000)
        n = sum(len(v) for v in batch.values())
        seen += n
        counted += n
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    _CountedSSLObject.opened_while_draining += _CountedSSLObject.started - opened_before
    return counted / wall, cpu * 1e6 / counted


async def drain_streamtasks(bootstrap: str | ClientSettings, topic: str, records: int) -> tuple[float, float]:
    settings = ClientSettings.of(bootstrap)
    consumer = Consumer(
        [topic],
        **security_kwargs(settings),
        bootstrap_servers=settings.bootstrap_servers,
        group_id=f"{topic}-{uuid.uuid4().hex[:6]}",  # secure-*: the ACLs grant those
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=6000,
        heartbeat_interval_ms=500,
    )
    await consumer.start()
    try:
        while len(consumer.assignment()) < PARTITIONS:
            await asyncio.sleep(0.05)
        return await _steady_rate(consumer, records)
    finally:
        await consumer.stop()


async def join_latency(bootstrap: str, members: int, assignor: str) -> float:
    """Seconds from a new member's start() until it holds partitions, in a live group of
    ``members - 1``."""
    topic = f"bench-join-{uuid.uuid4().hex[:6]}"
    return await _join(bootstrap, topic, members, assignor)


async def _join(bootstrap: str, topic: str, members: int, assignor: str) -> float:
    from streamtasks.embedded import ExternalCluster

    host = ExternalCluster(bootstrap)
    host.create_topics({topic: max(60, members * 2)})
    group = f"g-{topic}"
    settings = dict(
        bootstrap_servers=bootstrap,
        group_id=group,
        assignors=[assignor],
        session_timeout_ms=10000,
        heartbeat_interval_ms=1000,
        rebalance_timeout_ms=20000,
        enable_auto_commit=False,
    )
    group_members = [Consumer([topic], **settings) for _ in range(members - 1)]
    try:
        for c in group_members:
            await c.start()
        deadline = time.monotonic() + 180
        while not all(c.assignment() for c in group_members):
            if time.monotonic() > deadline:
                raise TimeoutError("group did not form")
            await asyncio.sleep(0.1)
        newcomer = Consumer([topic], **settings)
        start = time.perf_counter()
        await newcomer.start()
        group_members.append(newcomer)
        while not newcomer.assignment():
            if time.perf_counter() - start > 180:
                raise TimeoutError("newcomer got nothing")
            await asyncio.sleep(0.02)
        return time.perf_counter() - start
    finally:
        await asyncio.gather(*(c.stop() for c in group_members), return_exceptions=True)


async def throughput_rounds(
    bootstrap: str | ClientSettings, topic: str, records: int, rounds: int, on_drain: Any = None
) -> dict[str, list[tuple[float, float]]]:
    """Both consumers drain ``topic``, interleaved (who goes first alternates), ``rounds`` times."""
    results: dict[str, list[tuple[float, float]]] = {"aiokafka": [], "streamtasks": []}
    for rnd in range(rounds):
        print(f"throughput round {rnd + 1}/{rounds} ...", file=sys.stderr)
        order = ("aiokafka", "streamtasks") if rnd % 2 == 0 else ("streamtasks", "aiokafka")
        for name in order:  # alternate who goes first, so neither gains from running second
            drain = drain_aiokafka if name == "aiokafka" else drain_streamtasks
            results[name].append(await drain(bootstrap, topic, records))
            if on_drain is not None:
                on_drain(name)
    return results


class _CountedSSLObject(ssl.SSLObject):
    """Counts the TLS sessions started (a first handshake step) and completed."""

    started = 0
    completed = 0
    #: Sessions opened between a drain's first batch and its last (reconnects): should stay 0.
    opened_while_draining = 0

    def do_handshake(self) -> None:
        if not getattr(self, "_counted", False):
            self._counted = True
            _CountedSSLObject.started += 1
        super().do_handshake()  # SSLWantReadError until the handshake is done
        _CountedSSLObject.completed += 1


async def secure_rounds(
    records: int, rounds: int
) -> tuple[dict[str, list[tuple[float, float]]], dict[str, tuple[int, int, int]]]:
    """The throughput rounds over the secured embedded Apache Kafka's SASL_SSL listener, and per
    consumer (TLS connections opened, handshakes completed, drains)."""
    from streamtasks.embedded.kafka_broker import kafka_requirements_missing
    from streamtasks.embedded.secure_broker import SecureKafkaBroker

    missing = kafka_requirements_missing()
    if missing is not None or os.environ.get("STREAMTASKS_BOOTSTRAP"):
        print(f"no SASL_SSL rows: {missing or 'STREAMTASKS_BOOTSTRAP names a cluster'}", file=sys.stderr)
        return {}, {}
    print("starting the secured Apache Kafka for the SASL_SSL rows ...", file=sys.stderr)
    with SecureKafkaBroker() as broker:
        cluster = broker.secured()
        context = cluster.ssl_context()
        context.sslobject_class = _CountedSSLObject
        values = {k: v for k, v in cluster.settings("app", "SCRAM-SHA-512").items() if k != "ssl_cafile"}
        settings = make_client_settings({**values, "ssl_context": context})
        topic = f"secure-bench-{uuid.uuid4().hex[:6]}"
        broker.create_topics({topic: PARTITIONS})
        print(f"producing {records} records over SASL_SSL ...", file=sys.stderr)
        await produce(settings, topic, records)
        counts: dict[str, tuple[int, int, int]] = {}
        mark = (_CountedSSLObject.started, _CountedSSLObject.completed)

        def counted(name: str) -> None:
            nonlocal mark
            now = (_CountedSSLObject.started, _CountedSSLObject.completed)
            opened, done, drains = counts.get(name, (0, 0, 0))
            counts[name] = (opened + now[0] - mark[0], done + now[1] - mark[1], drains + 1)
            mark = now

        results = await throughput_rounds(settings, topic, records, rounds, counted)
    print(
        f"SASL_SSL: {_CountedSSLObject.opened_while_draining} TLS connections opened while the consumers "
        "drained (after their first batch: reconnects)"
    )
    return results, counts


def print_throughput(
    plain: dict[str, list[tuple[float, float]]],
    secure: dict[str, list[tuple[float, float]]],
    rounds: int,
    labels: dict[str, str],
) -> None:
    """The throughput table (best of N; ratios against aiokafka over the same listener) and the
    per-round ratios' medians."""
    rows = []
    for tag, results in (("", plain), (" over SASL_SSL", secure)):
        if not results:
            continue
        base_rate = max(r for r, _ in results["aiokafka"])
        base_cpu = min(c for _, c in results["aiokafka"])
        for name in ("aiokafka", "streamtasks"):
            rate = max(r for r, _ in results[name])
            cpu = min(c for _, c in results[name])
            rows.append(
                (
                    labels[name] + tag,
                    f"{rate:,.0f}",
                    f"{rate / base_rate:.3f}",
                    f"{cpu:.2f}",
                    f"{cpu / base_cpu:.3f}",
                )
            )
    heads = (
        "consumer",
        f"records/s (best of {rounds})",
        "vs aiokafka",
        f"CPU µs/record (best of {rounds})",
        "vs aiokafka",
    )
    print(format_table(heads, rows))
    for tag, results in (("", plain), ("SASL_SSL: ", secure)):
        if not results:
            continue
        spread = {
            k: f"{min(r for r, _ in v):,.0f} to {max(r for r, _ in v):,.0f}" for k, v in results.items()
        }
        both = f"aiokafka {spread['aiokafka']}, streamtasks {spread['streamtasks']}"
        print(f"{tag}records/s over all rounds: {both}")
        # Both consumers of a round ran back to back, so their ratio shares the round's load;
        # the median over rounds is steadier than the best-of-N figures above.
        pairs = list(zip(results["streamtasks"], results["aiokafka"], strict=True))
        rate_ratios = sorted(s[0] / a[0] for s, a in pairs)
        cpu_ratios = sorted(s[1] / a[1] for s, a in pairs)
        print(
            f"{tag}streamtasks ÷ aiokafka per round, median (range): "
            f"records/s {statistics.median(rate_ratios):.3f} ({rate_ratios[0]:.3f}-{rate_ratios[-1]:.3f}), "
            f"CPU µs/record {statistics.median(cpu_ratios):.3f} ({cpu_ratios[0]:.3f}-{cpu_ratios[-1]:.3f})"
        )


def table(heads: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(heads)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return "\n".join(
        [fmt.format(*heads), fmt.format(*("-" * w for w in widths)), *(fmt.format(*r) for r in rows)]
    )


async def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--sizes", default="3,10,30")
    parser.add_argument("--rounds", type=int, default=5, help="throughput rounds (interleaved; best kept)")
    parser.add_argument("--quick", action="store_true", help="100k records, sizes 3,10")
    parser.add_argument(
        "--secure",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="the SASL_SSL rows (a secured Apache Kafka started in the same run)",
    )
    parser.add_argument(
        "--broker", choices=BROKER_KINDS, help=f"embedded broker (default: ${BROKER_ENV}, else auto)"
    )
    args = parser.parse_args()
    # aiokafka's retried warnings (e.g. a fresh topic's leader not yet in its metadata) are noise here
    logging.basicConfig(level=logging.ERROR, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    if args.broker:
        os.environ[BROKER_ENV] = args.broker
    if args.quick:
        args.records, args.sizes = 100_000, "3,10"
    load_start = os.getloadavg()[0]
    cluster = cluster_from_env()  # prints the broker it picked
    try:
        topic = f"bench-throughput-{uuid.uuid4().hex[:6]}"
        cluster.create_topics({topic: PARTITIONS})
        print(f"producing {args.records} records ...", file=sys.stderr)
        await produce(cluster.bootstrap_servers, topic, args.records)
        results = await throughput_rounds(cluster.bootstrap_servers, topic, args.records, args.rounds)
        labels = {
            "aiokafka": "aiokafka.AIOKafkaConsumer (manual assign)",
            "streamtasks": "streamtasks.Consumer (group member)",
        }
        secure: dict[str, list[tuple[float, float]]] = {}
        handshakes: dict[str, tuple[int, int, int]] = {}
        if args.secure:
            secure, handshakes = await secure_rounds(args.records, args.rounds)
        print_throughput(results, secure, args.rounds, labels)
        for name, (connections, completed, drains) in handshakes.items():
            print(
                f"SASL_SSL {name}: {connections} TLS connections opened over {drains} drains "
                f"({connections / drains:.1f} per drain), {completed} handshakes completed "
                f"({completed / max(connections, 1):.2f} per connection)"
            )
        print()
        lat_rows = []
        for size in [int(s) for s in args.sizes.split(",")]:
            for protocol, assignor in (("eager", "range"), ("cooperative", "cooperative_sticky")):
                print(f"join latency: {size} members, {protocol} ...", file=sys.stderr)
                seconds = await join_latency(cluster.bootstrap_servers, size, assignor)
                lat_rows.append((str(size), protocol, f"{seconds:.2f}"))
        print(format_table(("members", "protocol", "join → assigned (s)"), lat_rows))
        print(
            f"{os.cpu_count()} CPUs, load average {load_start:.2f} at start, {os.getloadavg()[0]:.2f} at end"
        )
    finally:
        cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
