"""A StreamTask with the record cache: write-back to store and changelog on flush, eviction and
clean close; nothing on a dirty close; restore and standby writes go around the cache."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamtasks.app.task import Role, StreamTask
from streamtasks.state import INT64, STRING, CacheBudget, CachedStore, StateDirectory
from topology import TaskId, TopicPartition, TopologyBuilder

APP = "wc"
CHANGELOG = TopicPartition("wc-counts-changelog", 0)
TASK = TaskId(0, 0)


@pytest.fixture
def directory(tmp_path: Path) -> StateDirectory:
    return StateDirectory(tmp_path, APP)


def make_task(directory: StateDirectory, budget: CacheBudget, role: Role = Role.ACTIVE) -> StreamTask:
    builder = TopologyBuilder(APP)
    builder.stream("text").store("counts")
    info = next(t for t in builder.build().tasks({"text": 1}) if t.id == TASK)
    task = StreamTask(
        info,
        role=role,
        application_id=APP,
        directory=directory,
        store_serdes={"counts": (STRING, INT64)},
        logged_stores=frozenset({"counts"}),
        cache=budget,
    )
    task.open({})
    return task


def test_updates_reach_store_and_changelog_once_per_flush(directory: StateDirectory) -> None:
    task = make_task(directory, CacheBudget(1 << 20))
    counts = task.typed["counts"]
    assert isinstance(task.caches["counts"], CachedStore)
    for _ in range(5):
        counts.put("a", (counts.get("a") or 0) + 1)
    assert task.pending == []
    assert task.stores["counts"].get(b"a") is None
    assert task.flush_caches() == 1
    assert task.take_pending() == [(CHANGELOG, b"a", INT64.serialize(5), None)]
    assert task.stores["counts"].get(b"a") == INT64.serialize(5)
    task.close(clean=True)


def test_a_clean_close_flushes_a_dirty_close_drops(directory: StateDirectory) -> None:
    budget = CacheBudget(1 << 20)
    task = make_task(directory, budget)
    task.typed["counts"].put("kept", 1)
    task.close(clean=True)
    assert budget.used == 0  # the closed task's entries gave their bytes back
    again = make_task(directory, budget)
    assert again.typed["counts"].get("kept") == 1
    again.typed["counts"].put("lost", 1)
    again.close(clean=False)
    third = make_task(directory, budget)
    assert third.stores["counts"].get(b"lost") is None
    third.close(clean=True)


def test_a_tiny_budget_writes_through_on_eviction(directory: StateDirectory) -> None:
    task = make_task(directory, CacheBudget(1))
    task.typed["counts"].put("a", 1)
    assert task.take_pending() == [(CHANGELOG, b"a", INT64.serialize(1), None)]
    task.close(clean=True)


def test_changelog_records_go_around_the_cache_and_drop_it(directory: StateDirectory) -> None:
    task = make_task(directory, CacheBudget(1 << 20))
    counts = task.typed["counts"]
    counts.put("a", 1)
    task.flush_caches()
    task.take_pending()
    task.role = Role.STANDBY  # recycled: it now applies the changelog another active writes
    task.apply_changelog(CHANGELOG, [(b"a", INT64.serialize(7))], 10)
    cache = task.caches["counts"]
    assert len(cache) == 0
    assert counts.get("a") == 7  # read through to what the changelog wrote, not the stale entry
    task.close(clean=True)
