"""streamtasks.Consumer on KIP-848 (``group_protocol="consumer"``) beside the classic protocol,
on one broker, in one table.

    .venv/bin/python benchmarks/kip848.py [--repeat 5] [--partitions 6] [--bootstrap-servers HOST:PORT]

Uses ``--bootstrap-servers``, else ``$STREAMTASKS_BOOTSTRAP``, else the embedded broker
``$STREAMTASKS_BROKER`` picks; the consumer rows need Apache Kafka 4.x (Tansu has no API 68).
Per protocol and run, a fresh topic and group:

- join: ``Consumer.start()`` of a lone member until it owns every partition;
- scale-out: a second member's ``start()`` until both own half (each partition once);
- leave: that member's ``stop()`` until the first owns everything again;
- static restart: a static member (``group_instance_id``) stops and a new one with the same
  instance id starts at once, until it owns what the old one owned (the other member keeps
  its partitions throughout).

Classic members run ``cooperative_sticky`` with ``heartbeat.interval.ms`` 500 and
``session.timeout.ms`` 6000; KIP-848 members the broker's default assignor (``uniform``) and
heartbeat interval (500 ms on the embedded Apache Kafka, docs/testing.md). Figures are medians
(min-max) over ``--repeat`` runs on a shared machine: noisy; nothing asserts on a time.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any

from _paths import project_imports
from _table import format_table

with project_imports():
    from streamtasks.embedded import Cluster, EmbeddedBroker, ExternalCluster, KafkaBroker, cluster_from_env
    from streamtasks.runtime.consumer import Consumer
    from topology import TopicPartition

PROTOCOLS: dict[str, dict[str, Any]] = {
    "classic (cooperative_sticky)": {
        "assignors": ["cooperative_sticky"],
        "heartbeat_interval_ms": 500,
        "session_timeout_ms": 6000,
    },
    "KIP-848 (uniform, broker)": {"group_protocol": "consumer"},
}
COMMON = {"auto_offset_reset": "earliest", "enable_auto_commit": False, "rebalance_timeout_ms": 10_000}


def step(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


async def until(check: Callable[[], bool], timeout_s: float = 60) -> float:
    """Seconds until ``check()`` holds (polled every 5 ms)."""
    start = time.monotonic()
    while not check():
        if time.monotonic() - start > timeout_s:
            raise TimeoutError("no convergence within 60 s")
        await asyncio.sleep(0.005)
    return time.monotonic() - start


async def one_run(cluster: Cluster, settings: dict[str, Any], partitions: int) -> dict[str, float]:
    topic = f"bench-kip848-{uuid.uuid4().hex[:6]}"
    cluster.create_topics({topic: partitions})
    everything = frozenset(TopicPartition(topic, p) for p in range(partitions))
    base = {**COMMON, **settings, "bootstrap_servers": cluster.bootstrap_servers, "group_id": f"g-{topic}"}
    out: dict[str, float] = {}
    a = Consumer([topic], group_instance_id="a", **base)
    b = Consumer([topic], group_instance_id="b", **base)
    c: Consumer | None = None
    try:
        start = time.monotonic()
        await a.start()
        await until(lambda: a.assignment() == everything)
        out["join"] = time.monotonic() - start

        def halves(x: Consumer, y: Consumer) -> Callable[[], bool]:
            return lambda: (
                x.assignment() | y.assignment() == everything
                and not x.assignment() & y.assignment()
                and abs(len(x.assignment()) - len(y.assignment())) <= 1
            )

        start = time.monotonic()
        await b.start()
        await until(halves(a, b))
        out["scale-out"] = time.monotonic() - start

        held = b.assignment()
        start = time.monotonic()
        await b.stop()
        c = Consumer([topic], group_instance_id="b", **base)
        await c.start()
        await until(lambda: c is not None and c.assignment() == held and halves(a, c)())
        out["static restart"] = time.monotonic() - start

        dynamic = Consumer([topic], **base)
        await dynamic.start()
        await until(lambda: bool(dynamic.assignment()))
        start = time.monotonic()
        await dynamic.stop()
        await until(lambda: a.assignment() | (c.assignment() if c else frozenset()) == everything)
        out["leave"] = time.monotonic() - start
    finally:
        for consumer in (a, b, c):
            if consumer is not None:
                await consumer.stop()
    return out


def cell(values: list[float]) -> str:
    if not values:
        return "-"
    return f"{statistics.median(values):.2f} s ({min(values):.2f}-{max(values):.2f})"


async def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=5, help="runs per protocol (median shown)")
    parser.add_argument("--partitions", type=int, default=6, help="partitions of each run's topic")
    parser.add_argument("--bootstrap-servers", help="a cluster (default: $STREAMTASKS_BOOTSTRAP or embedded)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    load_start = os.getloadavg()[0]
    cluster: Cluster = (
        ExternalCluster(args.bootstrap_servers) if args.bootstrap_servers else cluster_from_env()
    )
    broker = (
        "embedded Tansu"
        if isinstance(cluster, EmbeddedBroker)
        else "embedded Apache Kafka"
        if isinstance(cluster, KafkaBroker)
        else "external"
    )
    measured: dict[str, dict[str, list[float]]] = {}
    try:
        for name, settings in PROTOCOLS.items():
            if settings.get("group_protocol") == "consumer" and 68 not in cluster.api_versions():
                step(f"{name}: skipped, the broker has no ConsumerGroupHeartbeat (API 68)")
                continue
            for i in range(args.repeat):
                run = await one_run(cluster, settings, args.partitions)
                step(f"{name} run {i + 1}: " + ", ".join(f"{k} {v:.2f} s" for k, v in run.items()))
                for key, value in run.items():
                    measured.setdefault(name, {}).setdefault(key, []).append(value)
    finally:
        cluster.stop()
    print(
        f"benchmarks/kip848.py --repeat {args.repeat} --partitions {args.partitions}: {broker} broker, "
        f"{os.cpu_count()} CPUs, load average {load_start:.2f} at start, {os.getloadavg()[0]:.2f} at end"
    )
    heads = ("protocol", "join", "scale-out (2nd member)", "leave", "static restart")
    rows = [
        (name, *(cell(m.get(k, [])) for k in ("join", "scale-out", "leave", "static restart")))
        for name, m in measured.items()
    ]
    print(format_table(heads, rows))
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
