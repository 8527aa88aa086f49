"""Row 5 of ``benchmarks/state.py``: streamtasks and its Python peers on one workload and broker.

Each contender processes the same ``--records`` records over ``--keys`` keys on ``--partitions``
partitions with a per-key count and a per-key latest value (two changelogged stores), on a topic
of its own produced the same way, in interleaved rounds (one of each per round):

* ``streamtasks App, cached``: the record cache at its default (10 MiB, commit every 5 s);
* ``streamtasks App, uncached``: ``statestore.cache.max.bytes=0``, every update written;
* ``faust-streaming``: two ``Table``\\ s on rocksdb (``_peer_app.py faust``), every update written;
* ``quixstreams``, when ``--quix-python`` names a Python with it installed: its defaults (commit
  every 5 s, state written per commit), and ``commit_every=2000`` (nearly every update written).

Row 7 (``exactly_once=True``): the App at-least-once and ``exactly_once_v2`` (both cached, commit
every 5 s), and quixstreams at-least-once and ``processing_guarantee="exactly-once"`` (its
defaults otherwise, commit every 5 s), the same way.

The rate is records over the span from the first record processed to the last, measured inside
each process. The changelog records each wrote are the end offsets of its changelog topics
summed after it stopped (what reached the broker), so rows that merge updates say so.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _paths import project_imports

with project_imports():
    from aiokafka import AIOKafkaConsumer

    from streamtasks.app import App, ProcessorContext, Record
    from streamtasks.drills.offset_audit import OffsetAudit
    from streamtasks.drills.stateful_app import count_and_latest, keyed_topology
    from streamtasks.runtime.admin import TopicSpec, create_topics_async
    from streamtasks.state.serdes import INT64, STRING

__all__ = ["PeerResults", "Workload", "contenders", "peer_rows", "peer_round"]

HERE = Path(__file__).resolve().parent
Row = tuple[str, str, str, str]
STORES = ("counts", "latest")


@dataclass(slots=True, kw_only=True)
class PeerResults:
    """Per contender: records/s and changelog records written, one entry per round."""

    rates: dict[str, list[float]] = field(default_factory=dict)
    written: dict[str, list[int]] = field(default_factory=dict)

    def add(self, name: str, rate: float, written: int) -> None:
        self.rates.setdefault(name, []).append(rate)
        self.written.setdefault(name, []).append(written)


def contenders(quix_python: str | None, *, exactly_once: bool = False) -> list[str]:
    if exactly_once:
        names = ["streamtasks App, at-least-once", "streamtasks App, exactly-once"]
        return names + (["quixstreams, at-least-once", "quixstreams, exactly-once"] if quix_python else [])
    names = ["streamtasks App, cached", "streamtasks App, uncached", "faust-streaming"]
    if quix_python:
        names += ["quixstreams, defaults", "quixstreams, commit every 2000"]
    return names


async def _changelog_records(bootstrap: str, marker: str, partitions: int) -> int:
    """The records in every topic whose name holds ``marker`` and 'changelog', counted by
    reading them until three seconds pass without one. Not from the end offsets: Tansu answers
    ListOffsets(latest) with the last batch's base offset + 1 (docs/testing.md), which made
    its rows short by about one batch per partition."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest")
    await consumer.start()
    try:
        from aiokafka.structs import TopicPartition as AioTP

        topics = [t for t in await consumer.topics() if marker in t and "changelog" in t]
        tps = [AioTP(t, p) for t in topics for p in range(partitions)]  # changelogs: as the input
        if not tps:
            return 0
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        count, idle = 0, 0
        while idle < 3:  # three empty seconds in a row: the first fetches can be slow to start
            batch = await consumer.getmany(timeout_ms=1000, max_records=50_000)
            count += sum(len(records) for records in batch.values())
            idle = 0 if batch else idle + 1
        return count
    finally:
        await consumer.stop()


@dataclass(frozen=True, slots=True, kw_only=True)
class Workload:
    """The shared workload, and the two helpers of ``state.py`` every contender's run uses."""

    bootstrap: str
    root: Path
    records: int
    keys: int
    partitions: int
    #: ``state.produce(bootstrap, topic, records, keys, audit)``: the same input for everyone.
    produce: Callable[..., Awaitable[None]]
    #: ``state.run_until(app, cond, what)``.
    run_until: Callable[..., Awaitable[None]]


async def _input(w: Workload, app_id: str) -> str:
    topic = f"{app_id}-input"
    # Kafka's defaults, spelled out: quixstreams reads retention.ms and retention.bytes from
    # DescribeConfigs, and Tansu reports only the configs a topic was created with.
    retention = {"retention.ms": "604800000", "retention.bytes": "-1"}
    spec = TopicSpec(name=topic, partitions=w.partitions, configs=retention)
    await create_topics_async(w.bootstrap, [spec])
    await w.produce(w.bootstrap, topic, w.records, w.keys, OffsetAudit())
    return topic


async def _streamtasks(
    w: Workload, cache_max_bytes: int | None, guarantee: str = "at_least_once"
) -> tuple[float, int]:
    records = w.records
    app_id = f"peer-st-{uuid.uuid4().hex[:6]}"
    topic = await _input(w, app_id)
    settings: dict[str, Any] = {
        "bootstrap_servers": w.bootstrap,
        "state_dir": str(w.root),
        "processing_guarantee": guarantee,
    }
    if cache_max_bytes is not None:
        settings["cache_max_bytes"] = cache_max_bytes
    times: list[float] = []

    def timed(ctx: ProcessorContext, record: Record) -> None:  # as the peers time themselves
        count_and_latest(ctx, record)
        times.append(time.perf_counter())

    app = App(
        keyed_topology(app_id, topic),
        {0: timed},
        config=settings,
        stores={"counts": (STRING, INT64), "latest": (STRING, INT64)},
        application_id=app_id,
    )
    async with app:
        await w.run_until(app, lambda: app.tasks.records_processed >= records, "records processed")
    rate = (len(times) - 1) / (times[-1] - times[0])
    return rate, await _changelog_records(w.bootstrap, app_id, w.partitions)


async def _peer(
    w: Workload, python: str, framework: str, commit_every: int = 0, guarantee: str = "at-least-once"
) -> tuple[float, int]:
    records = w.records
    app_id = f"peer-{framework}-{uuid.uuid4().hex[:6]}"
    topic = await _input(w, app_id)
    if framework == "faust":  # created ahead: faust refuses a changelog it sees 0 partitions of
        compact = {"cleanup.policy": "compact"}
        tables = [
            TopicSpec(name=f"{app_id}-{t}-changelog", partitions=w.partitions, configs=compact)
            for t in STORES
        ]
        await create_topics_async(w.bootstrap, tables)
    argv = [
        python, "-P", str(HERE / "_peer_app.py"), framework, "--bootstrap-servers", w.bootstrap,
        "--app-id", app_id, "--topic", topic, "--records", str(records), "--partitions", str(w.partitions),
        "--state-dir", str(w.root / app_id), "--commit-every", str(commit_every),
        "--processing-guarantee", guarantee,
    ]  # fmt: skip
    log = w.root / f"{app_id}.log"
    with log.open("wb") as err:  # the child keeps its own descriptor
        proc = await asyncio.create_subprocess_exec(
            *argv, stdout=subprocess.PIPE, stderr=err, env={**os.environ, "PYTHONPATH": ""}
        )
    assert proc.stdout is not None
    result: dict[str, Any] | None = None
    try:
        async with asyncio.timeout(600):
            while result is None:
                line = await proc.stdout.readline()
                if not line:
                    break
                if line.startswith(b"{"):
                    result = json.loads(line)
    finally:
        await asyncio.sleep(3)  # let it hand its last changelog records to the broker
        if proc.returncode is None:
            proc.terminate()
        try:
            await asyncio.wait_for(proc.wait(), 30)
        except TimeoutError:
            proc.kill()
            await proc.wait()
    if result is None:
        tail = log.read_text(errors="replace")[-3000:]
        what = f"{framework} stopped before processing {records:,} records"
        raise RuntimeError(f"{what}; its log ({log}) ends:\n{tail}")
    return result["records"] / result["seconds"], await _changelog_records(w.bootstrap, app_id, w.partitions)


async def peer_round(
    results: PeerResults,
    w: Workload,
    *,
    quix_python: str | None,
    step: Callable[[str], None],
    exactly_once: bool = False,
) -> None:
    """One round: every contender once, in :func:`contenders` order."""
    for name in contenders(quix_python, exactly_once=exactly_once):
        step(f"{7 if exactly_once else 5}: {name} ...")
        if exactly_once and name.startswith("streamtasks"):
            guarantee = "exactly_once_v2" if name.endswith("exactly-once") else "at_least_once"
            rate, written = await _streamtasks(w, None, guarantee)
        elif exactly_once:
            assert quix_python is not None
            rate, written = await _peer(w, quix_python, "quix", 0, name.removeprefix("quixstreams, "))
        elif name.startswith("streamtasks"):
            cache = None if name.endswith(", cached") else 0
            rate, written = await _streamtasks(w, cache)
        elif name == "faust-streaming":
            rate, written = await _peer(w, sys.executable, "faust")
        else:
            assert quix_python is not None
            rate, written = await _peer(w, quix_python, "quix", 2000 if name.endswith("2000") else 0)
        step(f"   {rate:,.0f} records/s, {written:,} changelog records")
        results.add(name, rate, written)


def peer_rows(results: PeerResults, spread: Callable[[list[float], str], str], label: str = "5") -> list[Row]:
    """Table rows: rate (median, range), changelog records written, and the ratios of the
    streamtasks rows to each peer's median."""
    import statistics

    med = {name: statistics.median(rates) for name, rates in results.rates.items()}
    rows: list[Row] = []
    for name, rates in results.rates.items():
        written = ", ".join(f"{n:,}" for n in results.written[name])
        detail = f"changelog records written: {written}"
        if name.startswith("streamtasks"):
            ratios = [
                f"{med[name] / med[p]:.2f}x {p}" for p in med if not p.startswith("streamtasks") and med[p]
            ]
            detail += ("; " + ", ".join(ratios)) if ratios else ""
        rows.append((label, name, spread(rates, "{:,.0f}"), detail))
    return rows
