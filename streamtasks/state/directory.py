"""The state directory of one application on one machine.

Layout (the same shape as Kafka Streams', so operators find their way around)::

    <state_dir>/<application_id>/
        .lock                          exclusive lock of the process using this directory
        streamtasks-process.json       {"version": 1, "process_id": "<uuid>"}
        <subtopology>_<partition>/     one directory per task that has or had state here
            .checkpoint                changelog offsets the stores are complete up to
            rocksdb/<store>/           one RocksDB database per store

The process id survives restarts, so the assignor can give a restarted process back the tasks
whose state it still has. :meth:`StateDirectory.offset_sums` reports, per task on disk, how
far its stores got (the sum of its checkpointed changelog offsets); the assignor turns that into
lags. A task whose directory has no checkpoint has no usable state: the runtime wipes it before
restoring from the changelog.

Only one process may use a state directory at a time: :meth:`StateDirectory.lock` takes an
exclusive, non-blocking ``flock`` on ``.lock`` (released by :meth:`~StateDirectory.unlock` or
when the process dies). Reading and creating the process id, and wiping, should happen under it.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import shutil
import uuid
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

from streamtasks.errors import CheckpointError, ConfigError, StateDirectoryLockedError, StateError
from streamtasks.state._files import atomic_write
from streamtasks.state.checkpoint import read_checkpoint as _read_checkpoint
from streamtasks.state.checkpoint import write_checkpoint as _write_checkpoint
from topology.ids import TaskId, TopicPartition

__all__ = ["CHECKPOINT_FILE", "LOCK_FILE", "PROCESS_FILE", "STORES_DIR", "StateDirectory"]

PROCESS_FILE = "streamtasks-process.json"
LOCK_FILE = ".lock"
CHECKPOINT_FILE = ".checkpoint"
STORES_DIR = "rocksdb"

_PROCESS_FILE_VERSION = 1
_INT64_MAX = 2**63 - 1

_log = logging.getLogger(__name__)


def _check_name(kind: str, name: str) -> str:
    """A single, harmless path component."""
    if (
        not isinstance(name, str)
        or name in ("", ".", "..")
        or "/" in name
        or "\0" in name
        or (os.altsep is not None and os.altsep in name)
    ):
        raise ConfigError(f"{kind} {name!r} cannot be used as a directory name")
    return name


class StateDirectory:
    """``<state_dir>/<application_id>/``: the process id, the lock, and the tasks' state.

    Creating the object creates the directory; nothing else touches the disk until asked.
    ``with StateDirectory(...) as d:`` holds the lock for the block.
    """

    __slots__ = ("_application_id", "_lock_fd", "_process_id", "_root")

    def __init__(self, state_dir: Path | str, application_id: str) -> None:
        self._application_id = _check_name("application id", application_id)
        self._root = Path(state_dir) / application_id
        self._root.mkdir(parents=True, exist_ok=True)
        self._lock_fd: int | None = None
        self._process_id: uuid.UUID | None = None

    @property
    def root(self) -> Path:
        return self._root

    @property
    def application_id(self) -> str:
        return self._application_id

    def __repr__(self) -> str:
        return f"StateDirectory({str(self._root)!r}, locked={self.locked})"

    # -- process id ---------------------------------------------------------------------------

    def process_id(self) -> uuid.UUID:
        """This directory's process id: read from ``streamtasks-process.json``, or created there.

        A missing file is created (atomically); an unreadable or malformed one is logged and
        replaced by a new id, as the state it described can no longer be matched to a process.
        """
        if self._process_id is None:
            path = self._root / PROCESS_FILE
            try:
                self._process_id = _read_process_file(path)
            except FileNotFoundError:
                pass
            except (OSError, ValueError) as exc:  # JSON and UTF-8 decode errors are ValueErrors
                _log.warning("%s is unusable (%s); this process gets a new id", path, exc)
            if self._process_id is None:
                self._process_id = self._write_new_process_id()
        return self._process_id

    def _write_new_process_id(self) -> uuid.UUID:
        process_id = uuid.uuid4()
        document = {"version": _PROCESS_FILE_VERSION, "process_id": str(process_id)}
        atomic_write(self._root / PROCESS_FILE, (json.dumps(document) + "\n").encode("utf-8"))
        return process_id

    # -- lock ---------------------------------------------------------------------------------

    @property
    def locked(self) -> bool:
        """Whether this object holds the directory's lock."""
        return self._lock_fd is not None

    def lock(self) -> None:
        """Take the directory's exclusive lock, or raise :class:`StateDirectoryLockedError`.

        Non-blocking; a no-op if this object already holds it. The lock is an ``flock`` on
        ``.lock``, so a second :class:`StateDirectory` on the same directory is refused even in
        the same process. The holder's pid is written into the file for the error message.
        """
        if self._lock_fd is not None:
            return
        path = self._root / LOCK_FILE
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            os.close(fd)
            raise StateDirectoryLockedError(
                f"state directory {self._root} is locked: another process{holder} is using it "
                f"(lock file {path}); give each instance of application {self._application_id!r} "
                "its own state_dir"
            ) from None
        except BaseException:
            os.close(fd)
            raise
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        except OSError:  # the pid is only a hint for the error message
            pass
        self._lock_fd = fd

    def unlock(self) -> None:
        """Release the lock (the ``.lock`` file stays). A no-op if not held."""
        fd, self._lock_fd = self._lock_fd, None
        if fd is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)

    def __enter__(self) -> StateDirectory:
        self.lock()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.unlock()

    # -- tasks and stores ---------------------------------------------------------------------

    def task_dir(self, task: TaskId) -> Path:
        """``<root>/<subtopology>_<partition>``, created if missing."""
        path = self._task_path(task)
        path.mkdir(exist_ok=True)
        return path

    def _task_path(self, task: TaskId) -> Path:
        return self._root / str(task)

    def store_path(self, task: TaskId, store_name: str) -> Path:
        """``<task dir>/rocksdb/<store_name>`` (computed only; the store creates it)."""
        return self._task_path(task) / STORES_DIR / _check_name("store name", store_name)

    def checkpoint_path(self, task: TaskId) -> Path:
        """``<task dir>/.checkpoint`` (computed only)."""
        return self._task_path(task) / CHECKPOINT_FILE

    def read_checkpoint(self, task: TaskId) -> dict[TopicPartition, int] | None:
        """The task's checkpointed offsets; ``None`` if it has no checkpoint (or no directory)."""
        return _read_checkpoint(self.checkpoint_path(task))

    def write_checkpoint(self, task: TaskId, offsets: Mapping[TopicPartition, int]) -> None:
        """Atomically replace the task's checkpoint (creating the task directory if needed)."""
        self.task_dir(task)
        _write_checkpoint(self.checkpoint_path(task), offsets)

    def tasks_on_disk(self) -> tuple[TaskId, ...]:
        """Tasks with a directory here, sorted; other entries (files, symlinks, junk) are ignored."""
        tasks = []
        with os.scandir(self._root) as entries:
            for entry in entries:
                task = _parse_task_dir(entry.name)
                if task is not None and entry.is_dir(follow_symlinks=False):
                    tasks.append(task)
        return tuple(sorted(tasks))

    def offset_sums(self, changelogs: Mapping[TaskId, tuple[TopicPartition, ...]]) -> dict[TaskId, int]:
        """Per task on disk with a readable checkpoint: the sum of its checkpointed offsets.

        Only the partitions ``changelogs[task]`` lists count (a partition missing from the
        checkpoint adds 0), and only tasks in ``changelogs`` are reported. Tasks without a
        checkpoint are left out; a corrupt or unreadable checkpoint is logged and left out. A
        sum is capped at ``2**63 - 1`` as it travels as an int64.
        """
        sums: dict[TaskId, int] = {}
        for task in self.tasks_on_disk():
            partitions = changelogs.get(task)
            if partitions is None:
                continue
            try:
                offsets = self.read_checkpoint(task)
            except (CheckpointError, OSError) as exc:
                _log.warning("state directory %s: task %s skipped: %s", self._root, task, exc)
                continue
            if offsets is None:
                continue
            total = sum(offsets.get(tp, 0) for tp in frozenset(partitions))
            sums[task] = min(total, _INT64_MAX)
        return sums

    def wipe_task(self, task: TaskId) -> None:
        """Remove the task's directory with everything in it (its stores must be closed).

        A symlink in its place is removed, never followed. A no-op if there is nothing.
        """
        _remove(self._task_path(task))

    def wipe_store(self, task: TaskId, store_name: str) -> None:
        """Remove one store's database (it must be closed); the task's checkpoint is left alone.

        Refuses (:class:`StateError`) to reach the store through a symlinked task or ``rocksdb``
        directory; a symlink at the store's own path is removed, not followed.
        """
        path = self.store_path(task, store_name)
        for parent in (self._task_path(task), path.parent):
            if parent.is_symlink():
                raise StateError(f"will not wipe store {store_name!r} of task {task}: {parent} is a symlink")
        _remove(path)


def _read_process_file(path: Path) -> uuid.UUID:
    document = json.loads(path.read_bytes().decode("utf-8"))
    if not isinstance(document, dict) or document.get("version") != _PROCESS_FILE_VERSION:
        raise ValueError(f"expected a JSON object with version {_PROCESS_FILE_VERSION}")
    text = document.get("process_id")
    if not isinstance(text, str):
        raise ValueError("process_id is not a string")
    return uuid.UUID(text)


def _parse_task_dir(name: str) -> TaskId | None:
    head, sep, tail = name.partition("_")
    if not (sep and head.isascii() and head.isdigit() and tail.isascii() and tail.isdigit()):
        return None
    task = TaskId(int(head), int(tail))
    return task if str(task) == name else None  # no leading zeros: one directory per task


def _remove(path: Path) -> None:
    """Delete ``path``: a directory tree (symlinks inside are unlinked, not followed) or one entry."""
    if path.is_symlink() or (path.exists() and not path.is_dir()):
        path.unlink(missing_ok=True)
    elif path.is_dir():
        shutil.rmtree(path)


def _read_holder(fd: int) -> str:
    try:
        text = os.pread(fd, 32, 0).decode("ascii").strip()
    except (OSError, UnicodeDecodeError):
        return ""
    return f" (pid {text})" if text.isdigit() else ""
