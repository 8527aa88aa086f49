"""Migrating an App from the classic protocol to a streams group and back on ``streamtasks
coordinator`` (in front of the embedded cluster), offline as Apache Kafka allows it
(``coordinator/kinds.py``): the classic group, once its members all left, becomes a streams
group at the first streams heartbeat, and the emptied streams group a classic group again at the
first JoinGroup; the committed offsets stay in the coordinator's offset store under the id.
The coordinator is killed with -9 and restarted on its port after each conversion: the log
replays to the converted group.

The App runs **at-least-once** here; an exactly-once App starts on the coordinator too (the
last test: the server serves TxnOffsetCommit, docs/coordinator.md "Exactly-once"). The word count of
``tests/integration/test_app_streams_migration.py``: every line carries a word of its own, so
the final changelog is a per-offset audit: every acknowledged input offset counted at least
once (0 = lost); counted more than once is allowed at-least-once and reported."""

from __future__ import annotations

import asyncio
import collections
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from streamtasks.app import App
from streamtasks.embedded import Cluster
from streamtasks.errors import StreamTasksError
from streamtasks.runtime.admin import create_topics_async
from tests.integration.test_app_streams_migration import (
    changelog_counts,
    line,
    produce,
    settle,
    start,
    stop,
    too_early,
)
from tests.integration.test_app_streams_migration import make_app as make_app_on
from tests.server.support import FAST, ServerProcess, status_count

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PARTITIONS = 4
SERVER_ARGS = (*FAST, "--streams-task-offset-interval-ms", "1000", "--streams-assignor", "sticky")


def make_app(
    app_id: str,
    source: str,
    state_dir: Path,
    protocol: str,
    bootstrap: str,
    *,
    guarantee: str = "at_least_once",
) -> App:
    """The word count of the Apache Kafka audit, bootstrapped to the coordinator."""
    return make_app_on(
        app_id, source, state_dir, protocol, {"bootstrap_servers": bootstrap}, guarantee=guarantee
    )


async def _status(server: ServerProcess, since: int = 0, **want: int) -> dict[str, int]:
    """The status line's counters once they read ``want`` (the line comes every second), from
    the process running now (a status line written after its start)."""
    deadline = time.monotonic() + 15
    seen: dict[str, int] = {}
    while time.monotonic() < deadline:
        seen = {k: status_count(server, k) for k in ("groups", "members", "streams_groups", "conversions")}
        ours = any(x.startswith("status:") for x in server.lines[since:])
        if ours and all(seen[k] == v for k, v in want.items()):
            break
        await asyncio.sleep(0.5)
    return seen


async def _restart(server: ServerProcess) -> tuple[str, int]:
    """kill -9 and a new process on the same port: its line saying what it replayed, and where
    its lines start in ``server.lines``."""
    await asyncio.to_thread(server.kill)
    since = len(server.lines)
    await asyncio.to_thread(server.start)
    return next(x for x in reversed(server.lines) if "replayed" in x), since


async def migrate(kafka: str, server: ServerProcess, tmp: Path) -> dict[str, Any]:
    run = uuid.uuid4().hex[:8]
    app_id, source = f"cmig-{run}", f"cmig-lines-{run}"
    await create_topics_async(kafka, {source: PARTITIONS})
    coord = server.address
    dirs = [tmp / "a", tmp / "b"]
    out: dict[str, Any] = {}
    sizes = [400, 200, 300, 300, 200]  # classic, down, streams, streams after the restart, down
    ends = [sum(sizes[: i + 1]) for i in range(len(sizes))]
    # 1. The classic App on the coordinator: two processes.
    classic = [make_app(app_id, source, d, "classic", coord) for d in dirs]
    runners = await start(classic)
    try:
        await produce(kafka, source, 0, sizes[0])
        await settle(classic[0], source, ends[0])
    finally:
        await stop(classic, runners)
    out["classic_stopped"] = await _status(server, groups=1, members=0)
    # 2. Lines produced while nothing runs; 3. the streams group on the same state directories.
    await produce(kafka, source, ends[0], sizes[1])
    streams = [make_app(app_id, source, d, "streams", coord) for d in dirs]
    started = time.monotonic()
    runners = await start(streams)
    try:
        await settle(streams[0], source, ends[1])
        out["catch_up_s"] = round(time.monotonic() - started, 1)
        out["converted"] = await _status(server, groups=0, streams_groups=1, conversions=1)
        await produce(kafka, source, ends[1], sizes[2])
        await settle(streams[0], source, ends[2])
        # 4. kill -9 of the coordinator: the new process replays the conversion
        out["replayed_streams"], since = await _restart(server)
        await produce(kafka, source, ends[2], sizes[3])
        await settle(streams[0], source, ends[3])
        out["after_restart"] = await _status(server, since, groups=0, streams_groups=1)
    finally:
        await stop(streams, runners)
    # 5. And back: the emptied streams group is taken by a classic join.
    await produce(kafka, source, ends[3], sizes[4])
    back = [make_app(app_id, source, d, "classic", coord) for d in dirs]
    runners = await start(back)
    try:
        await settle(back[0], source, ends[4])
        out["back"] = await _status(server, groups=1, streams_groups=0, conversions=1)
        out["replayed_back"], since = await _restart(server)
        out["back_after_restart"] = await _status(server, since, groups=1, members=2)
    finally:
        await stop(back, runners)
    counts = await changelog_counts(kafka, f"{app_id}-counts-changelog", PARTITIONS)
    total = ends[-1]
    own = collections.Counter(counts.get(f"o{i}", 0) for i in range(total))
    expected = collections.Counter(w for i in range(total) for w in line(i).split() if w.startswith("w"))
    out["lines"] = total
    out["own_words"] = dict(own)  # {1: total} when nothing was processed twice
    out["shared_short"] = {w: (counts.get(w), n) for w, n in expected.items() if (counts.get(w) or 0) < n}
    return out


def test_an_app_moves_from_classic_to_a_streams_group_and_back_on_the_coordinator_with_nothing_lost(
    kafka: Cluster, tmp_path: Path
) -> None:
    server = ServerProcess(kafka.bootstrap_servers, extra=SERVER_ARGS).start()
    try:
        out = asyncio.run(migrate(kafka.bootstrap_servers, server, tmp_path))
    finally:
        server.stop()
    print(out)
    assert out["classic_stopped"]["members"] == 0, out
    assert out["converted"] == {"groups": 0, "members": 0, "streams_groups": 1, "conversions": 1}, out
    assert "(0 groups, 1 streams groups" in out["replayed_streams"], out
    assert out["after_restart"] == {"groups": 0, "members": 0, "streams_groups": 1, "conversions": 0}, out
    assert out["back"]["groups"] == 1, out
    assert out["back"]["streams_groups"] == 0, out
    assert "(1 groups, 0 streams groups" in out["replayed_back"], out
    assert out["back_after_restart"] == {"groups": 1, "members": 2, "streams_groups": 0, "conversions": 0}, (
        out
    )
    assert 0 not in out["own_words"], out  # every acknowledged input offset processed
    assert sum(out["own_words"].values()) == out["lines"], out
    assert out["shared_short"] == {}, out


def test_a_streams_app_beside_a_running_classic_app_fails_at_once_saying_why(
    kafka: Cluster, tmp_path: Path
) -> None:
    server = ServerProcess(kafka.bootstrap_servers, extra=SERVER_ARGS).start()
    try:
        took, error = asyncio.run(
            too_early(
                kafka.bootstrap_servers,
                tmp_path,
                lambda app_id, source, d, p: make_app(app_id, source, d, p, server.address),
            )
        )
    finally:
        server.stop()
    print(f"{took:.1f} s: {error!r}")
    assert isinstance(error, StreamTasksError), error
    assert "is not a streams group" in str(error)
    assert "still has 1 member(s)" in str(error)  # the coordinator's message: who holds the id
    assert took < 15, took


async def exactly_once_start(kafka: str, coord: str, tmp: Path) -> tuple[float, BaseException | None]:
    run = uuid.uuid4().hex[:8]
    source = f"ceos-lines-{run}"
    await create_topics_async(kafka, {source: 2})
    app = make_app(f"ceos-{run}", source, tmp / "e", "streams", coord, guarantee="exactly_once_v2")
    started = time.monotonic()
    try:
        await app.start()
    except StreamTasksError as exc:
        return time.monotonic() - started, exc
    await app.stop()
    return time.monotonic() - started, None


def test_an_exactly_once_app_starts_on_the_coordinator_that_serves_transactional_commits(
    kafka: Cluster, tmp_path: Path
) -> None:
    server = ServerProcess(kafka.bootstrap_servers, extra=SERVER_ARGS).start()
    try:
        took, error = asyncio.run(exactly_once_start(kafka.bootstrap_servers, server.address, tmp_path))
    finally:
        server.stop()
    print(f"{took:.1f} s: {error!r}")
    assert error is None, error  # require_transactional_commits found TxnOffsetCommit v3+ advertised
