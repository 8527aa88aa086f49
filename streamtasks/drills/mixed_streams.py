"""Kafka Streams' Java workers and streamtasks Apps in one KIP-1071 streams group: the word
count of ``java/streams`` (:mod:`streamtasks.drills.kafka_streams_peer`) and an App with exactly
its topology, names and serdes (:func:`word_count_app`), under a script of starts and stops.

A script is a list of steps (``("start", "java-a")``, ``("stop", "py-a")``, or several names
separated by spaces; a name starting ``py-`` is an App, any other a Java worker). Before the
first step and after each one, lines are produced with ``acks=all`` and the group must
settle: StreamsGroupDescribe shows every task of both subtopologies active on a member, one
member per running worker, the group Stable.
Each snapshot says which kind of process ran each task. At the end:

* **per-offset audit**: every line carries a token of its own (``l00042``); each acknowledged
  (partition, offset) of the input must have its token counted exactly once in the final
  changelog (``read_committed``): a token counted 0 times is a lost offset, more a duplicate;
* **counts**: every word's final count in the changelog and on the output topic equals the
  number of acknowledged lines holding it;
* **moves**: tasks ran on a Java and on a Python process in turn, and both kinds restored a
  moved counting task from the shared changelog (records > 0).

:data:`SCRIPTS` holds the drills' scripts (Java migrated to Apps one by one, and back) and
the test's (2 Java + 2 Apps, a bounce of each kind).
"""

from __future__ import annotations

import asyncio
import collections
import html
import json
import random
import re
import struct
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from streamtasks.app import App, ProcessorContext, Record
from streamtasks.app.events import AppEvent, RestoreCompleted
from streamtasks.drills.kafka_streams_peer import KafkaStreamsPeer, WordCountNames
from streamtasks.drills.ledger import offset_id, offset_runs
from streamtasks.errors import StreamTasksError
from streamtasks.protocol.streams_group import DescribedStreamsGroup
from streamtasks.runtime import group_admin
from streamtasks.runtime.admin import create_topics_async
from streamtasks.runtime.security import ClientSettings
from streamtasks.state.serdes import INT64, STRING
from topology import TopologyBuilder

__all__ = [
    "SCRIPTS",
    "MixedResult",
    "StreamsGroupNotYet",
    "describe_group",
    "latest_values",
    "produce_lines",
    "run_mixed",
    "word_count_app",
    "write_mixed_report",
]

Step = tuple[str, str]
#: The scripts: the drills' (one worker replaced at a time) and the test's.
SCRIPTS: dict[str, tuple[Step, ...]] = {
    "kafka-streams-to-streamtasks": (
        ("start", "java-a"), ("start", "java-b"),
        ("stop", "java-a"), ("start", "py-a"),
        ("stop", "java-b"), ("start", "py-b"),
    ),
    "streamtasks-to-kafka-streams": (
        ("start", "py-a"), ("start", "py-b"),
        ("stop", "py-a"), ("start", "java-a"),
        ("stop", "py-b"), ("start", "java-b"),
    ),
    "mixed-bounce": (
        ("start", "java-a py-a java-b py-b"),
        ("stop", "java-a"), ("start", "java-a"),
        ("stop", "py-a"), ("start", "py-a"),
    ),
}  # fmt: skip
_WORD = re.compile(r"\W+", re.ASCII)
_VOCABULARY = [f"w{i:02d}" for i in range(40)]


def word_count_app(names: WordCountNames, bootstrap: str, state_dir: str | Path, name: str) -> App:
    """``java/streams``' word count as a streamtasks App in the streams group
    ``names.application_id``: subtopology 0 splits lines (lower case, on ``\\W+``) into words
    sent to ``<app>-words-by-word-repartition`` keyed (and valued) by the word, String serde;
    subtopology 1 counts in the store ``word-counts`` (String keys, Long values, 8 bytes
    big-endian: Kafka's LongSerializer) and sends each new count to the output; exactly-once,
    as the Java workers. The declared topology equals Kafka Streams' (``word_count_topology``)."""
    builder = TopologyBuilder(names.application_id)
    builder.stream(names.input_topic).repartition(names.grouping).store(names.store)

    def split(ctx: ProcessorContext, record: Record) -> None:
        for word in _WORD.split((record.value or b"").decode().lower()):
            if word:
                ctx.forward(names.grouping, key=word.encode(), value=word.encode())

    def count(ctx: ProcessorContext, record: Record) -> None:
        word = (record.key or b"").decode()
        store = ctx.store(names.store)
        total = (store.get(word) or 0) + 1
        store.put(word, total)
        ctx.send(names.output_topic, key=record.key, value=struct.pack(">q", total))

    return App(
        builder.build(),
        {0: split, 1: count},
        stores={names.store: (STRING, INT64)},
        application_id=names.application_id,
        bootstrap_servers=bootstrap,
        state_dir=str(state_dir),
        client_id=name,
        group_protocol="streams",
        processing_guarantee="exactly_once_v2",
        commit_interval_ms=200,
        heartbeat_interval_ms=500,
    )


async def produce_lines(bootstrap: str, topic: str, batch: Sequence[str]) -> list[tuple[int, int]]:
    """Send ``batch`` (acks=all, idempotent); each line's acknowledged (partition, offset)."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True)
    await producer.start()
    try:
        futures = [
            await producer.send(topic, key=str(i).encode(), value=line.encode())
            for i, line in enumerate(batch)
        ]
        metas = await asyncio.gather(*futures)
    finally:
        await producer.stop()
    return [(m.partition, m.offset) for m in metas]


async def latest_values(bootstrap: str, topic: str) -> dict[str, int]:
    """Each key's last committed value (a big-endian int64), read ``read_committed``."""
    consumer = AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", isolation_level="read_committed"
    )
    await consumer.start()
    out: dict[str, int] = {}
    try:
        idle = 0
        while idle < 2:
            batch = await consumer.getmany(timeout_ms=1_000)
            idle = 0 if batch else idle + 1
            for records in batch.values():
                for r in records:
                    if r.key is not None and r.value is not None:
                        out[r.key.decode()] = struct.unpack(">q", r.value)[0]
    finally:
        await consumer.stop()
    return out


async def describe_group(bootstrap: str, group: str) -> DescribedStreamsGroup:
    """``group`` as StreamsGroupDescribe v1 shows it (:class:`StreamsGroupNotYet` while the
    cluster has it as no streams group, or not at all)."""
    try:
        found = await group_admin.describe_group(ClientSettings.of(bootstrap), group)
    except group_admin.GroupNotFound as exc:
        raise StreamsGroupNotYet(str(exc)) from None
    if not isinstance(found, DescribedStreamsGroup):
        raise StreamsGroupNotYet(f"{group!r} on {bootstrap} is not a streams group: {type(found).__name__}")
    return found


class StreamsGroupNotYet(StreamTasksError):
    """The group is not a streams group on the cluster (yet)."""


@dataclass(slots=True, kw_only=True)
class MixedResult:
    """What a mixed run saw; :attr:`ok` is the verdict."""

    drill: str
    steps: list[str] = field(default_factory=list)
    acknowledged: int = 0
    lost: list[str] = field(default_factory=list)
    duplicated: list[str] = field(default_factory=list)
    wrong_changelog: int = 0
    wrong_output: int = 0
    #: task -> the kinds of process ("java", "python") StreamsGroupDescribe showed running it.
    ran_on: dict[str, list[str]] = field(default_factory=dict)
    java_restored: int = 0
    python_restored: int = 0
    settle_s: list[float] = field(default_factory=list)
    topology_epochs: list[int] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def moved(self) -> list[str]:
        """Tasks that ran on both kinds of process."""
        return sorted(t for t, kinds in self.ran_on.items() if len(kinds) > 1)

    def rows(self) -> list[tuple[str, str, str]]:
        """``(measure, value, verdict)``, as the other drills' verdict tables."""

        def check(bad: bool) -> str:
            return "FAIL" if bad else "ok"

        return [
            ("input offsets acknowledged", f"{self.acknowledged:,}", "-"),
            ("lost offsets (token never counted)", str(len(self.lost)), check(bool(self.lost))),
            ("offsets counted twice", str(len(self.duplicated)), check(bool(self.duplicated))),
            (
                "words wrong in the changelog",
                str(self.wrong_changelog),
                check(self.wrong_changelog > 0),
            ),
            ("words wrong on the output", str(self.wrong_output), check(self.wrong_output > 0)),
            ("tasks run by Java and Python in turn", str(len(self.moved)), check(not self.moved)),
            ("changelog records restored by Java", f"{self.java_restored:,}", "-"),
            ("changelog records restored by Apps", f"{self.python_restored:,}", "-"),
            ("slowest settle after a step", f"{max(self.settle_s, default=0):.1f} s", "-"),
            ("topology epochs", str(sorted(set(self.topology_epochs))), "-"),
            *(("problem", e, "FAIL") for e in self.errors),
        ]

    @property
    def ok(self) -> bool:
        return all(v != "FAIL" for _, _, v in self.rows())

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "moved": self.moved, "ok": self.ok}


class _Workers:
    """The running Java peers and Apps, by name."""

    def __init__(self, names: WordCountNames, bootstrap: str, root: Path) -> None:
        self.names, self.bootstrap, self.root = names, bootstrap, root
        self.java: dict[str, KafkaStreamsPeer] = {}
        self.apps: dict[str, tuple[App, asyncio.Task[None]]] = {}
        self.java_restored = 0
        self.python_restored = 0
        self.errors: list[str] = []

    def _event(self, event: AppEvent) -> None:
        if isinstance(event, RestoreCompleted):
            self.python_restored += event.records

    async def start(self, name: str) -> None:
        if name.startswith("py-"):
            app = word_count_app(self.names, self.bootstrap, self.root / name, name)
            app.listeners.append(self._event)
            await app.start()
            self.apps[name] = (app, asyncio.create_task(app.run()))
        else:
            self.java[name] = await asyncio.to_thread(
                KafkaStreamsPeer.start,
                self.names,
                bootstrap=self.bootstrap,
                state_dir=self.root / name,
                name=name,
            )

    async def stop(self, name: str) -> None:
        if name in self.apps:
            app, runner = self.apps.pop(name)
            await app.stop()
            await runner
        else:
            peer = self.java.pop(name)
            if not await asyncio.to_thread(peer.stop):
                self.errors.append(f"{name} did not close cleanly: {peer.tail(3)}")
            self._collect(peer)

    def _collect(self, peer: KafkaStreamsPeer) -> None:
        self.java_restored += sum(n for _, _, n in peer.restored)
        self.errors += [f"{peer.name}: {e}" for e in peer.errors()]

    def running(self) -> set[str]:
        return {*self.apps, *(n for n, p in self.java.items() if p.process.poll() is None)}

    async def close(self) -> None:
        for name in [*self.apps, *self.java]:
            await self.stop(name)


async def _settle(
    workers: _Workers, result: MixedResult, all_tasks: frozenset[str], timeout_s: float
) -> None:
    """Wait until the group is Stable with one member per running worker and every task active;
    record which kind ran each task."""
    started = time.monotonic()
    group: DescribedStreamsGroup | None = None
    while time.monotonic() - started < timeout_s:
        try:
            group = await describe_group(workers.bootstrap, workers.names.application_id)
        except StreamTasksError:  # no coordinator loaded yet, the group not created yet
            await asyncio.sleep(0.5)
            continue
        tasks = {
            f"{t.subtopology_id}_{p}": m.client_id
            for m in group.members
            for t in m.assignment.active_tasks
            for p in t.partitions
        }
        members = len(workers.running())
        if group.group_state == "Stable" and len(group.members) == members and frozenset(tasks) == all_tasks:
            for task, client in tasks.items():
                kind = "python" if client in workers.apps else "java"
                kinds = result.ran_on.setdefault(task, [])
                if kind not in kinds:
                    kinds.append(kind)
            result.topology_epochs += [m.topology_epoch for m in group.members]
            result.settle_s.append(round(time.monotonic() - started, 1))
            return
        await asyncio.sleep(0.5)
    raise StreamTasksError(f"the group did not settle in {timeout_s:.0f} s: {group}")


async def run_mixed(
    script_name: str,
    bootstrap: str,
    *,
    say: Callable[[str], None] = lambda _: None,
    partitions: int = 4,
    lines_per_step: int = 60,
    seed: int = 36,
    settle_timeout_s: float = 90.0,
    state_root: Path | None = None,
) -> MixedResult:
    """Run ``SCRIPTS[script_name]`` against ``bootstrap`` (a cluster serving streams groups)."""
    script = SCRIPTS[script_name]
    started = time.monotonic()
    app_id = f"mixed-{random.Random().getrandbits(32):08x}"
    names = WordCountNames(
        application_id=app_id, input_topic=f"{app_id}-lines", output_topic=f"{app_id}-counts"
    )
    await create_topics_async(bootstrap, {names.input_topic: partitions, names.output_topic: partitions})
    all_tasks = frozenset(f"{s}_{p}" for s in (0, 1) for p in range(partitions))
    rng = random.Random(seed)
    result = MixedResult(drill=script_name)
    acked: dict[str, tuple[str, int, int]] = {}  # token -> (line, partition, offset)

    async def send() -> None:
        base = len(acked)
        tokens = [f"l{base + i:05d}" for i in range(lines_per_step)]
        batch = [" ".join([tok, *rng.sample(_VOCABULARY, rng.randint(1, 5))]) for tok in tokens]
        for tok, line, (part, off) in zip(
            tokens, batch, await produce_lines(bootstrap, names.input_topic, batch), strict=True
        ):
            acked[tok] = (line, part, off)

    with tempfile.TemporaryDirectory(prefix="streamtasks-mixed-") as tmp:
        workers = _Workers(names, bootstrap, state_root or Path(tmp))
        try:
            await send()
            for action, name in script:
                say(f"{action} {name}")
                act = workers.start if action == "start" else workers.stop
                await asyncio.gather(*(act(one) for one in name.split()))  # the JVMs start together
                result.steps.append(f"{action} {name}")
                await _settle(workers, result, all_tasks, settle_timeout_s)
                await send()
                say(
                    f"  settled in {result.settle_s[-1]:.1f} s: {sorted(workers.running())}, "
                    f"{len(acked)} lines acknowledged ({time.monotonic() - started:.1f} s)"
                )
            expected = collections.Counter(w for line, _, _ in acked.values() for w in set(_WORD.split(line)))
            output: dict[str, int] = {}
            deadline = time.monotonic() + settle_timeout_s
            while output != expected and time.monotonic() < deadline:
                output = await latest_values(bootstrap, names.output_topic)
            changelog = await latest_values(bootstrap, names.changelog_topic)
        finally:
            await workers.close()
    for peer_name in list(workers.java):  # pragma: no cover - close() stops them all
        workers.errors.append(f"{peer_name} still running")
    result.acknowledged = len(acked)
    result.lost = offset_runs(
        offset_id(p, o) for tok, (_, p, o) in acked.items() if changelog.get(tok, 0) == 0
    )
    result.duplicated = offset_runs(
        offset_id(p, o) for tok, (_, p, o) in acked.items() if changelog.get(tok, 0) > 1
    )
    result.wrong_changelog = sum(1 for w, n in expected.items() if changelog.get(w) != n)
    result.wrong_output = sum(1 for w, n in expected.items() if output.get(w) != n)
    result.java_restored, result.python_restored = workers.java_restored, workers.python_restored
    result.errors += workers.errors
    result.seconds = round(time.monotonic() - started, 1)
    return result


def write_mixed_report(result: MixedResult, directory: str | Path) -> Path:
    """``report.json`` and a one-table ``report.html`` in ``directory``; the HTML's path."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(json.dumps(result.to_json(), indent=2) + "\n")
    rows = "".join(
        f"<tr><td>{html.escape(a)}</td><td>{html.escape(b)}</td><td>{html.escape(c)}</td></tr>"
        for a, b, c in result.rows()
    )
    steps = "".join(f"<li>{html.escape(s)}</li>" for s in result.steps)
    verdict = "PASS" if result.ok else "FAIL"
    page = out / "report.html"
    page.write_text(
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(result.drill)}</title></head>"
        f"<body><h1>streamtasks drill {html.escape(result.drill)}: {verdict}</h1>"
        f"<table border='1'>{rows}</table><h2>steps</h2><ol>{steps}</ol></body></html>\n"
    )
    return page
