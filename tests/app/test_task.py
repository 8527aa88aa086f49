"""StreamTask on a real state directory (real rocksdict stores, real checkpoint files)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from streamtasks.app.task import Role, StreamTask
from streamtasks.state import INT64, STRING, StateDirectory, StoreClosedError, read_checkpoint
from topology import TaskId, TopicPartition, Topology, TopologyBuilder
from topology.model import TaskInfo

APP = "wc"
CHANGELOG = TopicPartition("wc-counts-changelog", 0)
T1_0 = TaskId(1, 0)


def wordcount() -> Topology:
    builder = TopologyBuilder(APP)
    builder.stream("text").repartition("words").store("counts")
    return builder.build()


def info_of(topology: Topology, task: TaskId) -> TaskInfo:
    return next(t for t in topology.tasks({"text": 4}) if t.id == task)


def logged(topology: Topology) -> frozenset[str]:
    return frozenset(s.name for sub in topology.subtopologies for s in sub.stores if s.logging)


def make_task(
    directory: StateDirectory,
    *,
    role: Role = Role.ACTIVE,
    topology: Topology | None = None,
    task: TaskId = T1_0,
    typed: bool = False,
) -> StreamTask:
    topo = topology or wordcount()
    return StreamTask(
        info_of(topo, task),
        role=role,
        application_id=APP,
        directory=directory,
        store_serdes={"counts": (STRING, INT64)} if typed else {},
        logged_stores=logged(topo),
    )


@pytest.fixture
def directory(tmp_path: Path) -> StateDirectory:
    return StateDirectory(tmp_path, APP)


def previous_run(directory: StateDirectory, *, rows: dict[bytes, bytes], offset: int | None) -> None:
    """A task that ran before: ``rows`` in its store; a checkpoint at ``offset`` (None: crashed)."""
    task = make_task(directory, role=Role.STANDBY)
    task.open({})
    task.apply_changelog(CHANGELOG, list(rows.items()), offset or 0)
    if offset is None:
        task.close(clean=False)
    else:
        task.changelog_offsets[CHANGELOG] = offset
        task.close(clean=True)


def rows_of(task: StreamTask, store: str = "counts") -> dict[bytes, bytes]:
    return dict(task.stores[store].items())


# -- opening ----------------------------------------------------------------------------------------


def test_open_without_state_starts_every_changelog_at_zero(
    directory: StateDirectory, caplog: pytest.LogCaptureFixture
) -> None:
    task = make_task(directory)
    with caplog.at_level(logging.WARNING):
        task.open({CHANGELOG: 100})
    assert task.changelog_offsets == {CHANGELOG: 0}
    assert task.changelog_partitions == (CHANGELOG,)
    assert set(task.stores) == set(task.typed) == {"counts"}
    assert rows_of(task) == {}
    assert caplog.records == []
    assert directory.read_checkpoint(T1_0) is None
    task.close(clean=False)


def test_open_with_a_checkpoint_starts_there_and_keeps_the_state(
    directory: StateDirectory, caplog: pytest.LogCaptureFixture
) -> None:
    previous_run(directory, rows={b"a": b"1", b"b": b"2"}, offset=42)
    task = make_task(directory)
    with caplog.at_level(logging.WARNING):
        task.open({CHANGELOG: 50})
    assert task.changelog_offsets == {CHANGELOG: 42}
    assert task.offset_sum() == 42
    assert rows_of(task) == {b"a": b"1", b"b": b"2"}
    assert caplog.records == []
    task.close(clean=False)


def test_open_with_a_checkpoint_at_the_changelog_end_keeps_the_state(directory: StateDirectory) -> None:
    previous_run(directory, rows={b"a": b"1"}, offset=42)
    task = make_task(directory)
    task.open({CHANGELOG: 42})
    assert task.changelog_offsets == {CHANGELOG: 42}
    assert rows_of(task) == {b"a": b"1"}
    task.close(clean=False)


def test_local_state_without_a_checkpoint_is_wiped_and_restored_from_zero(
    directory: StateDirectory, caplog: pytest.LogCaptureFixture
) -> None:
    previous_run(directory, rows={b"a": b"1"}, offset=None)
    assert directory.read_checkpoint(T1_0) is None
    task = make_task(directory)
    with caplog.at_level(logging.WARNING, logger="streamtasks.app.task"):
        task.open({CHANGELOG: 7})
    assert task.changelog_offsets == {CHANGELOG: 0}
    assert rows_of(task) == {}
    assert any("without a checkpoint" in r.getMessage() and "1_0" in r.getMessage() for r in caplog.records)
    task.close(clean=False)


def test_a_checkpoint_ahead_of_the_changelog_end_is_wiped(
    directory: StateDirectory, caplog: pytest.LogCaptureFixture
) -> None:
    previous_run(directory, rows={b"a": b"1"}, offset=90)
    task = make_task(directory)
    with caplog.at_level(logging.WARNING, logger="streamtasks.app.task"):
        task.open({CHANGELOG: 10})  # the changelog was recreated, or the broker lost data
    assert task.changelog_offsets == {CHANGELOG: 0}
    assert rows_of(task) == {}
    assert directory.read_checkpoint(T1_0) is None
    assert any("newer than the changelog" in r.getMessage() for r in caplog.records)
    task.close(clean=False)


def test_a_checkpoint_of_an_unknown_end_is_trusted(directory: StateDirectory) -> None:
    previous_run(directory, rows={b"a": b"1"}, offset=90)
    task = make_task(directory)
    task.open({})
    assert task.changelog_offsets == {CHANGELOG: 90}
    assert rows_of(task) == {b"a": b"1"}
    task.close(clean=False)


def test_a_corrupt_checkpoint_is_treated_as_missing(
    directory: StateDirectory, caplog: pytest.LogCaptureFixture
) -> None:
    previous_run(directory, rows={b"a": b"1"}, offset=42)
    directory.checkpoint_path(T1_0).write_bytes(b"0\n1\nwc-counts-changelog zero 42\n")
    task = make_task(directory)
    with caplog.at_level(logging.WARNING, logger="streamtasks.app.task"):
        task.open({CHANGELOG: 50})
    assert task.changelog_offsets == {CHANGELOG: 0}
    assert rows_of(task) == {}  # state without a (usable) checkpoint: wiped
    messages = [r.getMessage() for r in caplog.records]
    assert any("not an integer" in m for m in messages)
    assert any("without a checkpoint" in m for m in messages)
    task.close(clean=False)


def test_a_corrupt_checkpoint_without_state_opens_empty(directory: StateDirectory) -> None:
    directory.task_dir(T1_0)
    directory.checkpoint_path(T1_0).write_bytes(b"\xff\xfe garbage")
    task = make_task(directory)
    task.open({CHANGELOG: 5})
    assert task.changelog_offsets == {CHANGELOG: 0}
    task.checkpoint()  # a good checkpoint replaces the corrupt one
    assert directory.read_checkpoint(T1_0) == {CHANGELOG: 0}
    task.close(clean=False)


def test_a_checkpointed_store_whose_database_is_gone_restores_from_zero(directory: StateDirectory) -> None:
    previous_run(directory, rows={b"a": b"1"}, offset=42)
    directory.wipe_store(T1_0, "counts")  # the checkpoint stays, the data does not
    task = make_task(directory)
    task.open({CHANGELOG: 42})
    assert rows_of(task) == {}
    assert task.changelog_offsets == {CHANGELOG: 0}  # not 42: nothing below 42 is in the store
    assert task.lag({CHANGELOG: 42}) == 42
    task.close(clean=False)


def test_unlogged_store_state_is_kept_across_a_clean_close(directory: StateDirectory) -> None:
    builder = TopologyBuilder(APP)
    builder.stream("text").store("cache", logging=False)
    topology = builder.build()
    first = make_task(directory, topology=topology, task=TaskId(0, 0))
    first.open({})
    assert first.changelog_partitions == ()
    first.stores["cache"].put(b"k", b"v")
    assert first.pending == []  # no changelog: nothing to send
    first.close(clean=True)
    again = make_task(directory, topology=topology, task=TaskId(0, 0))
    again.open({})
    assert rows_of(again, "cache") == {b"k": b"v"}  # its only copy: must not be wiped
    again.close(clean=True)


def test_a_logged_store_without_checkpoint_is_wiped_but_an_unlogged_one_of_the_task_is_kept(
    directory: StateDirectory,
) -> None:
    builder = TopologyBuilder(APP)
    builder.stream("text").store("counts").store("cache", logging=False)
    topology = builder.build()
    tp = TopicPartition("wc-counts-changelog", 0)
    first = make_task(directory, topology=topology, task=TaskId(0, 0))
    first.open({})
    first.stores["counts"].put(b"a", b"1")
    first.stores["cache"].put(b"k", b"v")
    assert first.take_pending() == [(tp, b"a", b"1", None)]
    first.close(clean=False)  # crash: no checkpoint
    again = make_task(directory, topology=topology, task=TaskId(0, 0))
    again.open({tp: 1})
    assert rows_of(again, "counts") == {}
    assert again.changelog_offsets == {tp: 0}
    assert rows_of(again, "cache") == {b"k": b"v"}
    again.close(clean=False)


# -- writes and the changelog ------------------------------------------------------------------------


def test_store_writes_of_an_active_task_queue_changelog_records(directory: StateDirectory) -> None:
    task = make_task(directory, typed=True)
    task.open({})
    counts = task.typed["counts"]
    counts.put("kafka", 3)
    counts.delete("gone")
    assert task.pending == [
        (CHANGELOG, b"kafka", (3).to_bytes(8, "big"), None),
        (CHANGELOG, b"gone", None, None),
    ]
    assert counts.get("kafka") == 3
    assert task.take_pending() == [
        (CHANGELOG, b"kafka", (3).to_bytes(8, "big"), None),
        (CHANGELOG, b"gone", None, None),
    ]
    assert task.pending == []
    assert task.changelog_offsets == {CHANGELOG: 0}  # moves only when the broker acknowledges
    task.close(clean=False)


def test_store_writes_of_a_standby_task_queue_nothing(directory: StateDirectory) -> None:
    task = make_task(directory, role=Role.STANDBY)
    task.open({})
    task.stores["counts"].put(b"k", b"v")
    assert task.pending == []
    task.role = Role.ACTIVE  # recycled: the same store now logs its writes
    task.stores["counts"].put(b"k", b"w")
    assert task.pending == [(CHANGELOG, b"k", b"w", None)]
    task.close(clean=False)


def test_apply_changelog_writes_without_queueing_and_moves_the_offset(directory: StateDirectory) -> None:
    task = make_task(directory, role=Role.STANDBY)
    task.open({})
    applied = task.apply_changelog(CHANGELOG, [(b"a", b"1"), (b"b", b"2"), (b"a", None)], 3)
    assert applied == 3
    assert rows_of(task) == {b"b": b"2"}
    assert task.pending == []
    assert task.changelog_offsets == {CHANGELOG: 3}
    assert (task.applied_records, task.restored_records) == (3, 0)  # a standby does not restore
    assert task.apply_changelog(CHANGELOG, [], 2) == 0
    assert task.changelog_offsets == {CHANGELOG: 3}  # never backwards
    task.close(clean=False)


def test_a_restoring_active_counts_restored_records_and_is_done_at_its_target(
    directory: StateDirectory,
) -> None:
    task = make_task(directory)
    task.open({CHANGELOG: 5})
    task.restore.start({CHANGELOG: 5}, now_ms=0)
    assert task.restoring
    assert not task.restore_done()
    task.apply_changelog(CHANGELOG, [(b"a", b"1"), (b"b", b"1")], 2)
    assert not task.restore_done()
    assert task.lag({CHANGELOG: 5}) == 3
    task.apply_changelog(CHANGELOG, [(b"c", b"1")], 5)  # a compacted gap: 3 records up to 5
    assert task.restore_done()
    assert task.restored_records == 3
    assert task.pending == []
    task.restore.finish(now_ms=0)
    assert not task.restoring
    assert task.restore_done()
    task.close(clean=False)


def test_lag_and_offset_sum(directory: StateDirectory) -> None:
    task = make_task(directory, role=Role.STANDBY)
    task.open({})
    task.apply_changelog(CHANGELOG, [(b"a", b"1")], 40)
    assert task.offset_sum() == 40
    assert task.lag({CHANGELOG: 100}) == 60
    assert task.lag({CHANGELOG: 30}) == 0  # a stale end offset is no negative lag
    assert task.lag({}) is None  # unknown end
    task.close(clean=False)


def test_a_stateless_task_has_no_lag_and_no_offset_sum(directory: StateDirectory) -> None:
    task = make_task(directory, task=TaskId(0, 0))
    task.open({})
    assert (task.lag({}), task.offset_sum(), task.changelog_partitions) == (0, 0, ())
    task.close(clean=True)
    assert directory.read_checkpoint(TaskId(0, 0)) is None


# -- checkpoints and closing -------------------------------------------------------------------------


def test_checkpoint_writes_kafkas_format_with_the_acknowledged_offsets(directory: StateDirectory) -> None:
    task = make_task(directory)
    task.open({})
    task.stores["counts"].put(b"a", b"1")
    task.stores["counts"].put(b"b", b"1")
    task.take_pending()
    task.acknowledged(CHANGELOG, 41)
    task.acknowledged(CHANGELOG, 40)  # an older acknowledgement moves nothing
    task.checkpoint()
    path = directory.checkpoint_path(T1_0)
    assert path.read_bytes() == b"0\n1\nwc-counts-changelog 0 42\n"
    assert read_checkpoint(path) == {CHANGELOG: 42}
    task.close(clean=False)


def test_clean_close_checkpoints_and_closes_the_stores(directory: StateDirectory) -> None:
    task = make_task(directory)
    task.open({})
    task.stores["counts"].put(b"a", b"1")
    task.acknowledged(CHANGELOG, 6)
    store = task.stores["counts"]
    task.close(clean=True)
    assert task.closed
    assert store.closed
    assert directory.read_checkpoint(T1_0) == {CHANGELOG: 7}
    with pytest.raises(StoreClosedError):
        store.get(b"a")
    task.close(clean=True)  # idempotent
    task.checkpoint()  # a no-op once closed
    assert directory.read_checkpoint(T1_0) == {CHANGELOG: 7}


def test_unclean_close_leaves_the_previous_checkpoint(directory: StateDirectory) -> None:
    task = make_task(directory)
    task.open({})
    task.acknowledged(CHANGELOG, 2)
    task.checkpoint()
    task.acknowledged(CHANGELOG, 9)
    store = task.stores["counts"]
    task.close(clean=False)
    assert task.closed
    assert store.closed
    assert directory.read_checkpoint(T1_0) == {CHANGELOG: 3}


def test_closing_releases_the_database_for_the_next_open(directory: StateDirectory) -> None:
    first = make_task(directory)
    first.open({})
    first.close(clean=True)
    second = make_task(directory)
    second.open({CHANGELOG: 0})  # RocksDB would refuse a database still open
    assert second.changelog_offsets == {CHANGELOG: 0}
    second.close(clean=True)


def test_a_failing_checkpoint_on_close_still_closes_the_stores(directory: StateDirectory) -> None:
    task = make_task(directory)
    task.open({})
    store = task.stores["counts"]
    directory.checkpoint_path(T1_0).mkdir(parents=True)  # the checkpoint cannot be written
    with pytest.raises(IsADirectoryError):
        task.close(clean=True)
    assert store.closed  # else RocksDB keeps its lock and the task cannot open here again
    assert task.closed
