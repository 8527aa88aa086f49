from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from streamtasks.errors import ConfigError, StateDirectoryLockedError, StateError
from streamtasks.state import KeyValueStore, StateDirectory
from streamtasks.state.directory import PROCESS_FILE
from topology import TaskId, TopicPartition

T0 = TaskId(0, 0)
T1 = TaskId(0, 1)
T2 = TaskId(1, 0)
CL = "app-s-changelog"


def _second_process_locks(state_dir: Path) -> subprocess.CompletedProcess[str]:
    code = (
        "import sys\n"
        "from streamtasks.state import StateDirectory, StateDirectoryLockedError\n"
        "d = StateDirectory(sys.argv[1], 'app')\n"
        "try:\n"
        "    d.lock()\n"
        "except StateDirectoryLockedError as e:\n"
        "    print(e)\n"
        "    sys.exit(3)\n"
        "d.unlock()\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code, str(state_dir)], capture_output=True, text=True, timeout=60, check=False
    )


def test_layout(tmp_path: Path) -> None:
    d = StateDirectory(str(tmp_path / "state"), "app")
    assert d.root == tmp_path / "state" / "app"
    assert d.root.is_dir()
    assert d.application_id == "app"
    assert d.task_dir(TaskId(2, 13)) == d.root / "2_13"
    assert (d.root / "2_13").is_dir()
    assert d.store_path(T0, "counts") == d.root / "0_0" / "rocksdb" / "counts"
    assert d.checkpoint_path(T1) == d.root / "0_1" / ".checkpoint"
    assert not (d.root / "0_1").exists()  # computing a path creates nothing


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "a\0b"])
def test_bad_application_id_or_store_name(tmp_path: Path, name: str) -> None:
    with pytest.raises(ConfigError, match="cannot be used as a directory name"):
        StateDirectory(tmp_path, name)
    with pytest.raises(ConfigError, match="store name"):
        StateDirectory(tmp_path, "app").store_path(T0, name)


def test_process_id_is_created_once_and_survives_a_restart(tmp_path: Path) -> None:
    first = StateDirectory(tmp_path, "app").process_id()
    document = json.loads((tmp_path / "app" / PROCESS_FILE).read_text())
    assert document == {"version": 1, "process_id": str(first)}
    restarted = StateDirectory(tmp_path, "app")
    assert restarted.process_id() == first
    assert restarted.process_id() == first
    assert StateDirectory(tmp_path, "other-app").process_id() != first
    assert sorted(p.name for p in (tmp_path / "app").iterdir()) == [PROCESS_FILE]


@pytest.mark.parametrize(
    "content",
    [
        b"not json",
        b"\xff",
        b"[]",
        b'{"version": 2, "process_id": "9b5e2a7e-0000-4000-8000-000000000000"}',
        b'{"version": 1}',
        b'{"version": 1, "process_id": 7}',
        b'{"version": 1, "process_id": "not-a-uuid"}',
    ],
)
def test_malformed_process_file_is_replaced_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, content: bytes
) -> None:
    d = StateDirectory(tmp_path, "app")
    (d.root / PROCESS_FILE).write_bytes(content)
    with caplog.at_level(logging.WARNING, logger="streamtasks.state.directory"):
        new = d.process_id()
    assert PROCESS_FILE in caplog.text
    assert "new id" in caplog.text
    assert isinstance(new, uuid.UUID)
    assert StateDirectory(tmp_path, "app").process_id() == new


def test_lock_is_refused_to_a_second_process(tmp_path: Path) -> None:
    with StateDirectory(tmp_path, "app") as d:
        assert d.locked
        refused = _second_process_locks(tmp_path)
        assert refused.returncode == 3, refused.stderr
        assert str(d.root) in refused.stdout
        assert "another process" in refused.stdout
        assert f"pid {os.getpid()}" in refused.stdout
    assert not d.locked
    allowed = _second_process_locks(tmp_path)
    assert allowed.returncode == 0, allowed.stdout + allowed.stderr


def test_lock_is_refused_to_a_second_instance_in_the_same_process(tmp_path: Path) -> None:
    first = StateDirectory(tmp_path, "app")
    first.lock()
    first.lock()  # already held: a no-op
    second = StateDirectory(tmp_path, "app")
    with pytest.raises(StateDirectoryLockedError, match="is locked: another process") as caught:
        second.lock()
    assert isinstance(caught.value, StateError)
    assert not second.locked
    first.unlock()
    first.unlock()
    second.lock()
    assert second.locked
    second.unlock()


def test_tasks_on_disk_ignores_junk(tmp_path: Path) -> None:
    d = StateDirectory(tmp_path, "app")
    for task in (T2, T1, TaskId(0, 10)):
        d.task_dir(task)
    for junk in ("x_1", "1_", "_1", "1-2", "01_2", "1_2_3", " 1_2", "\u0661_1", "rocksdb", "0_1.old"):
        (d.root / junk).mkdir()
    (d.root / "3_3").write_text("a file, not a task directory")
    (d.root / "4_4").symlink_to(d.root / "0_1")
    d.process_id()
    with d:
        assert d.tasks_on_disk() == (T1, TaskId(0, 10), T2)


def test_offset_sums(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    d = StateDirectory(tmp_path, "app")
    other = TopicPartition("app-t-changelog", 0)
    d.write_checkpoint(T0, {TopicPartition(CL, 0): 10, other: 5, TopicPartition("unrelated", 0): 1000})
    d.write_checkpoint(T1, {TopicPartition(CL, 1): 7})
    d.task_dir(T2)  # a directory without a checkpoint
    d.task_dir(TaskId(2, 0))
    (d.root / "2_0" / ".checkpoint").write_text("0\n5\n")  # corrupt
    d.write_checkpoint(TaskId(3, 0), {TopicPartition(CL, 9): 1})  # not among the changelogs asked about
    d.write_checkpoint(TaskId(4, 0), {})
    changelogs = {
        T0: (TopicPartition(CL, 0), other),
        T1: (TopicPartition(CL, 1), TopicPartition("app-t-changelog", 1)),  # second one not checkpointed
        T2: (TopicPartition(CL, 0),),
        TaskId(2, 0): (TopicPartition(CL, 0),),
        TaskId(4, 0): (TopicPartition(CL, 0),),
        TaskId(9, 9): (TopicPartition(CL, 0),),  # no directory at all
    }
    with caplog.at_level(logging.WARNING, logger="streamtasks.state.directory"):
        sums = d.offset_sums(changelogs)
    assert sums == {T0: 15, T1: 7, TaskId(4, 0): 0}
    assert "task 2_0 skipped" in caplog.text
    assert "line 3" in caplog.text


def test_offset_sum_is_capped_at_int64(tmp_path: Path) -> None:
    d = StateDirectory(tmp_path, "app")
    big = 2**63 - 1
    d.write_checkpoint(T0, {TopicPartition(CL, 0): big, TopicPartition(CL, 1): big})
    assert d.offset_sums({T0: (TopicPartition(CL, 0), TopicPartition(CL, 1))}) == {T0: big}


def test_checkpoint_delegation_round_trips(tmp_path: Path) -> None:
    d = StateDirectory(tmp_path, "app")
    assert d.read_checkpoint(T0) is None
    assert not (d.root / "0_0").exists()
    d.write_checkpoint(T0, {TopicPartition(CL, 0): 3})
    assert d.read_checkpoint(T0) == {TopicPartition(CL, 0): 3}
    assert (d.root / "0_0" / ".checkpoint").read_text() == f"0\n1\n{CL} 0 3\n"


def test_wipe_task_removes_stores_and_checkpoint(tmp_path: Path) -> None:
    d = StateDirectory(tmp_path, "app")
    with KeyValueStore(d.store_path(T0, "s"), name="s") as store:
        store.put(b"k", b"v")
    d.write_checkpoint(T0, {TopicPartition(CL, 0): 1})
    d.task_dir(T1)
    d.wipe_task(T0)
    d.wipe_task(T0)  # nothing left: a no-op
    assert d.tasks_on_disk() == (T1,)
    assert d.read_checkpoint(T0) is None
    with KeyValueStore(d.store_path(T0, "s"), name="s") as store:
        assert store.count() == 0


def test_wipe_store_keeps_the_rest_of_the_task(tmp_path: Path) -> None:
    d = StateDirectory(tmp_path, "app")
    for name in ("a", "b"):
        with KeyValueStore(d.store_path(T0, name), name=name) as store:
            store.put(b"k", name.encode())
    d.write_checkpoint(T0, {TopicPartition(CL, 0): 1})
    d.wipe_store(T0, "a")
    d.wipe_store(T0, "never-opened")
    assert not d.store_path(T0, "a").exists()
    with KeyValueStore(d.store_path(T0, "b"), name="b") as store:
        assert store.get(b"k") == b"b"
    assert d.read_checkpoint(T0) == {TopicPartition(CL, 0): 1}


def test_wipe_never_follows_symlinks_out_of_the_root(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    (outside / "rocksdb" / "s").mkdir(parents=True)
    (outside / "precious").write_text("keep")
    (outside / "rocksdb" / "s" / "precious").write_text("keep")
    d = StateDirectory(tmp_path / "state", "app")

    (d.root / "0_0").symlink_to(outside)  # the task directory itself is a symlink
    with pytest.raises(StateError, match="is a symlink"):
        d.wipe_store(T0, "s")
    d.wipe_task(T0)
    assert not (d.root / "0_0").exists()

    d.task_dir(T1)
    (d.root / "0_1" / "link-out").symlink_to(outside)  # a symlink inside the task directory
    (d.root / "0_1" / "rocksdb").symlink_to(outside / "rocksdb")
    with pytest.raises(StateError, match="rocksdb is a symlink"):
        d.wipe_store(T1, "s")
    d.wipe_task(T1)
    assert not (d.root / "0_1").exists()

    d.task_dir(T2)
    (d.root / "1_0" / "rocksdb").mkdir()
    (d.root / "1_0" / "rocksdb" / "s").symlink_to(outside / "rocksdb" / "s")  # the store path itself
    d.wipe_store(T2, "s")
    assert not (d.root / "1_0" / "rocksdb" / "s").exists()

    assert (outside / "precious").read_text() == "keep"
    assert (outside / "rocksdb" / "s" / "precious").read_text() == "keep"
