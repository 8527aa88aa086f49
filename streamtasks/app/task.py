"""One task of a running application: its stores, its changelog positions, and its role.

A task is *active* (it processes its source partitions and writes its stores, each write also
sent to the store's changelog partition) or *standby* (it only applies its changelog to local
copies of the stores). Warm-ups are standbys that the assignor placed to take over the task.
Recycling flips the role without closing the stores (KIP-429: a task that moves from active to
standby on the same process is not rebuilt).

``changelog_offsets[tp]`` is the offset up to which the local store holds the changelog
partition ``tp``: for a standby or a restoring active task the next offset to read; for a
running active task one past the last changelog record the broker acknowledged. It is what the
checkpoint file records on commit and on clean close, and what the subscription reports as the
task's offset sum.

A changelog record carries the timestamp of the write: that of the input record being processed
when the store was written (:attr:`StreamTask.record_timestamp`), kept per key through the record
cache until the cache writes the key out, as Kafka Streams' caching store keeps each entry's
record context.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from streamtasks.app.restore_progress import RestoreProgress
from streamtasks.state import (
    ByteStore,
    CacheBudget,
    CachedStore,
    CheckpointError,
    KeyValueStore,
    StateDirectory,
    TypedStore,
)
from streamtasks.state.serdes import BYTES, Serde
from streamtasks.state.window import TypedWindowStore, WindowStore
from topology.ids import TaskId, TopicPartition
from topology.model import StateStore, TaskInfo
from topology.names import changelog_topic

__all__ = ["PendingWrite", "Role", "StreamTask"]

log = logging.getLogger("streamtasks.app.task")

#: A changelog record waiting to be sent: (changelog partition, key, value or None, timestamp
#: of the write in ms, None when no input record was being processed).
PendingWrite = tuple[TopicPartition, bytes, bytes | None, int | None]


class Role(enum.Enum):
    ACTIVE = "active"
    STANDBY = "standby"


class StreamTask:
    """Runtime state of one task on this process (see the module docstring)."""

    def __init__(
        self,
        info: TaskInfo,
        *,
        role: Role,
        application_id: str,
        directory: StateDirectory,
        store_serdes: Mapping[str, tuple[Serde[Any], Serde[Any]]],
        logged_stores: frozenset[str],
        warmup: bool = False,
        cache: CacheBudget | None = None,
    ) -> None:
        self.info = info
        self.role = role
        self.warmup = warmup
        self.directory = directory
        self._application_id = application_id
        self._serdes = store_serdes
        #: changelog partition → store name, and back.
        self.store_of: dict[TopicPartition, str] = {}
        self.changelog_of: dict[str, TopicPartition] = {}
        for name in info.store_names:
            if name in logged_stores:
                tp = TopicPartition(changelog_topic(application_id, name), info.id.partition)
                self.store_of[tp] = name
                self.changelog_of[name] = tp
        self.stores: dict[str, KeyValueStore] = {}
        self.typed: dict[str, TypedStore[Any, Any]] = {}
        #: Window stores (the topology's ``kind="window"`` stores): in bytes, and typed.
        self.window_stores: dict[str, WindowStore] = {}
        self.windows: dict[str, TypedWindowStore[Any, Any]] = {}
        #: The record cache in front of each store (none when ``cache`` is None or 0 bytes).
        self.caches: dict[str, CachedStore] = {}
        self._cache_budget = cache if cache is not None and cache.max_bytes > 0 else None
        self.changelog_offsets: dict[TopicPartition, int] = {}
        self.pending: list[PendingWrite] = []
        #: Changelog records handed to the producer and not acknowledged yet (a failed send is
        #: never taken off: the stores then hold a write the changelog may lack).
        self.unacked = 0
        #: The timestamp of the input record being processed (set by the task set).
        self.record_timestamp: int | None = None
        #: Per cached store, the timestamp of each key's last write not yet written out.
        self._stamps: dict[str, dict[bytes, int | None]] = {}
        #: Active task: its restore up to the changelog ends (written only by its own methods).
        self.restore = RestoreProgress()
        self.applied_records = 0
        self.closed = False
        #: Its partitions were lost (:meth:`TaskSet.fence`): it processes, sends and
        #: checkpoints nothing more, and the next reconcile closes its stores.
        self.lost = False

    @property
    def id(self) -> TaskId:
        return self.info.id

    @property
    def is_active(self) -> bool:
        return self.role is Role.ACTIVE

    @property
    def restoring(self) -> bool:
        return self.role is Role.ACTIVE and self.restore.target is not None

    @property
    def restore_target(self) -> Mapping[TopicPartition, int] | None:
        """Changelog end offsets to restore up to before processing; None when running."""
        return self.restore.target

    @property
    def restored_records(self) -> int:
        return self.restore.records

    @property
    def restore_started_ms(self) -> int | None:
        return self.restore.started_ms

    @property
    def changelog_partitions(self) -> tuple[TopicPartition, ...]:
        return tuple(sorted(self.store_of))

    # -- opening -----------------------------------------------------------------------------

    def open(self, end_offsets: Mapping[TopicPartition, int]) -> None:
        """Open every store; start from the checkpoint, or wipe the task's changelogged stores
        (with a warning) when the checkpoint is missing, unreadable, or ahead of the changelog end."""
        checkpoint = self._read_checkpoint()
        # Only changelogged stores are wiped: an unlogged store's files are its only copy.
        on_disk = {n for n in self.changelog_of if self.directory.store_path(self.id, n).exists()}
        if checkpoint is None and on_disk:
            log.warning("task %s: local state without a checkpoint; wiping it and restoring", self.id)
            self._wipe_logged()
        elif checkpoint is not None:
            ahead = [
                f"{tp} at {off} > end {end_offsets[tp]}"
                for tp, off in sorted(checkpoint.items())
                if tp in self.store_of and tp in end_offsets and off > end_offsets[tp]
            ]
            if ahead:
                log.warning(
                    "task %s: checkpoint is newer than the changelog (%s); wiping it and restoring",
                    self.id,
                    ", ".join(ahead),
                )
                self._wipe_logged()
                checkpoint = None
        specs = {spec.name: spec for spec in self.info.stores}
        for name in self.info.store_names:
            sink = self._sink_for(name) if name in self.changelog_of else None
            store = KeyValueStore(self.directory.store_path(self.id, name), name=name, sink=sink)
            self.stores[name] = store
            key_serde, value_serde = self._serdes.get(name, (BYTES, BYTES))
            spec = specs.get(name)
            if spec is not None and spec.is_window:
                self._open_window(spec, store, key_serde, value_serde)
            elif self._cache_budget is None:
                self.typed[name] = TypedStore(store, key_serde, value_serde)
            else:
                cached = self.caches[name] = CachedStore(store, self._cache_budget)
                stamps = self._stamps.setdefault(name, {})
                self.typed[name] = TypedStore(_Stamped(cached, stamps, self), key_serde, value_serde)
        # A checkpointed offset counts only for a store whose database was still there.
        held = checkpoint or {}
        self.changelog_offsets = {
            tp: held.get(tp, 0) if name in on_disk else 0 for tp, name in self.store_of.items()
        }

    def _open_window(
        self, spec: StateStore, store: KeyValueStore, key_serde: Serde[Any], value_serde: Serde[Any]
    ) -> None:
        """A window store over ``store``, behind the record cache unless it keeps duplicates
        (as Kafka Streams, which turns caching off for those)."""
        assert spec.window_size_ms is not None
        assert spec.retention_ms is not None
        front: ByteStore = store
        flush = None
        if self._cache_budget is not None and not spec.retain_duplicates:
            cached = self.caches[spec.name] = CachedStore(store, self._cache_budget)
            front, flush = _Stamped(cached, self._stamps.setdefault(spec.name, {}), self), cached.flush
        window = WindowStore(
            store,
            size_ms=spec.window_size_ms,
            retention_ms=spec.retention_ms,
            retain_duplicates=spec.retain_duplicates,
            front=front,
            flush=flush,
        )
        self.window_stores[spec.name] = window
        self.windows[spec.name] = TypedWindowStore(window, key_serde, value_serde)

    def _wipe_logged(self) -> None:
        """Remove the changelogged stores and the checkpoint (they are restored from 0)."""
        for name in sorted(self.changelog_of):
            self.directory.wipe_store(self.id, name)
        self.directory.checkpoint_path(self.id).unlink(missing_ok=True)

    def _read_checkpoint(self) -> dict[TopicPartition, int] | None:
        try:
            return self.directory.read_checkpoint(self.id)
        except CheckpointError as exc:
            log.warning("task %s: %s", self.id, exc)
            return None

    def _sink_for(self, name: str) -> Any:
        tp = self.changelog_of[name]
        stamps = self._stamps.setdefault(name, {})

        def sink(key: bytes, value: bytes | None) -> None:
            stamped = stamps.pop(key, self.record_timestamp) if stamps else self.record_timestamp
            if self.role is Role.ACTIVE:
                self.pending.append((tp, key, value, stamped))

        return sink

    # -- restore / standby -------------------------------------------------------------------

    def apply_changelog(
        self, tp: TopicPartition, records: Iterable[tuple[bytes, bytes | None]], next_offset: int
    ) -> int:
        """Apply changelog records to the store of ``tp`` (no changelog writes) and move the
        position to ``next_offset``. Returns how many records were applied."""
        name = self.store_of[tp]
        cache = self.caches.get(name)
        if cache is not None and len(cache):
            cache.invalidate()  # restore and standby reads write around the cache
            self._stamps[name].clear()
        window = self.window_stores.get(name)  # skips records older than its retention
        applied = (window or self.stores[name]).restore_batch(records)
        self.changelog_offsets[tp] = max(self.changelog_offsets.get(tp, 0), next_offset)
        self.applied_records += applied
        if self.restoring:
            self.restore.count(applied)
        return applied

    def restore_done(self) -> bool:
        """Whether a restoring active task reached the end offsets captured when it started."""
        return self.restore.done(self.changelog_offsets)

    def lag(self, end_offsets: Mapping[TopicPartition, int]) -> int | None:
        """Records the local stores are behind the changelog ends; None if an end is unknown."""
        total = 0
        for tp in self.store_of:
            if tp not in end_offsets:
                return None
            total += max(0, end_offsets[tp] - self.changelog_offsets.get(tp, 0))
        return total

    def offset_sum(self) -> int:
        return sum(self.changelog_offsets.values())

    # -- processing --------------------------------------------------------------------------

    def flush_caches(self) -> int:
        """Write every store's dirty cached entries to the store (and so to ``pending``): on
        commit, before the changelog records are sent. Returns how many entries were written."""
        return sum(cache.flush() for cache in self.caches.values())

    def take_pending(self) -> list[PendingWrite]:
        out, self.pending = self.pending, []
        return out

    def acknowledged(self, tp: TopicPartition, offset: int, count: int = 0) -> None:
        """The broker stored our changelog records up to ``offset`` (``count`` of them)."""
        self.unacked -= count
        if offset + 1 > self.changelog_offsets.get(tp, 0):
            self.changelog_offsets[tp] = offset + 1

    def settled(self) -> bool:
        """Whether the stores hold nothing their changelogs lack: every write the stores took
        was handed to the producer and acknowledged (a dirty cached entry is not in the store;
        a dirty close drops it). Then ``changelog_offsets`` describe the stores exactly."""
        return not self.pending and self.unacked == 0

    def checkpoint(self) -> None:
        """Flush the stores and record the changelog offsets they hold (commit / clean close)."""
        if self.closed or not self.stores:
            return
        self.flush_caches()
        for store in self.stores.values():
            store.flush()
        if self.store_of:
            self.directory.write_checkpoint(self.id, dict(self.changelog_offsets))

    def close(self, *, clean: bool, keep_state: bool = False) -> None:
        """Close the stores; a clean close writes the checkpoint first (cached entries written
        out). A dirty close with ``keep_state`` (a :meth:`settled` task) drops the cached
        entries and checkpoints the acknowledged changelog offsets, which the stores match."""
        if self.closed:
            return
        try:
            if clean:
                self.checkpoint()
        finally:  # a failed checkpoint must not leave RocksDB's lock held
            for cache in self.caches.values():
                cache.detach()  # a dirty close drops unflushed entries, as it drops ``pending``
            try:
                if not clean and keep_state and self.store_of:
                    for store in self.stores.values():
                        store.flush()
                    self.directory.write_checkpoint(self.id, dict(self.changelog_offsets))
            finally:
                for store in self.stores.values():
                    store.close()
                self.closed = True


class _Stamped:
    """A cached store that notes the timestamp of each key's write (the task's current record),
    for the changelog record the cache writes later."""

    __slots__ = ("_stamps", "_store", "_task")

    def __init__(self, store: ByteStore, stamps: dict[bytes, int | None], task: StreamTask) -> None:
        self._store, self._stamps, self._task = store, stamps, task

    @property
    def name(self) -> str:
        return self._store.name

    def get(self, key: bytes) -> bytes | None:
        return self._store.get(key)

    def put(self, key: bytes, value: bytes) -> None:
        self._stamps[key] = self._task.record_timestamp
        self._store.put(key, value)

    def delete(self, key: bytes) -> None:
        self._stamps[key] = self._task.record_timestamp
        self._store.delete(key)

    def __contains__(self, key: object) -> bool:
        return key in self._store

    def items(self) -> Iterator[tuple[bytes, bytes]]:
        return self._store.items()

    def count(self) -> int:
        return self._store.count()
