"""A StreamTask with a window store: writes reach the changelog in Kafka's windowed key layout,
and a task restored from those records (the App's changelog path) holds the same live windows,
without the expired ones."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamtasks.app.context import ProcessorContext
from streamtasks.app.task import Role, StreamTask
from streamtasks.errors import UnknownStoreError
from streamtasks.state import INT64, STRING, CacheBudget, StateDirectory, window_key
from topology import TaskId, TopicPartition, TopologyBuilder

APP = "clicks"
CHANGELOG = TopicPartition("clicks-counts-changelog", 0)
TASK = TaskId(0, 0)
MINUTE = 60_000


def make_task(directory: StateDirectory, *, cache: int = 0, role: Role = Role.ACTIVE) -> StreamTask:
    builder = TopologyBuilder(APP)
    builder.stream("clicks").window_store("counts", size_ms=MINUTE, retention_ms=5 * MINUTE)
    info = next(t for t in builder.build().tasks({"clicks": 1}) if t.id == TASK)
    task = StreamTask(
        info,
        role=role,
        application_id=APP,
        directory=directory,
        store_serdes={"counts": (STRING, INT64)},
        logged_stores=frozenset({"counts"}),
        cache=CacheBudget(cache),
    )
    task.open({})
    return task


@pytest.mark.parametrize("cache", [0, 1 << 20])
def test_window_writes_are_changelogged_and_restored(tmp_path: Path, cache: int) -> None:
    active = make_task(StateDirectory(tmp_path / "a", APP), cache=cache)
    counts = active.windows["counts"]
    assert "counts" not in active.typed  # a window store is not a key-value store
    for minute in range(12):
        active.record_timestamp = minute * MINUTE + 5
        for _ in range(minute % 3 + 1):
            counts.put("user-1", (counts.get("user-1", minute * MINUTE) or 0) + 1, minute * MINUTE)
    active.flush_caches()
    pending = active.take_pending()
    assert all(tp == CHANGELOG for tp, *_ in pending)
    # the changelog key is Kafka's store key: user, window start (int64), seqnum 0 (int32)
    assert (pending[-1][1], pending[-1][2], pending[-1][3]) == (
        window_key(b"user-1", 11 * MINUTE),
        INT64.serialize(12 % 3 or 3),
        11 * MINUTE + 5,
    )
    live = list(counts.fetch("user-1", 0, 10**9))
    assert [start // MINUTE for start, _ in live] == [7, 8, 9, 10, 11]  # retention: 5 minutes
    active.close(clean=True)

    # a new task elsewhere restores from the changelog records (what ChangelogReader hands it)
    restored = make_task(StateDirectory(tmp_path / "b", APP), cache=cache)
    rows = [(key, value) for _, key, value, _ in pending]
    rows.append((window_key(b"user-1", 2 * MINUTE), INT64.serialize(99)))  # expired when it comes
    applied = restored.apply_changelog(CHANGELOG, rows, len(rows))
    assert restored.changelog_offsets == {CHANGELOG: len(rows)}
    assert list(restored.windows["counts"].fetch("user-1", 0, 10**9)) == live
    window = restored.window_stores["counts"]
    assert (window.restore_skipped, applied) == (1, len(rows) - 1)
    assert window.purged > 0  # windows that expired as the restore went on left the disk
    assert restored.pending == []  # restoring writes nothing to the changelog
    restored.close(clean=True)


def test_the_context_hands_out_window_stores_by_name(tmp_path: Path) -> None:
    task = make_task(StateDirectory(tmp_path, APP))
    ctx = ProcessorContext(TASK, task.typed, {}, lambda out: None, window_stores=task.windows)
    assert ctx.window_store("counts") is task.windows["counts"]
    with pytest.raises(UnknownStoreError, match=r"no store 'counts' \(its stores: 'counts' \(window\)\)"):
        ctx.store("counts")
    with pytest.raises(UnknownStoreError, match="no window store 'nope'"):
        ctx.window_store("nope")
    task.close(clean=False)
