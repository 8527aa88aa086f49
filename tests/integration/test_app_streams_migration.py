"""Migrating an App from the classic protocol to a streams group (KIP-1071) on Apache Kafka 4.4.0,
the way the broker allows it: **offline**. Apache Kafka's group coordinator turns a classic group
into a streams group only when the classic group is empty (``getOrCreateStreamsGroup`` deletes
an empty classic group and makes a streams group of the same id; a classic group with members
answers the streams heartbeat ``GROUP_ID_NOT_FOUND``, "Group ... is not a streams group"). There
is no online, member-by-member conversion as KIP-848 has for consumer groups.

The word count (exactly-once) runs in two classic App processes; every input line carries a
word of its own (``o<i>``) besides shared words (``w<k>``), so the final store is a per-offset
audit: every ``o<i>`` counted once (0: lost, 2: processed twice) and every ``w<k>`` right. The
classic processes stop (they leave: the group is empty), lines are produced while nothing runs,
two streams-group processes start on the same state directories with the same application id,
more lines are produced; the committed offsets carry over (nothing is processed again), the
changelogs and the repartition topic are the same topics (nothing is restored from scratch).
Then back, the same way (Kafka's offline downgrade: a classic JoinGroup deletes an *empty*
streams group; one with members answers INCONSISTENT_GROUP_PROTOCOL): the streams processes
stop, lines are produced, classic processes start on the same directories. The audit reads the
changelog (read_committed) at the end. A streams
member started while a classic member is still in the group fails at once with a typed error
that says so (no retry storm, no hang)."""

from __future__ import annotations

import asyncio
import collections
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer

from streamtasks.app import App
from streamtasks.app.events import RestoreCompleted
from streamtasks.embedded import Cluster, client_settings
from streamtasks.errors import StreamTasksError
from streamtasks.runtime.admin import create_topics_async
from streamtasks.runtime.group_admin import describe_group
from streamtasks.runtime.group_offsets import fetch_committed
from streamtasks.state.serdes import INT64, STRING
from tests.integration.streams_cluster import require_streams_groups
from tests.integration.test_app_errors import read_all
from tests.integration.test_app_queries import count, split
from topology import TopologyBuilder
from topology.ids import TopicPartition

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PARTITIONS = 4
SHARED = [f"w{k}" for k in range(20)]


def make_app(
    app_id: str,
    source: str,
    state_dir: Path,
    protocol: str,
    settings: dict[str, Any],
    *,
    guarantee: str = "exactly_once_v2",
) -> App:
    builder = TopologyBuilder(app_id)
    builder.stream(source).repartition("words").store("counts")
    return App(
        builder.build(),
        {0: split, 1: count},
        stores={"counts": (STRING, INT64)},
        application_id=app_id,
        state_dir=str(state_dir),
        group_protocol=protocol,
        client_id=f"{protocol}-{state_dir.name}",
        session_timeout_ms=10_000,
        heartbeat_interval_ms=500,
        commit_interval_ms=300,
        processing_guarantee=guarantee,
        **settings,
    )


def line(i: int) -> str:
    return " ".join([f"o{i}", *(SHARED[(i * 7 + j) % len(SHARED)] for j in range(i % 4 + 1))])


async def produce(bootstrap: str, source: str, first: int, n: int) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        for i in range(first, first + n):
            await producer.send(source, key=str(i).encode(), value=line(i).encode())
        await producer.flush()
    finally:
        await producer.stop()


async def changelog_counts(bootstrap: str, topic: str, partitions: int) -> dict[str, int]:
    """The latest committed value of every key of the store's changelog."""
    latest: dict[str, int] = {}
    for rec in await read_all(bootstrap, topic, partitions, "read_committed"):
        if rec.key is not None and rec.value is not None:
            latest[STRING.deserialize(rec.key)] = INT64.deserialize(rec.value)
    return latest


async def settle(
    app: App, source: str, n: int, timeout_s: float = 120, partitions: int = PARTITIONS
) -> dict[TopicPartition, int]:
    """Until every line is processed through both subtopologies: the group's committed offsets
    on ``source`` add up to ``n`` and the changelog has counted the own word of each line."""
    settings = app.config.client_settings()
    app_id = app.config.application_id
    deadline = time.monotonic() + timeout_s
    done, missing = -1, -1
    while time.monotonic() < deadline:
        committed = await fetch_committed(settings, app_id)
        done = sum(off for tp, off in committed.items() if tp.topic == source)
        if done >= n:
            counts = await changelog_counts(
                app.config.bootstrap_servers, f"{app_id}-counts-changelog", partitions
            )
            missing = sum(1 for i in range(n) if f"o{i}" not in counts)
            if missing == 0:
                return committed
        await asyncio.sleep(0.5)
    raise AssertionError(
        f"{done} of {n} source offsets committed, {missing} lines not counted, in {timeout_s} s"
    )


async def start(apps: list[App]) -> list[asyncio.Task[None]]:
    for app in apps:
        await app.start()
    return [asyncio.create_task(app.run()) for app in apps]


async def stop(apps: list[App], runners: list[asyncio.Task[None]]) -> None:
    for app in apps:
        await app.stop()
    await asyncio.gather(*runners, return_exceptions=True)


async def migrate(bootstrap: str, tmp: Path, settings: dict[str, Any]) -> dict[str, Any]:
    run = uuid.uuid4().hex[:8]
    app_id, source = f"mig-{run}", f"mig-lines-{run}"
    await create_topics_async(bootstrap, {source: PARTITIONS})
    dirs = [tmp / "a", tmp / "b"]
    out: dict[str, Any] = {}
    n1, n_down, n2 = 400, 200, 400
    # 1. The classic App: two processes, exactly-once.
    classic = [make_app(app_id, source, d, "classic", settings) for d in dirs]
    runners = await start(classic)
    try:
        await produce(bootstrap, source, 0, n1)
        before = await settle(classic[0], source, n1)
    finally:
        await stop(classic, runners)
    out["classic_committed"] = sum(off for tp, off in before.items() if tp.topic == source)
    described = await describe_group(classic[0].config.client_settings(), app_id)
    out["classic_state_after_stop"] = getattr(described, "group_state", None)
    # 2. Lines produced while nothing runs.
    await produce(bootstrap, source, n1, n_down)
    # 3. The streams group: the same application id and state directories.
    streams = [make_app(app_id, source, d, "streams", settings) for d in dirs]
    started = time.monotonic()
    runners = await start(streams)
    try:
        await settle(streams[0], source, n1 + n_down)
        out["catch_up_s"] = round(time.monotonic() - started, 1)
        await produce(bootstrap, source, n1 + n_down, n2)
        await settle(streams[0], source, n1 + n_down + n2)
        described = await describe_group(streams[0].config.client_settings(), app_id)
        out["group_type_after"] = type(described).__name__
        # Restores on the streams side: only what the local state directories miss.
        restores = [e for a in streams for e in a.events if isinstance(e, RestoreCompleted)]
        out["restores"] = (len(restores), sum(e.records for e in restores))
    finally:
        await stop(streams, runners)
    # 4. And back (the rollback): the empty streams group is taken by a classic join.
    n_back = 200
    await produce(bootstrap, source, n1 + n_down + n2, n_back)
    back = [make_app(app_id, source, d, "classic", settings) for d in dirs]
    runners = await start(back)
    try:
        await settle(back[0], source, n1 + n_down + n2 + n_back)
        described = await describe_group(back[0].config.client_settings(), app_id)
        out["group_type_back"] = type(described).__name__
    finally:
        await stop(back, runners)
    counts = await changelog_counts(bootstrap, f"{app_id}-counts-changelog", PARTITIONS)
    total = n1 + n_down + n2 + n_back
    own = collections.Counter(counts.get(f"o{i}", 0) for i in range(total))
    expected = collections.Counter(w for i in range(total) for w in line(i).split() if w.startswith("w"))
    out["lines"] = total
    out["own_words"] = dict(own)  # {1: total}: every offset counted once
    out["shared_wrong"] = {w: (counts.get(w), n) for w, n in expected.items() if counts.get(w) != n}
    return out


@pytest.fixture(scope="module")
def streams_kafka(kafka: Cluster) -> Cluster:
    return require_streams_groups(kafka)


def test_an_emptied_classic_app_group_becomes_a_streams_group_with_nothing_lost_or_counted_twice(
    streams_kafka: Cluster, tmp_path: Path
) -> None:
    bootstrap = streams_kafka.bootstrap_servers
    settings = {"bootstrap_servers": bootstrap, **client_settings(streams_kafka)}
    out = asyncio.run(migrate(bootstrap, tmp_path, settings))
    print(out)
    assert out["classic_state_after_stop"] == "Empty", out
    assert out["group_type_after"] == "DescribedStreamsGroup", out
    assert out["group_type_back"] == "DescribeGroupResponse", out  # a classic group again
    assert out["own_words"] == {1: out["lines"]}, out
    assert out["shared_wrong"] == {}, out


#: An App of the test's word count: (application id, source topic, state directory, protocol).
MakeApp = Callable[[str, str, Path, str], App]


async def too_early(bootstrap: str, tmp: Path, make: MakeApp) -> tuple[float, BaseException | None]:
    """A streams member joins while a classic member still runs: how long until it fails, and
    how (``bootstrap``: the cluster the lines go to; ``make`` builds the Apps)."""
    run = uuid.uuid4().hex[:8]
    app_id, source = f"early-{run}", f"early-lines-{run}"
    await create_topics_async(bootstrap, {source: 2})
    classic = [make(app_id, source, tmp / "c", "classic")]
    runners = await start(classic)
    try:
        await produce(bootstrap, source, 0, 10)
        await settle(classic[0], source, 10, partitions=2)
        streams = make(app_id, source, tmp / "s", "streams")
        started = time.monotonic()
        error: BaseException | None = None
        try:
            await streams.start()
            await asyncio.wait_for(streams.run(), 30)
        except (StreamTasksError, TimeoutError) as exc:
            error = exc
        finally:
            await streams.stop()
        return time.monotonic() - started, error
    finally:
        await stop(classic, runners)


def test_a_streams_member_while_the_classic_group_has_members_fails_at_once_saying_why(
    streams_kafka: Cluster, tmp_path: Path
) -> None:
    bootstrap = streams_kafka.bootstrap_servers
    settings = {"bootstrap_servers": bootstrap, **client_settings(streams_kafka)}
    took, error = asyncio.run(
        too_early(bootstrap, tmp_path, lambda app_id, source, d, p: make_app(app_id, source, d, p, settings))
    )
    print(f"{took:.1f} s: {error!r}")
    assert isinstance(error, StreamTasksError), error
    assert "is not a streams group" in str(error)  # the broker's message
    assert "only an empty classic group" in str(error)  # what to do about it
    assert took < 15, took  # the first heartbeat's answer: no retries, no hang
