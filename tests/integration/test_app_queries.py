"""Interactive queries across three App processes on a real broker (Apache Kafka 4.4.0): a word
count whose every word is answered right from every process (``app.query`` and HTTP
``GET /stores/counts/{word}``), then a bounce of one process during which every answer is either
the right count or a retryable :class:`StoreUnavailableError` (never a stale count as current)."""

from __future__ import annotations

import asyncio
import collections
import socket
import time
import uuid
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiokafka import AIOKafkaProducer

from streamtasks.app import App, ProcessorContext, Record
from streamtasks.drills.coordinator_proc import CoordinatorProcess
from streamtasks.embedded import Cluster, client_settings
from streamtasks.errors import StoreUnavailableError
from streamtasks.runtime.admin import create_topics_async
from streamtasks.state.serdes import INT64, STRING
from tests.integration.streams_cluster import require_streams_groups
from topology import TopologyBuilder

pytestmark = pytest.mark.integration

WORDS = [f"w{i}" for i in range(60)]


def split(ctx: ProcessorContext, record: Record) -> None:
    for word in (record.value or b"").decode().split():
        ctx.forward("words", key=word.encode(), value=b"1")


def count(ctx: ProcessorContext, record: Record) -> None:
    word = (record.key or b"").decode()
    counts = ctx.store("counts")
    counts.put(word, (counts.get(word) or 0) + 1)


def mark(ctx: ProcessorContext, record: Record) -> None:
    """Idempotent (a replayed record changes nothing): each word's value is its number."""
    word = (record.key or b"").decode()
    ctx.store("counts").put(word, int(word[1:]))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def make_app(app_id: str, source: str, state_dir: Path, port: int, settings: dict[str, Any]) -> App:
    builder = TopologyBuilder(app_id)
    builder.stream(source).repartition("words").store("counts")
    exact = settings.get("group_protocol", "classic") in ("classic", "streams")
    return App(
        builder.build(),
        {0: split, 1: count if exact else mark},
        stores={"counts": (STRING, INT64)},
        application_id=app_id,
        state_dir=str(state_dir),
        application_server=f"127.0.0.1:{port}",
        num_standby_replicas=1,
        client_id=f"q{port}",
        session_timeout_ms=6_000,
        heartbeat_interval_ms=300,
        commit_interval_ms=300,
        # Exact counts whatever the rebalances (a loaded machine loses sessions; at-least-once
        # would then count some words twice, and "right" would have no fixed meaning).
        # (KIP-848 on streamtasks coordinator takes no transactions: there the values are the
        # idempotent ``mark``'s; a streams group on Kafka 4.4 does.)
        processing_guarantee="exactly_once_v2" if exact else "at_least_once",
        **settings,
    )


async def start_and_feed(
    apps: list[App], bootstrap: str, source: str, lines: list[str]
) -> list[asyncio.Task[None]]:
    """Start and run every App, then write ``lines`` to ``source`` (acks=all); the run tasks."""
    for app in apps:
        await app.start()
    runners = [asyncio.create_task(app.run()) for app in apps]
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    for line in lines:
        await producer.send(source, value=line.encode())
    await producer.flush()
    await producer.stop()
    return runners


async def _answers(apps: list[App], expected: dict[str, int]) -> collections.Counter[str]:
    """Ask every process for every word: ``right``, ``retryable`` (by reason) or ``wrong``."""
    tally: collections.Counter[str] = collections.Counter()
    for app in apps:
        for word, n in expected.items():
            try:
                got = await app.query("counts", word)
            except StoreUnavailableError as exc:
                tally[f"retryable:{exc.reason}"] += 1
                continue
            tally["right" if got.active and got.found and got.value == n else "wrong"] += 1
    return tally


async def _until_all_right(
    apps: list[App], expected: dict[str, int], timeout_s: float
) -> collections.Counter[str]:
    deadline = time.monotonic() + timeout_s
    tally: collections.Counter[str] = collections.Counter()
    while time.monotonic() < deadline:
        tally = await _answers(apps, expected)
        print("settling:", dict(tally), flush=True)
        if tally["right"] == len(apps) * len(expected):
            return tally
        await asyncio.sleep(0.3)
    return tally


async def _scenario(
    bootstrap: str, tmp: Path, broker_settings: dict[str, Any], group_bootstrap: str | None = None
) -> dict[str, Any]:
    if group_bootstrap is None:
        security = {"bootstrap_servers": bootstrap, **broker_settings}
    else:
        security = {"bootstrap_servers": group_bootstrap, "group_protocol": "consumer"}
    run = uuid.uuid4().hex[:8]
    app_id, source = f"iq-{run}", f"iq-lines-{run}"
    await create_topics_async(bootstrap, {source: 6})
    lines = [" ".join(WORDS[(i * 7 + j) % len(WORDS)] for j in range(i % 5 + 1)) for i in range(600)]
    expected = dict(collections.Counter(w for line in lines for w in line.split()))
    if group_bootstrap is not None:
        expected = {w: int(w[1:]) for w in expected}
    ports = [free_port() for _ in range(3)]
    apps = [make_app(app_id, source, tmp / str(p), p, security) for p in ports]
    runners = await start_and_feed(apps, bootstrap, source, lines)
    out: dict[str, Any] = {"words": len(expected), "records": len(lines)}
    started = time.monotonic()
    try:
        out["settled"] = await _until_all_right(apps, expected, 120)
        out["settle_s"] = round(time.monotonic() - started, 1)
        # The same over HTTP, from a plain client, against every process.
        http: collections.Counter[str] = collections.Counter()
        async with aiohttp.ClientSession() as session:
            for port in ports:
                for word, n in expected.items():
                    async with session.get(f"http://127.0.0.1:{port}/stores/counts/{word}") as resp:
                        body = await resp.json()
                        if resp.status == 200 and body["active"] and body["value"] == n:
                            http["right"] += 1
                        elif resp.status == 200:
                            http["wrong"] += 1  # either the process answers its key or forwards
                        else:
                            http[f"{resp.status}:{body.get('reason')}"] += 1
            async with session.get(f"http://127.0.0.1:{ports[0]}/stores/nope/x") as resp:
                out["unknown_store_status"] = resp.status
        out["http"] = http
        # A standby answers when asked, with its lag.
        standby = 0
        for app in apps:
            for task in app.tasks.standbys():
                key = next(w for w in expected if app.queries.stores.task_of("counts", w) == task.id)
                got = app.queries.stores.local("counts", key, allow_standby=True)
                standby += 1
                assert not got.active
                assert got.lag is not None
                assert got.value is None or got.value <= expected[key]
        out["standby_reads"] = standby
        # Bounce the third process: stop it (clean), start it again on its state directory,
        # asking the other two for every word all the while.
        bounce: collections.Counter[str] = collections.Counter()
        stopping = asyncio.create_task(apps[2].stop())
        while not stopping.done():
            tally = await _answers(apps[:2], expected)
            print("while stopping:", dict(tally), flush=True)
            bounce.update(tally)
            await asyncio.sleep(0.05)  # a refused query returns at once: let the apps run
        await runners[2]
        apps[2] = make_app(app_id, source, tmp / str(ports[2]), ports[2], security)
        await apps[2].start()
        runners[2] = asyncio.create_task(apps[2].run())
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            tally = await _answers(apps, expected)
            print("after the restart:", dict(tally), flush=True)
            bounce.update(tally)
            if tally["right"] == 3 * len(expected):
                break
            await asyncio.sleep(0.05)
        out["bounce"] = bounce
        out["bounce_s"] = round(time.monotonic() - started, 1)
        out["after"] = await _answers(apps, expected)
    finally:
        for app in apps:
            await app.stop()
        await asyncio.gather(*runners, return_exceptions=True)
    return out


def _check(out: dict[str, Any]) -> None:
    print({k: dict(v) if isinstance(v, collections.Counter) else v for k, v in out.items()})
    n = out["words"]
    assert out["settled"]["right"] == 3 * n, out["settled"]
    assert out["http"]["right"] == 3 * n, out["http"]
    assert out["unknown_store_status"] == 404
    assert out["standby_reads"] >= 1
    bounce = out["bounce"]
    assert bounce["wrong"] == 0, bounce
    assert bounce["right"] >= 3 * n  # the last round
    assert any(k.startswith("retryable:") for k in bounce), bounce  # the bounce was seen
    assert out["after"]["right"] == 3 * n, out["after"]


def test_every_word_answered_right_from_every_process_and_no_stale_answer_in_a_bounce(
    kafka: Cluster, tmp_path: Path
) -> None:
    _check(asyncio.run(_scenario(kafka.bootstrap_servers, tmp_path, client_settings(kafka))))


def test_the_same_over_kip848_on_streamtasks_coordinator(kafka: Cluster, tmp_path: Path) -> None:
    """``group_protocol="consumer"``: the hosts come from the client-side assignor's metadata."""

    async def run() -> dict[str, Any]:
        coordinator = CoordinatorProcess(kafka.bootstrap_servers, status_interval_s=5)
        address = await coordinator.start()
        try:
            return await _scenario(kafka.bootstrap_servers, tmp_path, {}, group_bootstrap=address)
        finally:
            await coordinator.stop()

    _check(asyncio.run(run()))


def test_the_same_in_a_streams_group_routed_by_the_brokers_endpoints(kafka: Cluster, tmp_path: Path) -> None:
    """``group_protocol="streams"`` (KIP-1071) on Apache Kafka 4.4: the hosts come from the
    heartbeat answers' endpoints-to-partitions, the members' endpoints their
    ``application_server``."""
    require_streams_groups(kafka)
    settings = {**client_settings(kafka), "group_protocol": "streams"}
    _check(asyncio.run(_scenario(kafka.bootstrap_servers, tmp_path, settings)))
