"""A peer framework running ``benchmarks/state.py``'s workload, as its own process.

    python benchmarks/_peer_app.py faust|quix --bootstrap-servers H:P --app-id A --topic T \
        --records N --partitions P --state-dir DIR [--commit-every N]

Per key a count and the latest value (two stores / tables, changelogs on), exactly the App's
``count_and_latest``. When the ``N``-th record was processed it prints one JSON line:
``{"records": N, "seconds": <first record processed → last>}`` and stops. faust runs from the
project's virtualenv; quixstreams from its own (``--quix-python``: it pins its own
confluent-kafka). Only the standard library is imported at the top, so either can run it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

_STDOUT = sys.__stdout__


class Progress:
    """Counts processed records; prints the result once when the last one is done."""

    def __init__(self, records: int) -> None:
        self.records = records
        self.done = 0
        self.first = 0.0

    def tick(self) -> bool:
        """One record processed; True for the last."""
        self.done += 1
        if self.done == 1:
            self.first = time.perf_counter()
        if self.done != self.records:
            return False
        seconds = time.perf_counter() - self.first
        assert _STDOUT is not None
        _STDOUT.write(json.dumps({"records": self.done - 1, "seconds": seconds}) + "\n")
        _STDOUT.flush()
        return True


def run_faust(args: argparse.Namespace, progress: Progress) -> None:
    import faust

    app = faust.App(
        args.app_id,
        broker=f"kafka://{args.bootstrap_servers}",
        store="rocksdb://",
        datadir=args.state_dir,
        web_enabled=False,
        topic_partitions=args.partitions,
        broker_commit_interval=5.0,
    )
    source = app.topic(
        args.topic, key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw"
    )
    counts = app.Table("counts", default=int, partitions=args.partitions, key_type=bytes, value_type=int)
    latest = app.Table("latest", default=int, partitions=args.partitions, key_type=bytes, value_type=int)

    @app.agent(source)
    async def count_and_latest(stream: Any) -> None:
        async for event in stream.events():
            counts[event.key] += 1
            latest[event.key] = int(event.value or b"0")
            progress.tick()  # the parent stops the worker once it read the result

    sys.argv = [sys.argv[0], "worker", "-l", "error", "--without-web"]
    app.main()


def run_quix(args: argparse.Namespace, progress: Progress) -> None:
    from quixstreams import Application, State

    app = Application(
        broker_address=args.bootstrap_servers,
        consumer_group=args.app_id,
        auto_offset_reset="earliest",
        state_dir=args.state_dir,
        commit_interval=5.0,
        commit_every=args.commit_every,
        processing_guarantee=args.processing_guarantee,
        use_changelog_topics=True,
        loglevel="ERROR",
    )
    topic = app.topic(args.topic, key_deserializer="bytes", value_deserializer="bytes")
    sdf = app.dataframe(topic)

    def count_and_latest(value: bytes, state: State) -> None:
        state.set("count", (state.get("count") or 0) + 1)
        state.set("latest", int(value or b"0"))
        if progress.tick():
            app.stop()

    sdf.update(count_and_latest, stateful=True)
    app.run()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("framework", choices=("faust", "quix"))
    parser.add_argument("--bootstrap-servers", required=True)
    parser.add_argument("--app-id", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--records", type=int, required=True)
    parser.add_argument("--partitions", type=int, required=True)
    parser.add_argument("--state-dir", required=True)
    parser.add_argument(
        "--commit-every", type=int, default=0, help="quix: commit every N records (0: by time)"
    )
    parser.add_argument(
        "--processing-guarantee",
        choices=("at-least-once", "exactly-once"),
        default="at-least-once",
        help="quix: its processing_guarantee",
    )
    args = parser.parse_args()
    os.makedirs(args.state_dir, exist_ok=True)
    progress = Progress(args.records)
    (run_faust if args.framework == "faust" else run_quix)(args, progress)
    return 0


if __name__ == "__main__":
    sys.exit(main())
