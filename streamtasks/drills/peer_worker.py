"""A drill worker running another library's consumer in the group: kafka-python,
confluent-kafka (librdkafka) or Java's ``KafkaConsumer`` (kafka-clients of the embedded
broker's version: ``java/peer``'s ``PeerConsumer``, a child JVM). It prints the same JSON lines
as :mod:`streamtasks.drills.worker` (``started``, ``assigned`` / ``revoked`` / ``lost`` from its
rebalance callbacks, ``consumed`` with ``<partition>:<offset>`` ids, ``stopped``), so the drill's
ledger and record audit judge it like any member.

    python -m streamtasks.drills.peer_worker --client kafka-python|confluent|java \
        --bootstrap-servers H:P --group G --topic T --name p1 --assignor range|cooperative-sticky \
        [--group-protocol consumer]

``--group-protocol consumer`` (confluent and java): KIP-848, the broker's assignor.

Neither library lets one consumer offer an eager and a cooperative assignor together (kafka-python:
``KafkaConfigurationError``; librdkafka: "must have the same protocol type"), so a peer's
release is one assignor, and its move to ``cooperative-sticky`` is one bounce (docs/drills.md).
Offsets are auto-committed by kafka-python and librdkafka: both commit what ``poll`` returned
before giving up a partition and when closing, and each record is reported as soon as ``poll``
returns it. The Java consumer commits synchronously after every poll (``commitSync``), its
records reported before. SIGTERM closes the consumer cleanly (commit, revoke, leave).
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from streamtasks.drills._proc import configure_logging
from streamtasks.drills.ledger import offset_id
from streamtasks.embedded._process import die_with_parent
from streamtasks.runtime.client_file import (
    add_client_config_argument,
    java_properties,
    kafka_python_config,
    librdkafka_config,
    settings_from_args,
    write_properties,
)

__all__ = ["CLIENTS", "main"]

#: The peer libraries, and the assignor names each spells its own way.
CLIENTS = ("kafka-python", "confluent", "java")

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

        protocol: dict[str, Any] = (
            {"group.protocol": "consumer"}  # librdkafka refuses the classic-only settings there
            if args.group_protocol == "consumer"
            else {
                "partition.assignment.strategy": args.assignor,
                "session.timeout.ms": _SESSION_TIMEOUT_MS,
                "heartbeat.interval.ms": _HEARTBEAT_INTERVAL_MS,
            }
        )
        self._consumer = Consumer(
            {
                **librdkafka_config(settings_from_args(args.bootstrap_servers, args.client_config)),
                "group.id": args.group,
                "client.id": args.name,
                **protocol,
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


#: The Java peer's logging: the consumer's rebalance and coordinator lines on stderr (the
#: worker's log when the drill keeps logs), the rest from WARN.
_JAVA_LOG4J2 = """<?xml version="1.0" encoding="UTF-8"?>
<Configuration status="WARN">
  <Appenders>
    <Console name="err" target="SYSTEM_ERR"><PatternLayout pattern="[%d] %p %m (%c)%n"/></Console>
  </Appenders>
  <Loggers>
    <Logger name="org.apache.kafka.clients.consumer.internals" level="INFO"/>
    <Root level="WARN"><AppenderRef ref="err"/></Root>
  </Loggers>
</Configuration>
"""
_RANGE = "org.apache.kafka.clients.consumer.RangeAssignor"


class _Java(_Peer):
    """``PeerConsumer`` in a child JVM, driven over stdin (``{"cmd":"stop"}`` closes it); its
    JSON lines are read by a thread and handled here, on the worker's thread."""

    close_timeout_s = 60.0

    def __init__(self, args: argparse.Namespace) -> None:
        from streamtasks.embedded.java import PEER_JVM_OPTIONS, peer_consumer

        program = peer_consumer()
        settings = settings_from_args(args.bootstrap_servers, args.client_config)
        self._name = args.name
        self._dir = tempfile.TemporaryDirectory(prefix="streamtasks-java-peer-")
        props = {
            "bootstrap.servers": settings.bootstrap_servers,
            "group.id": args.group,
            "client.id": args.name,
        }
        if args.group_protocol == "consumer":
            props["group.protocol"] = "consumer"
        elif args.assignor == "range":
            props["partition.assignment.strategy"] = _RANGE
        argv = [args.topic, *(f"{k}={v}" for k, v in props.items())]
        if settings.security_protocol != "PLAINTEXT":  # secrets in a 0600 file, never in argv
            secure = write_properties(java_properties(settings), Path(self._dir.name) / "client.properties")
            argv.append(f"@{secure}")
        log4j2 = os.path.join(self._dir.name, "log4j2.xml")
        with open(log4j2, "w") as out:
            out.write(_JAVA_LOG4J2)
        self._proc = subprocess.Popen(
            [*program.command(*PEER_JVM_OPTIONS, f"-Dlog4j2.configurationFile={log4j2}"), *argv],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            preexec_fn=die_with_parent,  # noqa: PLW1509 - only sets the parent-death signal
        )
        self._lines: queue.Queue[bytes | None] = queue.Queue()
        self._closed = False
        threading.Thread(target=self._read, name="java-stdout", daemon=True).start()

    def _read(self) -> None:
        assert self._proc.stdout is not None
        for raw in self._proc.stdout:
            self._lines.put(raw)
        self._lines.put(None)  # the JVM closed its stdout: it exited

    def _take(self, timeout_s: float) -> list[str] | None:
        """Handle what the JVM wrote within ``timeout_s``: rebalance lines emitted, records
        returned as ids; None once it has exited."""
        ids: list[str] = []
        try:
            raw = self._lines.get(timeout=timeout_s)
            while True:
                if raw is None:
                    return None
                event = json.loads(raw)
                kind = event.get("event")
                if kind in ("assigned", "revoked", "lost"):
                    emit(worker=self._name, kind=kind, partitions=sorted(event["partitions"]))
                elif kind == "records":
                    ids += [offset_id(int(p), int(o)) for p, o in event["offsets"]]
                elif kind == "closed":
                    self._closed = True
                raw = self._lines.get_nowait()
        except queue.Empty:
            return ids

    def poll(self) -> list[str]:
        ids = self._take(0.1)
        if ids is None:
            raise RuntimeError(f"the Java consumer exited ({self._proc.wait()}) before it was asked to stop")
        return ids

    def close(self) -> None:
        """Ask the JVM to close (commit, revoke, leave) and report what it still handed out."""
        assert self._proc.stdin is not None
        try:
            self._proc.stdin.write(b'{"cmd":"stop"}\n')
            self._proc.stdin.close()
        except OSError:
            pass  # already gone
        deadline = time.monotonic() + self.close_timeout_s
        while not self._closed and time.monotonic() < deadline:
            ids = self._take(0.2)
            if ids:
                emit(worker=self._name, kind="consumed", ids=ids)
            if ids is None:
                break
        try:
            self._proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._dir.cleanup()
        if not self._closed:
            raise RuntimeError(f"the Java consumer did not close cleanly (exit {self._proc.returncode})")


_PEERS: dict[str, Callable[[argparse.Namespace], _Peer]] = {
    "kafka-python": _KafkaPython,
    "confluent": _Confluent,
    "java": _Java,
}


def run(args: argparse.Namespace) -> None:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    if args.group_protocol == "consumer" and args.client == "kafka-python":
        raise SystemExit("kafka-python has no group.protocol=consumer (KIP-848)")
    peer = _PEERS[args.client](args)
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
    parser.add_argument("--group-protocol", choices=("classic", "consumer"), default="classic")
    parser.add_argument("--log-level", default="WARNING")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    configure_logging(args.log_level)
    run(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
