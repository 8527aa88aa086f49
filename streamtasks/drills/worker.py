"""A demo/drill worker process: one streamtasks Consumer that reports, as JSON lines on stdout,
every rebalance callback and every record id it consumed.

    python -m streamtasks.drills.worker --bootstrap-servers H:P --group G --topic T --name w1 \
        [--instance-id w1] [--assignor cooperative_sticky[,range]] [--report-offsets] \
        [--group-protocol consumer [--remote-assignor uniform]]

Under ``--group-protocol consumer`` (KIP-848) the member uses the coordinator's assignor
``--remote-assignor`` (Apache Kafka's own coordinator), or without it the ``--assignor`` names
as client-side assignors (PrepareAssignment / InstallAssignment: ``streamtasks coordinator``).

SIGTERM closes it cleanly (commit, revoke, leave unless static); the last line is ``stopped``.
SIGUSR1 calls ``enforce_rebalance`` (KIP-568).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import sys
from typing import Any

import assignors as assignor_registry
from streamtasks.drills._proc import configure_logging
from streamtasks.drills.ledger import offset_id
from streamtasks.errors import StreamTasksError
from streamtasks.runtime.client_file import add_client_config_argument, security_kwargs, settings_from_args
from streamtasks.runtime.consumer import TAKEN_BACK_METRIC, Consumer, ConsumerFailedError
from streamtasks.runtime.member_loop import monotonic_ms
from topology.ids import TopicPartition

__all__ = ["main", "make_consumer", "parse_args"]


def emit(**fields: Any) -> None:
    fields["t"] = monotonic_ms()
    sys.stdout.write(json.dumps(fields, separators=(",", ":")) + "\n")
    sys.stdout.flush()


#: The consumer metric that counts lapsed assignments taken back (classic and KIP-848).
TAKEN_BACK = TAKEN_BACK_METRIC


class Reporter:
    """Reports each rebalance callback; an assignment that is a lapsed one taken back (the
    coordinator vouched for the generation or epoch the member's session lapsed in) is
    followed by a ``taken_back`` line with the same partitions."""

    def __init__(self, name: str, consumer_ref: list[Consumer]) -> None:
        self.name = name
        self._consumer = consumer_ref
        self._taken_back = 0.0

    def _gen(self) -> int:
        return self._consumer[0].generation if self._consumer else -1

    def _report(self, kind: str, tps: tuple[TopicPartition, ...]) -> None:
        emit(
            worker=self.name,
            kind=kind,
            generation=self._gen(),
            partitions=[[t.topic, t.partition] for t in tps],
        )

    def on_partitions_assigned(self, tps: tuple[TopicPartition, ...]) -> None:
        self._report("assigned", tps)
        taken_back = self._consumer[0].metrics().get(TAKEN_BACK, 0.0) if self._consumer else 0.0
        if taken_back > self._taken_back:
            self._report("taken_back", tps)
        self._taken_back = taken_back

    def on_partitions_revoked(self, tps: tuple[TopicPartition, ...]) -> None:
        self._report("revoked", tps)

    def on_partitions_lost(self, tps: tuple[TopicPartition, ...]) -> None:
        self._report("lost", tps)


def protocol_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The Consumer settings that pick the group protocol and its assignors (module docstring)."""
    names = args.assignor.split(",")
    if args.group_protocol == "classic":
        return {"assignors": names, "lose_on_missed_generation": args.lose_on_missed_generation}
    if args.remote_assignor:
        return {"group_protocol": "consumer", "group_remote_assignor": args.remote_assignor}
    return {
        "group_protocol": "consumer",
        "partition_assignors": [assignor_registry.get_partition_assignor(n) for n in names],
    }


def make_consumer(args: argparse.Namespace, ref: list[Consumer]) -> Consumer:
    ref.clear()
    settings = settings_from_args(args.bootstrap_servers, args.client_config)
    consumer = Consumer(
        [args.topic],
        listener=Reporter(args.name, ref),
        **security_kwargs(settings),
        bootstrap_servers=settings.bootstrap_servers,
        group_id=args.group,
        group_instance_id=args.instance_id,
        session_timeout_ms=args.session_timeout_ms,
        heartbeat_interval_ms=500,
        rebalance_timeout_ms=15_000,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        take_back_positions=True,  # Reporter's on_partitions_lost only reports
        **protocol_settings(args),
    )
    ref.append(consumer)
    return consumer


async def consume(args: argparse.Namespace, consumer: Consumer, stop: asyncio.Event) -> None:
    """Consume until ``stop`` is set; a fatal group error propagates (ConsumerFailedError)."""
    waiter = asyncio.ensure_future(stop.wait())
    try:
        while not stop.is_set():
            fetch = asyncio.ensure_future(consumer.getmany(timeout_ms=200))
            await asyncio.wait({fetch, waiter}, return_when=asyncio.FIRST_COMPLETED)
            if not fetch.done():
                fetch.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await fetch
                return
            batch = fetch.result()
            if args.report_offsets:
                ids = [offset_id(r.partition, r.offset) for records in batch.values() for r in records]
            else:
                ids = [r.value.decode() for records in batch.values() for r in records]
            if ids:
                emit(worker=args.name, kind="consumed", ids=ids)
                with contextlib.suppress(StreamTasksError):
                    await consumer.commit()
    finally:
        waiter.cancel()


async def run(args: argparse.Namespace) -> None:
    """Run the consumer; after a fatal group error close it and start a fresh one, as a process
    supervisor would restart a crashed worker (reported as ``kind="restarted"``)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)
    ref: list[Consumer] = []
    # SIGUSR1: KIP-568 enforce_rebalance, used by the demo to nudge a group (docs/testing.md).
    loop.add_signal_handler(
        signal.SIGUSR1,
        lambda: emit(
            worker=args.name,
            kind="nudged",
            took=bool(ref) and ref[0].enforce_rebalance("nudged by the drill"),
        ),
    )
    while not stop.is_set():
        consumer = make_consumer(args, ref)
        await consumer.start()
        emit(worker=args.name, kind="started", member_id=consumer.member_id)
        try:
            await consume(args, consumer, stop)
        except ConsumerFailedError as exc:
            emit(worker=args.name, kind="restarted", reason=str(exc))
            await asyncio.sleep(1.0)
        finally:
            await consumer.stop()
    emit(worker=args.name, kind="stopped")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m streamtasks.drills.worker")
    parser.add_argument("--bootstrap-servers", required=True)
    add_client_config_argument(parser)
    parser.add_argument("--group", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--instance-id")
    parser.add_argument(
        "--assignor",
        default="cooperative_sticky",
        help="assignor names, comma-separated, most preferred first",
    )
    parser.add_argument("--group-protocol", choices=("classic", "consumer"), default="classic")
    parser.add_argument(
        "--remote-assignor",
        help="consumer protocol: the coordinator's assignor (uniform, range); without it the "
        "--assignor names run client-side",
    )
    parser.add_argument(
        "--report-offsets",
        action="store_true",
        help="report consumed records as <partition>:<offset> instead of their values",
    )
    parser.add_argument("--session-timeout-ms", type=int, default=6000)
    parser.add_argument(
        "--lose-on-missed-generation",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="the missed-generation rule (off on Tansu, which skips generation numbers)",
    )
    parser.add_argument("--log-level", default="WARNING")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    configure_logging(args.log_level)
    asyncio.run(run(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
