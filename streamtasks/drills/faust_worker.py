"""A faust-streaming drill worker: the app a ``faust-to-streamtasks`` drill starts from.

    python -m streamtasks.drills.faust_worker --bootstrap-servers H:P --app-id A --topic T \
        --audit-topic AT --state-dir DIR --name w1 [--partitions 6] [--standbys 1]

A faust app (faust's own ``PartitionAssignor``) whose agent counts records per key in a table
``counts`` (changelog ``<app-id>-counts-changelog``: key = the record key's bytes, value = the
count as JSON, faust's ``raw`` / ``json`` codecs) and writes ``b"<partition>:<offset>"`` of every
record it processed to the audit topic, before faust commits the offset. It prints JSON lines
on stdout for the drill: ``assigned`` / ``revoked`` with the source topic's partitions, as faust
reports them (eager: everything is revoked before each assignment), ``revoked`` for
everything it held when its agent stops (a stopping faust worker sends no revocation signal),
and ``committed`` with the source topic's offsets after each commit faust made.
:func:`streamtasks.drills.stateful_app.faust_counts_app` is the ``streamtasks.App`` that reads
and writes the same table.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from typing import Any

from streamtasks.runtime.client_file import add_client_config_argument, settings_from_args
from streamtasks.runtime.security import ClientSettings

__all__ = ["main", "make_faust_app"]


#: The process's real stdout: a faust worker redirects ``sys.stdout`` into its logging once started.
_STDOUT = sys.__stdout__


#: faust's aiokafka consumer commits from its own thread.
_EMIT_LOCK = threading.Lock()


def emit(**fields: Any) -> None:
    fields["wall_ms"] = time.time_ns() // 1_000_000
    assert _STDOUT is not None
    line = json.dumps(fields, separators=(",", ":")) + "\n"
    with _EMIT_LOCK:
        _STDOUT.write(line)
        _STDOUT.flush()


def report_commits(name: str, topic: str) -> None:
    """Print ``committed`` lines (the input topic's offsets) after each commit faust's aiokafka
    consumer made: the drill charges a record never processed to whoever first committed past it."""
    from faust.transport.drivers.aiokafka import AIOKafkaConsumerThread

    original = AIOKafkaConsumerThread._commit
    if getattr(original, "_reports_commits", False):
        return

    async def _commit(self: Any, offsets: Any) -> bool:
        assigned = self.assignment()
        ok: bool = await original(self, offsets)
        if ok:
            rows = sorted([tp.topic, tp.partition, off] for tp, off in offsets.items() if tp in assigned)
            emit(worker=name, kind="committed", by="faust", offsets=[r for r in rows if r[0] == topic])
        return ok

    _commit._reports_commits = True  # type: ignore[attr-defined]
    AIOKafkaConsumerThread._commit = _commit  # type: ignore[method-assign]


def faust_security(client: ClientSettings) -> dict[str, Any]:
    """faust's ``broker_credentials`` for ``client`` (none for PLAINTEXT)."""
    import faust

    context = client.ssl_context()
    if client.uses_sasl:
        password = client.sasl_plain_password.get_secret_value() if client.sasl_plain_password else None
        credentials = faust.SASLCredentials(
            username=client.sasl_plain_username,
            password=password,
            ssl_context=context,
            mechanism=client.sasl_mechanism,
        )
        return {"broker_credentials": credentials}
    if context is not None:
        return {"broker_credentials": faust.SSLCredentials(context)}
    return {}


def make_faust_app(args: argparse.Namespace) -> Any:
    import faust

    from streamtasks.drills.ledger import offset_id

    client = settings_from_args(args.bootstrap_servers, args.client_config)
    datadir = os.path.join(args.state_dir, args.name)
    os.makedirs(datadir, exist_ok=True)
    app = faust.App(
        args.app_id,
        broker=f"kafka://{client.bootstrap_servers}",
        **faust_security(client),
        store="rocksdb://",
        datadir=datadir,
        canonical_url=f"http://{args.name}.invalid:6066/",
        web_enabled=False,
        table_standby_replicas=args.standbys,
        topic_partitions=args.partitions,
        broker_session_timeout=10.0,
        broker_heartbeat_interval=1.0,
    )
    source = app.topic(
        args.topic, key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw"
    )
    audit = app.topic(args.audit_topic, key_serializer="raw", value_serializer="raw")
    # key_type bytes: faust's "raw" codec for keys; value_type int: its "json" codec for values.
    counts = app.Table("counts", default=int, partitions=args.partitions, key_type=bytes, value_type=int)

    owned: set[tuple[str, int]] = set()
    report_commits(args.name, args.topic)

    @app.agent(source)
    async def count(stream: Any) -> None:
        try:
            async for event in stream.events():
                key = event.key
                counts[key] += 1
                message = event.message
                await audit.send(
                    key=str(message.partition).encode(),
                    value=offset_id(message.partition, message.offset).encode(),
                )
        finally:
            # A stopping worker stops its agents before its consumer leaves the group, and faust
            # sends no revocation signal while stopping: from here on nothing is processed.
            emit(worker=args.name, kind="revoked", partitions=sorted([t, p] for t, p in owned))
            owned.clear()

    def ours(tps: Any) -> list[list[Any]]:
        return sorted([tp.topic, tp.partition] for tp in tps if tp.topic == args.topic)

    @app.on_partitions_revoked.connect  # type: ignore[arg-type]
    async def on_revoked(sender: Any, revoked: Any, **kwargs: Any) -> None:
        gone = ours(revoked)
        owned.difference_update((t, p) for t, p in gone)
        emit(worker=args.name, kind="revoked", partitions=gone)

    @app.on_partitions_assigned.connect  # type: ignore[arg-type]
    async def on_assigned(sender: Any, assigned: Any, **kwargs: Any) -> None:
        got = ours(assigned)
        owned.update((t, p) for t, p in got)
        emit(worker=args.name, kind="assigned", partitions=got)

    return app


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m streamtasks.drills.faust_worker")
    parser.add_argument("--bootstrap-servers", required=True)
    add_client_config_argument(parser)
    parser.add_argument("--app-id", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--audit-topic", required=True)
    parser.add_argument("--state-dir", required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--standbys", type=int, default=1)
    parser.add_argument("--log-level", default="warning")
    args = parser.parse_args(argv)
    app = make_faust_app(args)
    emit(worker=args.name, kind="started")
    # faust's --loglevel spells two levels its own way.
    level = {"warning": "warn", "critical": "crit"}.get(args.log_level.lower(), args.log_level.lower())
    sys.argv = [sys.argv[0], "worker", "-l", level, "--without-web"]
    app.main()
    return 0


if __name__ == "__main__":
    sys.exit(main())
