"""Interactive queries without a broker: a TaskSet on a real state directory answers (or refuses,
retryably) local reads, and two processes' HTTP servers route a key's query to its host."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from streamtasks.app.queries import StoreQueries
from streamtasks.app.query_http import QueryRouter, key_from_text
from streamtasks.errors import SerdeError, StoreUnavailableError, UnknownStoreError
from streamtasks.protocol.userdata import AssignmentInfo
from streamtasks.runtime.http_server import HttpServers
from streamtasks.state import INT64, JSON, STRING
from streamtasks.state.serdes import BYTES
from streamtasks.streams.hosts import AssignmentInfoHosts
from tests.app.test_tasks import Fixture, cl, words
from topology import TaskId, TopicPartition


class Process:
    """A TaskSet with its queries: ``stable`` and ``info`` (the assignment metadata) are set by
    the test."""

    def __init__(self, fx: Fixture, endpoint: str | None) -> None:
        self.fx = fx
        self.stable = True
        self.info = AssignmentInfo()
        self.queries = StoreQueries(
            fx.topology,
            fx.tasks,
            {"counts": (STRING, INT64)},
            hosts=AssignmentInfoHosts(lambda: self.info),
            stable=lambda: self.stable,
            endpoint=endpoint,
            end_offsets=lambda: {cl(p): 9 for p in range(4)},
        )

    def run(self, owned: Iterable[TopicPartition], *, standby: Iterable[str] = ()) -> None:
        """Reconcile, and finish every restore (as the restorer does at the changelog end)."""
        self.fx.reconcile(owned, standby=standby)
        for task in self.fx.tasks.restoring():
            task.restore.finish(now_ms=0)

    def put(self, word: str, n: int) -> None:
        """Write ``word``'s count into the local copy of its task (active or standby)."""
        task = self.fx.tasks.tasks[self.queries.task_of("counts", word)]
        task.stores["counts"].put(STRING.serialize(word), INT64.serialize(n))


@pytest.fixture
def proc(tmp_path: Path) -> Iterator[Process]:
    fx = Fixture(tmp_path)
    yield Process(fx, None)
    fx.close()


def word_of(queries: StoreQueries, task: TaskId) -> str:
    return next(w for w in (f"w{i}" for i in range(1000)) if queries.task_of("counts", w) == task)


def test_the_keys_task_is_the_default_partitioners_over_the_stores_subtopology(proc: Process) -> None:
    from streamtasks.app.sending import partition_for

    for word in ("a", "the", "fox"):
        assert proc.queries.task_of("counts", word) == TaskId(1, partition_for(word.encode(), [0, 1, 2, 3]))
    with pytest.raises(UnknownStoreError, match="no store 'nope'"):
        proc.queries.task_of("nope", "a")


def test_an_active_running_task_answers_its_keys(proc: Process) -> None:
    proc.run([words(p) for p in range(4)])
    proc.put("fox", 3)
    got = proc.queries.local("counts", "fox")
    assert (got.value, got.found, got.active, got.lag) == (3, True, True, 0)
    assert proc.queries.store("counts").get("fox") == 3
    missing = proc.queries.local("counts", "dog")
    assert (missing.value, missing.found) == (None, False)
    assert dict(proc.queries.store("counts").items()) == {"fox": 3}


def test_no_answer_while_rebalancing_restoring_elsewhere_or_standby(proc: Process) -> None:
    fox = proc.queries.task_of("counts", "fox")
    other = [p for p in range(4) if p != fox.partition]
    proc.fx.ends = {cl(fox.partition): 5}
    proc.fx.reconcile([words(fox.partition)])  # restoring: its changelog has 5 records
    with pytest.raises(StoreUnavailableError) as restoring:
        proc.queries.local("counts", "fox")
    assert restoring.value.reason == "restoring"
    assert restoring.value.retryable
    word = word_of(proc.queries, TaskId(1, other[0]))
    with pytest.raises(StoreUnavailableError, match="not-hosted"):
        proc.queries.local("counts", word)
    proc.stable = False
    with pytest.raises(StoreUnavailableError, match="rebalancing"):
        proc.queries.local("counts", "fox")


def test_a_standby_answers_only_when_allowed_with_its_lag(proc: Process) -> None:
    fox = proc.queries.task_of("counts", "fox")
    proc.run([], standby=[str(fox)])
    proc.put("fox", 2)
    with pytest.raises(StoreUnavailableError, match="not-active"):
        proc.queries.local("counts", "fox")
    got = proc.queries.local("counts", "fox", allow_standby=True)
    assert (got.value, got.active) == (2, False)
    assert got.lag == 9  # end 9, nothing applied from the changelog
    assert proc.queries.store("counts", allow_standby=True).get("fox") == 2


def test_key_text_follows_the_key_serde() -> None:
    assert key_from_text(STRING, "fox") == b"fox"
    assert key_from_text(INT64, "-2") == INT64.serialize(-2)
    assert key_from_text(JSON, '{"a": 1}') == JSON.serialize({"a": 1})
    assert key_from_text(BYTES, "raw") == b"raw"
    with pytest.raises(SerdeError, match="not a"):
        key_from_text(INT64, "fox")


async def _two_processes(a: Process, b: Process) -> dict[str, Any]:
    """``a`` runs every task but fox's, whose standby it keeps (6, behind); ``b`` runs fox's (7)."""
    servers = [HttpServers(), HttpServers()]
    routers = [QueryRouter(a.queries, timeout_s=2), QueryRouter(b.queries, timeout_s=2)]
    for router, server in zip(routers, servers, strict=True):
        router.register(server, "127.0.0.1", 0)
        await server.start()
    ends = [f"127.0.0.1:{s.port('127.0.0.1', 0)}" for s in servers]
    a.queries.endpoint, b.queries.endpoint = ends
    fox = a.queries.task_of("counts", "fox")
    others = [p for p in range(4) if p != fox.partition]
    info = AssignmentInfo(
        active_tasks_by_host={ends[0]: frozenset(TaskId(1, p) for p in others), ends[1]: frozenset({fox})},
        standby_tasks_by_host={ends[0]: frozenset({fox})},
    )
    a.info = b.info = info
    out: dict[str, Any] = {}
    try:
        routed = await routers[0].query("counts", "fox")
        out["routed"] = (routed.value, routed.host, routed.active)
        async with aiohttp.ClientSession() as session:
            async with session.get(f"http://{ends[0]}/stores/counts/fox") as resp:
                out["http"] = (resp.status, await resp.json())
            async with session.get(f"http://{ends[0]}/stores/counts/fox?local=true") as resp:
                out["http_local"] = (resp.status, (await resp.json())["reason"])
            async with session.get(f"http://{ends[0]}/stores/nope/fox") as resp:
                out["unknown"] = resp.status
        b.stable = False  # b rebalances: a standby may answer, flagged as such, else retryable
        with pytest.raises(StoreUnavailableError, match="rebalancing"):
            await routers[0].query("counts", "fox")
        standby = await routers[0].query("counts", "fox", allow_standby=True)
        out["standby"] = (standby.value, standby.active, standby.lag)
        await servers[1].stop()  # b gone: unreachable, retryable
        with pytest.raises(StoreUnavailableError) as gone:
            await routers[0].query("counts", "fox")
        out["gone"] = gone.value.reason
        a.info = AssignmentInfo()  # no metadata names fox's task
        with pytest.raises(StoreUnavailableError, match="no-host"):
            await routers[0].query("counts", "fox")
    finally:
        for router in routers:
            await router.close()
        for server in servers:
            await server.stop()
    return out


def test_two_processes_route_a_key_to_its_host_over_http(tmp_path_factory: pytest.TempPathFactory) -> None:
    fa, fb = Fixture(tmp_path_factory.mktemp("a")), Fixture(tmp_path_factory.mktemp("b"))
    a, b = Process(fa, None), Process(fb, None)
    fox = a.queries.task_of("counts", "fox")
    a.run([words(p) for p in range(4) if p != fox.partition], standby=[str(fox)])
    b.run([words(fox.partition)])
    b.put("fox", 7)
    a.put("fox", 6)
    try:
        out = asyncio.run(_two_processes(a, b))
    finally:
        fa.close()
        fb.close()
    assert out["routed"][0] == 7
    assert out["routed"][2] is True
    status, body = out["http"]
    assert status == 200
    assert body["value"] == 7
    assert body["active"] is True
    assert body["task"] != ""
    assert out["http_local"] == (503, "not-active")
    assert out["unknown"] == 404
    assert out["standby"] == (6, False, 9)
    assert out["gone"] == "unreachable"
