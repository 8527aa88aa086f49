"""Key-value stores: one RocksDB database (through rocksdict) per store per task.

:class:`KeyValueStore` is the byte-level store the runtime opens at
``state_dir/<application_id>/<subtopology>_<partition>/rocksdb/<store>/``. Every ``put`` and
``delete`` is handed to an optional :data:`ChangelogSink` after it is applied, so the runtime can
send it to the store's changelog topic (``None`` as the value is a tombstone);
:meth:`KeyValueStore.restore_batch` applies records read back from the changelog without
echoing them to the sink. :class:`TypedStore` is the view user processors get: the same store
with keys and values passed through :mod:`serdes <streamtasks.state.serdes>`.

A store belongs to one task and is used from one thread; it does no locking of its own.
RocksDB itself refuses to open a database that is already open (in this or another process).
"""

from __future__ import annotations

import itertools
import weakref
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from types import TracebackType
from typing import Generic, Protocol, TypeVar

import rocksdict

from streamtasks.errors import StateError, StoreClosedError
from streamtasks.state.serdes import Serde

__all__ = ["ByteStore", "ChangelogSink", "KeyValueStore", "TypedStore"]

ChangelogSink = Callable[[bytes, bytes | None], None]
"""Receives every write of a store: ``(key, value)``, or ``(key, None)`` for a delete."""

K = TypeVar("K")
V = TypeVar("V")


def _check_bytes(what: str, obj: object) -> bytes:
    if not isinstance(obj, bytes):
        raise TypeError(f"store {what} must be bytes, got {type(obj).__name__}")
    return obj


class KeyValueStore:
    """One store of one task: a RocksDB database at ``path`` holding raw bytes.

    ``sink``, if given, is called after every :meth:`put` and :meth:`delete` has been applied to
    the database (so a failing sink leaves the write in the store). Using the store after
    :meth:`close` raises :class:`StoreClosedError`.
    """

    __slots__ = ("__weakref__", "_closed", "_db", "_iterators", "_name", "_path", "_sink")

    def __init__(self, path: Path, *, name: str, sink: ChangelogSink | None = None) -> None:
        if not name:
            raise ValueError("a store needs a non-empty name")
        self._path = Path(path)
        self._name = name
        self._sink = sink
        self._closed = False
        self._iterators: weakref.WeakSet[_Entries] = weakref.WeakSet()
        self._path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._db = rocksdict.Rdict(str(self._path), rocksdict.Options(raw_mode=True))
        except Exception as exc:  # rocksdict raises bare Exception for IO and lock errors
            raise StateError(f"cannot open store {name!r} at {self._path}: {exc}") from exc

    # -- identity ---------------------------------------------------------------------------

    @property
    def name(self) -> str:
        return self._name

    @property
    def path(self) -> Path:
        return self._path

    @property
    def closed(self) -> bool:
        return self._closed

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"KeyValueStore(name={self._name!r}, path={str(self._path)!r}, {state})"

    def _open_db(self) -> rocksdict.Rdict:
        if self._closed:
            raise StoreClosedError(f"store {self._name!r} at {self._path} is closed")
        return self._db

    # -- reads ------------------------------------------------------------------------------

    def get(self, key: bytes) -> bytes | None:
        """The value stored under ``key``, or ``None``."""
        db = self._open_db()
        value = db.get(_check_bytes("key", key))
        if value is None:
            return None
        return _check_bytes("value read back", value)

    def __contains__(self, key: object) -> bool:
        db = self._open_db()
        return db.get(_check_bytes("key", key)) is not None

    def items(self) -> Iterator[tuple[bytes, bytes]]:
        """All entries in key order (unsigned lexicographic on the bytes, as RocksDB sorts).

        The iterator sees the store as it was when ``items()`` was called. Closing the store
        ends it: its next step raises :class:`StoreClosedError`.
        """
        entries = _Entries(self, self._open_db())
        self._iterators.add(entries)
        return entries

    def range(self, lower: bytes, upper: bytes) -> Iterator[tuple[bytes, bytes]]:
        """The entries with ``lower <= key <= upper``, in key order (a seek to ``lower``, then
        a scan; the window store's range reads). Like :meth:`items` otherwise."""
        _check_bytes("lower bound", lower)
        _check_bytes("upper bound", upper)
        entries = _Entries(self, self._open_db(), from_key=lower)
        self._iterators.add(entries)
        return itertools.takewhile(lambda row: row[0] <= upper, entries)

    def count(self) -> int:
        """The exact number of entries (walks the whole store)."""
        db = self._open_db()
        keys = db.keys()  # a rocksdict key iterator, not a dict view
        return sum(1 for _ in keys)

    def approximate_count(self) -> int:
        """RocksDB's cheap estimate of the number of entries (``rocksdb.estimate-num-keys``)."""
        estimate = self._open_db().property_int_value("rocksdb.estimate-num-keys")
        return int(estimate) if estimate is not None else 0

    # -- writes -----------------------------------------------------------------------------

    def put(self, key: bytes, value: bytes) -> None:
        """Store ``value`` under ``key``, then hand ``(key, value)`` to the sink."""
        db = self._open_db()
        _check_bytes("key", key)
        _check_bytes("value", value)
        db.put(key, value)
        if self._sink is not None:
            self._sink(key, value)

    def delete(self, key: bytes) -> None:
        """Remove ``key`` (present or not), then hand the tombstone ``(key, None)`` to the sink."""
        db = self._open_db()
        _check_bytes("key", key)
        db.delete(key)
        if self._sink is not None:
            self._sink(key, None)

    def write_all(self, records: Iterable[tuple[bytes, bytes | None]]) -> int:
        """Apply writes (``None`` deletes) in one atomic batch, then hand each to the sink in
        order: what the record cache calls when it flushes. Returns how many were written."""
        rows = list(records)
        applied = self.restore_batch(rows)
        sink = self._sink
        if sink is not None:
            for key, value in rows:
                sink(key, value)
        return applied

    def restore_batch(self, records: Iterable[tuple[bytes, bytes | None]]) -> int:
        """Apply changelog records (``None`` deletes) in one atomic write; the sink is not called.

        Returns how many records were applied. A record of the wrong type raises
        :class:`TypeError` before anything is written.
        """
        db = self._open_db()
        batch = rocksdict.WriteBatch(raw_mode=True)
        applied = 0
        for key, value in records:
            _check_bytes("key", key)
            if value is None:
                batch.delete(key)
            else:
                batch.put(key, _check_bytes("value (or None)", value))
            applied += 1
        if applied:
            db.write(batch)
        return applied

    # -- lifecycle --------------------------------------------------------------------------

    def flush(self) -> None:
        """Flush RocksDB's memtables to files on disk (call before writing a checkpoint)."""
        self._open_db().flush(wait=True)

    def close(self) -> None:
        """Close the database and release its lock; open iterators end. Idempotent."""
        if self._closed:
            return
        self._closed = True
        for entries in list(self._iterators):
            entries.release()
        self._iterators.clear()
        self._db.close()

    def __enter__(self) -> KeyValueStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class _Entries(Iterator[tuple[bytes, bytes]]):
    """The iterator :meth:`KeyValueStore.items` returns.

    rocksdict's iterator keeps the database (and its lock) alive after ``close()``, so the
    store drops every live one when it closes, and each drops its own when exhausted.
    """

    __slots__ = ("__weakref__", "_rows", "_store")

    def __init__(self, store: KeyValueStore, db: rocksdict.Rdict, *, from_key: bytes | None = None) -> None:
        self._store = store
        self._rows: Iterator[tuple[object, object]] | None = db.items(from_key=from_key)

    def release(self) -> None:
        self._rows = None

    def __iter__(self) -> _Entries:
        return self

    def __next__(self) -> tuple[bytes, bytes]:
        if self._store.closed:
            self._rows = None
            store = self._store
            raise StoreClosedError(f"store {store.name!r} at {store.path} was closed while iterating")
        if self._rows is None:
            raise StopIteration
        try:
            key, value = next(self._rows)
        except StopIteration:
            self._rows = None
            raise
        return _check_bytes("key read back", key), _check_bytes("value read back", value)


class ByteStore(Protocol):
    """What :class:`TypedStore` needs of the store under it: a :class:`KeyValueStore`, or a
    :class:`~streamtasks.state.cache.CachedStore` in front of one."""

    @property
    def name(self) -> str: ...

    def get(self, key: bytes) -> bytes | None: ...

    def put(self, key: bytes, value: bytes) -> None: ...

    def delete(self, key: bytes) -> None: ...

    def __contains__(self, key: object) -> bool: ...

    def items(self) -> Iterator[tuple[bytes, bytes]]: ...

    def count(self) -> int: ...


class TypedStore(Generic[K, V]):
    """A :class:`KeyValueStore` (or a record cache in front of one) seen through a key serde
    and a value serde.

    Entries iterate in the order of the *serialized* keys.
    """

    __slots__ = ("_key_serde", "_store", "_value_serde")

    def __init__(self, store: ByteStore, key_serde: Serde[K], value_serde: Serde[V]) -> None:
        self._store = store
        self._key_serde = key_serde
        self._value_serde = value_serde

    @property
    def store(self) -> ByteStore:
        return self._store

    @property
    def name(self) -> str:
        return self._store.name

    def __repr__(self) -> str:
        return f"TypedStore({self._store!r}, {self._key_serde!r}, {self._value_serde!r})"

    def get(self, key: K) -> V | None:
        data = self._store.get(self._key_serde.serialize(key))
        return None if data is None else self._value_serde.deserialize(data)

    def put(self, key: K, value: V) -> None:
        self._store.put(self._key_serde.serialize(key), self._value_serde.serialize(value))

    def delete(self, key: K) -> None:
        self._store.delete(self._key_serde.serialize(key))

    def __contains__(self, key: K) -> bool:
        return self._key_serde.serialize(key) in self._store

    def items(self) -> Iterator[tuple[K, V]]:
        for key, value in self._store.items():
            yield self._key_serde.deserialize(key), self._value_serde.deserialize(value)

    def count(self) -> int:
        return self._store.count()
