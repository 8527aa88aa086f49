"""Word count on streamtasks: two subtopologies, a repartition step and a counting store.

    python examples/wordcount/wordcount.py                  # embedded broker, 2 app instances
    python examples/wordcount/wordcount.py --broker tansu   # auto (default) | kafka | tansu
    python examples/wordcount/wordcount.py --bootstrap-servers host:9092
    python examples/wordcount/wordcount.py --broker kafka --group-protocol streams

The embedded broker is Apache Kafka where Java 17+ and Maven are on PATH, otherwise Tansu
(``--broker`` or ``$STREAMTASKS_BROKER`` choose; the choice is printed in one line).

Subtopology 0 reads ``text-lines`` and splits each line into words, forwarding every word to
the repartition topic ``wordcount-words-repartition`` keyed by the word, so one task sees all
occurrences of a word. Subtopology 1 counts words in the ``counts`` store (changelogged to
``wordcount-counts-changelog``) and writes each new count to ``word-counts``. The script
starts two instances of the app with one standby replica each, produces a small text, waits
until every word is counted, prints the top words and checks every count against Python's
``collections.Counter`` over the same text.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import sys
import tempfile
import time

from aiokafka import AIOKafkaProducer

from streamtasks.app import App, ProcessorContext, Record
from streamtasks.embedded import add_broker_arguments, run_on_broker
from streamtasks.runtime.admin import create_topics_async
from streamtasks.state.serdes import INT64, STRING
from topology import TopologyBuilder
from topology.model import Topology

TEXT = """\
the quick brown fox jumps over the lazy dog
a stream is a table in motion and a table is a stream at rest
tasks move between processes but their state follows them through the changelog
standby replicas keep a warm copy of the state so a crash costs seconds not minutes
"""


def topology(application_id: str = "wordcount") -> Topology:
    builder = TopologyBuilder(application_id)
    builder.stream("text-lines").repartition("words").store("counts")
    return builder.build()


def split(ctx: ProcessorContext, record: Record) -> None:
    for word in (record.value or b"").decode().lower().split():
        ctx.forward("words", key=word.encode(), value=b"1")


def count(ctx: ProcessorContext, record: Record) -> None:
    word = (record.key or b"").decode()
    counts = ctx.store("counts")
    total = (counts.get(word) or 0) + 1
    counts.put(word, total)
    ctx.send("word-counts", key=record.key, value=str(total).encode())


def make_app(bootstrap_servers: str, state_dir: str, name: str, group_protocol: str = "classic") -> App:
    """``group_protocol="streams"``: a KIP-1071 streams group (Apache Kafka 4.2+), the topology
    declared as Kafka Streams declares its word count for application id ``wordcount``
    (docs/streams-groups.md, "The word count")."""
    return App(
        topology(),
        {0: split, 1: count},
        stores={"counts": (STRING, INT64)},
        application_id="wordcount",
        bootstrap_servers=bootstrap_servers,
        state_dir=state_dir,
        num_standby_replicas=1,
        client_id=name,
        session_timeout_ms=6_000,
        heartbeat_interval_ms=500,
        commit_interval_ms=500,
        group_protocol=group_protocol,
    )


def local_counts(apps: list[App]) -> dict[str, int]:
    """Counts held by the active tasks of every app."""
    out: dict[str, int] = {}
    for app in apps:
        for task in app.tasks.tasks.values():
            if task.is_active and "counts" in task.typed:
                out.update(dict(task.typed["counts"].items()))
    return out


async def main(bootstrap_servers: str, repeat: int, timeout_s: float, group_protocol: str = "classic") -> int:
    lines = TEXT.splitlines() * repeat
    expected = collections.Counter(w for line in lines for w in line.lower().split())
    await create_topics_async(bootstrap_servers, {"text-lines": 4, "word-counts": 4})
    with tempfile.TemporaryDirectory() as state_root:
        apps = [
            make_app(bootstrap_servers, f"{state_root}/{n}", n, group_protocol)
            for n in ("instance-a", "instance-b")
        ]
        for app in apps:
            await app.start()
        runners = [asyncio.create_task(app.run()) for app in apps]
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap_servers)
        await producer.start()
        for line in lines:
            await producer.send("text-lines", key=None, value=line.encode())
        await producer.stop()
        print(f"produced {len(lines)} lines, {sum(expected.values())} words, {len(expected)} distinct")
        deadline = time.monotonic() + timeout_s
        counts: dict[str, int] = {}
        while time.monotonic() < deadline:
            counts = local_counts(apps)
            if counts == dict(expected):
                break
            await asyncio.sleep(0.5)
        for app in apps:
            await app.stop()
        for runner in runners:
            await runner
    for word, n in collections.Counter(counts).most_common(8):
        print(f"  {word:<12} {n:>5}")
    wrong = sorted(w for w in expected if counts.get(w) != expected[w])
    if wrong:
        print(f"FAILED: {len(wrong)} words with a wrong count, e.g. {wrong[:5]}")
        return 1
    print(f"OK: all {len(expected)} word counts match")
    return 0


def cli() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_broker_arguments(parser)
    parser.add_argument("--repeat", type=int, default=50, help="how many times the text is produced")
    parser.add_argument("--timeout", type=float, default=90.0)
    parser.add_argument(
        "--group-protocol",
        choices=("classic", "streams"),
        default="classic",
        help="streams: a KIP-1071 streams group (Apache Kafka 4.2+)",
    )
    args = parser.parse_args()
    return run_on_broker(args, lambda servers: main(servers, args.repeat, args.timeout, args.group_protocol))


if __name__ == "__main__":
    sys.exit(cli())
