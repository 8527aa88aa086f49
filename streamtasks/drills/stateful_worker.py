"""A stateful drill worker: one :class:`streamtasks.App` (:mod:`streamtasks.drills.stateful_app`)
that reports every app event as a JSON line on stdout.

    python -m streamtasks.drills.stateful_worker --bootstrap-servers H:P --app-id A --topic T \
        --name w1 --state-dir DIR [--standbys 1] [--instance-id w1] [--audit-topic A] [--upgrade-from R] \
        [--emulate-release R] [--group-protocol consumer] [--processing-guarantee exactly_once_v2]

Lines: ``{"worker": "w1", "kind": "event", "event": "TaskCreated", "task": "0_3", ...}`` for each
:class:`~streamtasks.app.AppEvent`, ``{"kind": "started"}``, ``{"kind": "progress", "processed": n,
"tasks": {...}, "userdata_version": v, "fetch": {...}}`` every second (``v``: the version its next
subscription is encoded at; ``fetch``: the consumer's non-zero ``fetch-*`` counters: rewinds and
gaps), and ``{"kind": "stopped"}`` after SIGTERM (clean close). Meant to be killed with SIGKILL by
the drills too.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import time
from typing import Any

from streamtasks.app import App, AppEvent, event_to_json
from streamtasks.drills._proc import configure_logging
from streamtasks.drills.stateful_app import faust_counts_app, make_app
from streamtasks.errors import TransactionAbortedError
from streamtasks.runtime.client_file import add_client_config_argument, security_kwargs, settings_from_args
from streamtasks.runtime.consumer import ConsumerFailedError

__all__ = ["main"]


def emit(**fields: Any) -> None:
    fields["wall_ms"] = time.time_ns() // 1_000_000
    sys.stdout.write(json.dumps(fields, separators=(",", ":")) + "\n")
    sys.stdout.flush()


async def run(args: argparse.Namespace) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)

    def on_event(event: AppEvent) -> None:
        emit(worker=args.name, kind="event", **event_to_json(event))

    client = settings_from_args(args.bootstrap_servers, args.client_config)
    settings = {
        **security_kwargs(client),
        "bootstrap_servers": client.bootstrap_servers,
        "state_dir": args.state_dir,
        "num_standby_replicas": args.standbys,
        "acceptable_recovery_lag": args.acceptable_recovery_lag,
        "group_instance_id": args.instance_id,
        "session_timeout_ms": args.session_timeout_ms,
        "heartbeat_interval_ms": args.heartbeat_interval_ms,
        "rebalance_timeout_ms": 15_000,
        "commit_interval_ms": args.commit_interval_ms,
        "client_id": args.name,
        "upgrade_from": args.upgrade_from,
        "emulate_release": args.emulate_release,
        "group_protocol": args.group_protocol,
        "processing_guarantee": args.processing_guarantee,
    }
    processed = 0
    while not stop.is_set():
        build = faust_counts_app if args.faust_compatible else make_app
        app = build(args.app_id, args.topic, settings, audit_topic=args.audit_topic, on_event=on_event)
        await app.start()
        emit(worker=args.name, kind="started", member_id=app.consumer.member_id)
        reporter = loop.create_task(_progress(args.name, app, processed))
        try:
            await app.run(until=stop.is_set)
        except (ConsumerFailedError, TransactionAbortedError) as exc:
            # As a process supervisor would: a fatal group error (the embedded broker once
            # answered a first JoinGroup INCONSISTENT_GROUP_PROTOCOL), or an aborted transaction
            # under exactly-once (its tasks were closed dirty), restarts the app on the same
            # state directory.
            emit(worker=args.name, kind="restarted", reason=str(exc))
        finally:
            reporter.cancel()
            await app.stop()
            processed += app.tasks.records_processed
    emit(worker=args.name, kind="stopped", processed=processed)


async def _progress(name: str, app: App, before: int) -> None:
    while True:
        await asyncio.sleep(1.0)
        emit(
            worker=name,
            kind="progress",
            processed=before + app.tasks.records_processed,
            generation=app.consumer.generation,
            tasks={str(t): role for t, role in app.tasks.roles().items()},
            userdata_version=app.assignor.used_version,
            fetch={k: v for k, v in app.consumer.metrics().items() if k.startswith("fetch-") and v},
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m streamtasks.drills.stateful_worker")
    parser.add_argument("--bootstrap-servers", required=True)
    add_client_config_argument(parser)
    parser.add_argument("--app-id", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--state-dir", required=True)
    parser.add_argument("--standbys", type=int, default=1)
    parser.add_argument("--acceptable-recovery-lag", type=int, default=100)
    parser.add_argument("--instance-id")
    parser.add_argument("--audit-topic", help="report each processed input offset to this topic")
    parser.add_argument("--session-timeout-ms", type=int, default=6000)
    parser.add_argument("--heartbeat-interval-ms", type=int, default=500)
    parser.add_argument("--commit-interval-ms", type=int, default=500)
    parser.add_argument(
        "--upgrade-from",
        help="upgrade_from (a release, or faust): the wire of that release (drills/catalog.py)",
    )
    parser.add_argument(
        "--emulate-release",
        help="behave as that older release (its userdata version is also its latest, as leader and "
        "member; drills/catalog.py)",
    )
    parser.add_argument(
        "--faust-compatible",
        action="store_true",
        help="run faust_counts_app (the faust drill app's table, faust's formats) instead of make_app",
    )
    parser.add_argument(
        "--group-protocol",
        choices=("classic", "consumer", "streams"),
        default="classic",
        help="consumer: KIP-848, the app's assignor client-side (needs streamtasks coordinator); "
        "streams: a KIP-1071 streams group, the broker's task assignor (Apache Kafka 4.2+)",
    )
    parser.add_argument(
        "--processing-guarantee", choices=("at_least_once", "exactly_once_v2"), default="at_least_once"
    )
    parser.add_argument("--log-level", default="WARNING")
    args = parser.parse_args(argv)
    configure_logging(args.log_level)
    asyncio.run(run(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
