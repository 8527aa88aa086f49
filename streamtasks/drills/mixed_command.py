"""``streamtasks drill run kafka-streams-to-streamtasks`` (and ``streamtasks-to-kafka-streams``):
the mixed Kafka Streams + App word count (:mod:`streamtasks.drills.mixed_streams`) on an
embedded Apache Kafka (``--broker``) or ``--bootstrap-servers``, its verdict table (or JSON)
and, with ``--report DIR``, ``report.json`` and ``report.html``; exit 0 on PASS, 1 on FAIL."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from typing import Any, TextIO

from streamtasks.drills.kafka_streams_peer import word_count_program
from streamtasks.embedded.java import JavaUnavailable
from streamtasks.errors import ConfigError

__all__ = ["run_mixed_command"]


def _refuse_options(args: argparse.Namespace) -> None:
    given = [
        flag
        for flag, on in (
            ("--simulate", args.simulate),
            ("--coordinator", args.coordinator),
            ("--peer", args.peer is not None),
            ("--client-config", getattr(args, "client_config", None) is not None),
            ("--protocol", args.protocol != "classic"),
            ("--library", args.library != "streamtasks"),
        )
        if on
    ]
    if given:
        raise ConfigError(
            f"drill {args.name!r} runs Kafka Streams' Java workers and Apps on a live streams group; "
            f"it takes no {', '.join(given)}"
        )


def run_mixed_command(args: argparse.Namespace, out: TextIO) -> int:
    from streamtasks.drills.demo_cluster import require_streams_groups
    from streamtasks.drills.mixed_streams import run_mixed, write_mixed_report
    from streamtasks.embedded import ExternalCluster, start_broker

    _refuse_options(args)
    try:
        word_count_program()  # compiled once (cached); Java 17+ and Maven are needed
    except JavaUnavailable as exc:
        raise ConfigError(f"drill {args.name!r} runs Kafka Streams 4.4 in Java: {exc}") from exc
    progress = sys.stderr if args.json else out
    bootstrap = args.bootstrap_servers or os.environ.get("STREAMTASKS_BOOTSTRAP")
    cluster: Any = ExternalCluster(bootstrap) if bootstrap else start_broker(args.broker or "kafka")
    try:
        require_streams_groups(cluster)

        def say(text: str) -> None:
            progress.write(text + "\n")
            progress.flush()

        say(f"drill {args.name} on {cluster.bootstrap_servers}")
        result = asyncio.run(run_mixed(args.name, cluster.bootstrap_servers, say=say))
    finally:
        cluster.stop()
    if args.report:
        progress.write(f"report: {write_mixed_report(result, args.report)}\n")
    if args.json:
        out.write(json.dumps(result.to_json(), indent=2) + "\n")
    else:
        out.write(f"\nstreamtasks drill {result.drill}: {'PASS' if result.ok else 'FAIL'}\n\n")
        rows = result.rows()
        w0 = max(len(a) for a, _, _ in rows)
        w1 = max(len(b) for _, b, _ in rows)
        for a, b, c in rows:
            out.write(f"{a:<{w0}}  {b:>{w1}}  {c}\n")
        out.write(f"steps: {'; '.join(result.steps)}\n")
        if result.lost:
            out.write(f"lost input offsets: {', '.join(result.lost)}\n")
        if result.duplicated:
            out.write(f"input offsets counted twice: {', '.join(result.duplicated)}\n")
    out.flush()
    return 0 if result.ok else 1
