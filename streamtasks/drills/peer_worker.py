"""A drill worker running another library's consumer in the group: kafka-python or
confluent-kafka (librdkafka). It prints the same JSON lines as :mod:`streamtasks.drills.worker`
(``started``, ``assigned`` / ``revoked`` / ``lost`` from its rebalance callbacks, ``consumed``
with ``<partition>:<offset>`` ids, ``stopped``), so the drill's ledger and record audit judge it
like any member.

    python -m streamtasks.drills.peer_worker --client kafka-python|confluent \
        --bootstrap-servers H:P --group G --topic T --name p1 --assignor range|cooperative-sticky

Neither library lets one consumer offer an eager and a cooperative assignor together (kafka-python:
``KafkaConfigurationError``; librdkafka: "must have the same protocol type"), so a peer's
release is one assignor, and its move to ``cooperative-sticky`` is one bounce (docs/drills.md).
Offsets are auto-committed: both libraries commit what ``poll`` returned before giving up a
partition and when closing, and each record is reported as soon as ``poll`` returns it.
SIGTERM closes the consumer cleanly (commit, revoke, leave).
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from streamtasks.drills._proc import configure_logging
from streamtasks.drills.ledger import offset_id
from streamtasks.runtime.client_file import (
    add_client_config_argument,
    kafka_python_config,
    librdkafka_config,
    settings_from_args,
)

__all__ = ["CLIENTS", "main"]

#: The peer libraries, and the assignor names each spells its own way.
CLIENTS = ("kafka-python", "confluent")

#: Session and heartbeat settings of the drill's streamtasks workers.
_SESSION_TIMEOUT_MS = 6000
_HEARTBEAT_INTERVAL_MS = 500


def emit(**fields: Any) -> None:
    fields["t"] = time.monotonic_ns() // 1_000_000
    sys.stdout.write(json.dumps(fields, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def _report(name: str, kind: str) -> Callable[[Iterable[Any]], None]:
    def report(tps: Iterable[Any]) -> None:
        emit(worker=name, kind=kind, partitions=sorted([tp.topic, tp.partition] for tp in tps))

    return report


class _Peer:
    """One peer consumer: ``poll`` returns the ids of the records it handed out."""

    def poll(self) -> list[str]:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


class _KafkaPython(_Peer):
    def __init__(self, args: argparse.Namespace) -> None:
        from kafka import KafkaConsumer
        from kafka.consumer.subscription_state import ConsumerRebalanceListener
        from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
        from kafka.coordinator.assignors.range import RangePartitionAssignor

        assignor = {"range": RangePartitionAssignor, "cooperative-sticky": CooperativeStickyAssignor}
        name = args.name

        class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
            def on_partitions_revoked(self, revoked: Any) -> None:
                _report(name, "revoked")(revoked)

            def on_partitions_assigned(self, assigned: Any) -> None:
                _report(name, "assigned")(assigned)

            def on_partitions_lost(self, lost: Any) -> None:
                _report(name, "lost")(lost)

        self._consumer = KafkaConsumer(
            **kafka_python_config(settings_from_args(args.bootstrap_servers, args.client_config)),
            group_id=args.group,
            client_id=args.name,
            partition_assignment_strategy=[assignor[args.assignor]],
            session_timeout_ms=_SESSION_TIMEOUT_MS,
            heartbeat_interval_ms=_HEARTBEAT_INTERVAL_MS,
            auto_offset_reset="earliest",
            enable_auto_commit=True,
            auto_commit_interval_ms=200,
        )
        self._consumer.subscribe([args.topic], listener=Listener())

    def poll(self) -> list[str]:
        batch = self._consumer.poll(timeout_ms=100)
        return [offset_id(r.partition, r.offset) for records in batch.values() for r in records]

    def close(self) -> None:
        self._consumer.close()


class _Confluent(_Peer):
    def __init__(self, args: argparse.Namespace) -> None:
        from confluent_kafka import Consumer

        self._consumer = Consumer(
            {
                **librdkafka_config(settings_from_args(args.bootstrap_servers, args.client_config)),
                "group.id": args.group,
                "client.id": args.name,
                "partition.assignment.strategy": args.assignor,
                "session.timeout.ms": _SESSION_TIMEOUT_MS,
                "heartbeat.interval.ms": _HEARTBEAT_INTERVAL_MS,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": True,
                "auto.commit.interval.ms": 200,
            }
        )
        assigned, revoked, lost = (_report(args.name, k) for k in ("assigned", "revoked", "lost"))
        self._consumer.subscribe(
            [args.topic],
            on_assign=lambda _c, parts: assigned(parts),
            on_revoke=lambda _c, parts: revoked(parts),
            on_lost=lambda _c, parts: lost(parts),
        )

    def poll(self) -> list[str]:
        msg = self._consumer.poll(0.1)
        if msg is None or msg.error():
            return []
        partition, offset = msg.partition(), msg.offset()
        return [] if partition is None or offset is None else [offset_id(partition, offset)]

    def close(self) -> None:
        self._consumer.close()


def run(args: argparse.Namespace) -> None:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    peer: _Peer = _KafkaPython(args) if args.client == "kafka-python" else _Confluent(args)
    emit(worker=args.name, kind="started", client=args.client, assignor=args.assignor)
    try:
        while not stop.is_set():
            ids = peer.poll()
            if ids:
                emit(worker=args.name, kind="consumed", ids=ids)
    finally:
        peer.close()  # commits what was handed out, revokes (callbacks), leaves the group
    emit(worker=args.name, kind="stopped")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m streamtasks.drills.peer_worker")
    parser.add_argument("--client", choices=CLIENTS, required=True)
    parser.add_argument("--bootstrap-servers", required=True)
    add_client_config_argument(parser)
    parser.add_argument("--group", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--assignor", choices=("range", "cooperative-sticky"), default="range")
    parser.add_argument("--log-level", default="WARNING")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    configure_logging(args.log_level)
    run(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
