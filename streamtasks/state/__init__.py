"""Local state for stateful stream tasks: stores, checkpoints and the state directory.

On disk, per application and machine (see :mod:`streamtasks.state.directory`)::

    <state_dir>/<application_id>/
        .lock                          held by the one process using this directory
        streamtasks-process.json       {"version": 1, "process_id": "<uuid>"}, kept across restarts
        <subtopology>_<partition>/     one directory per task
            .checkpoint                Kafka's offset checkpoint format v0 (changelog offsets)
            rocksdb/<store>/           one RocksDB database (rocksdict, raw bytes) per store

:class:`WindowStore` (:mod:`streamtasks.state.window`) keeps values per key and time window
with a retention, in Kafka Streams' windowed key layout; :class:`TypedWindowStore` is its typed
view. :class:`KeyValueStore` is a store in bytes with an optional changelog sink; :class:`CachedStore`
is the record cache in front of one (:mod:`streamtasks.state.cache`); :class:`TypedStore`
puts :mod:`serdes <streamtasks.state.serdes>` in front of either. :class:`StateDirectory` owns the
layout, the lock, the process id and the offset sums the assignor needs. This layer does IO but
knows nothing of Kafka clients or the runtime; the runtime composes the pieces.
"""

from __future__ import annotations

from streamtasks.errors import (
    CheckpointError,
    SerdeError,
    StateDirectoryLockedError,
    StateError,
    StoreClosedError,
)
from streamtasks.state.cache import DEFAULT_CACHE_MAX_BYTES, CacheBudget, CachedStore
from streamtasks.state.checkpoint import CHECKPOINT_VERSION, read_checkpoint, write_checkpoint
from streamtasks.state.directory import StateDirectory
from streamtasks.state.serdes import BYTES, INT64, JSON, STRING, Serde
from streamtasks.state.store import ByteStore, ChangelogSink, KeyValueStore, TypedStore
from streamtasks.state.window import (
    TypedWindowStore,
    WindowStore,
    split_window_key,
    tumbling_window_start,
    window_key,
)

__all__ = [
    "BYTES",
    "CHECKPOINT_VERSION",
    "DEFAULT_CACHE_MAX_BYTES",
    "INT64",
    "JSON",
    "STRING",
    "ByteStore",
    "CacheBudget",
    "CachedStore",
    "ChangelogSink",
    "CheckpointError",
    "KeyValueStore",
    "SerdeError",
    "Serde",
    "StateDirectory",
    "StateDirectoryLockedError",
    "StateError",
    "StoreClosedError",
    "TypedStore",
    "TypedWindowStore",
    "WindowStore",
    "read_checkpoint",
    "split_window_key",
    "tumbling_window_start",
    "window_key",
    "write_checkpoint",
]
