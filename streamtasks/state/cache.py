"""The record cache: Kafka Streams' caching layer (``statestore.cache.max.bytes``) for stores.

A :class:`CachedStore` sits in front of one :class:`~streamtasks.state.store.KeyValueStore`:

* **read-through**: a ``get`` that misses reads the store and keeps what it found;
* **write-back**: ``put`` and ``delete`` change only the cache and mark the key dirty; the
  store (and through its sink the changelog) sees a key's *last* value when the cache is
  :meth:`flushed <CachedStore.flush>` (the runtime does so on every commit, before it sends the
  changelog records and commits input offsets), when the key is evicted, and on a clean close.
  Updates of one key between two flushes are merged: only the last reaches the changelog.
* **bounded by bytes**: every cache of one application shares one :class:`CacheBudget`
  (Kafka's ``ThreadCache``); an entry counts ``len(key) + len(value) +`` :data:`ENTRY_OVERHEAD`.
  A write that takes the budget over its limit evicts least-recently-used entries, one per
  cache in turn (as Kafka's ``ThreadCache`` does), writing dirty ones through.

Reads never see anything but the last write: a cached value, a cached delete (``None``), or
the store. ``items()`` and ``count()`` flush first, then read the store. Restore and standby
reads do not go through the cache (they call the store's ``restore_batch``); a task whose store
is written that way drops its cache first (:meth:`CachedStore.invalidate`).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from typing import Final

from streamtasks.state.store import KeyValueStore
from streamtasks.state.store import _check_bytes as _check

__all__ = ["DEFAULT_CACHE_MAX_BYTES", "ENTRY_OVERHEAD", "CacheBudget", "CachedStore"]

#: Kafka Streams' default ``statestore.cache.max.bytes``: 10 MiB for the whole application.
DEFAULT_CACHE_MAX_BYTES: Final = 10 * 1024 * 1024
#: Bytes counted per entry on top of its key and value: the Python objects around them (two
#: bytes objects, the LRU order's link, the dirty set's slot), ~140 on CPython 3.11 as measured
#: by ``benchmarks/state.py`` row 6 (1,000,000 cached entries: +150 MB RSS over the store alone).
ENTRY_OVERHEAD: Final = 140

_MISS: Final = object()


class CacheBudget:
    """The byte limit every cache of one application shares, what they use of it, and the
    caches themselves: over the limit, it evicts one least-recently-used entry at a time from
    each cache in turn (Kafka's ``ThreadCache.maybeEvict``), so a store written often takes
    room from idle ones rather than only from itself."""

    __slots__ = ("_caches", "_turn", "max_bytes", "used")

    def __init__(self, max_bytes: int) -> None:
        if max_bytes < 0:
            raise ValueError(f"a cache budget cannot be negative, got {max_bytes}")
        self.max_bytes = max_bytes
        self.used = 0
        self._caches: list[CachedStore] = []
        self._turn = 0

    def attach(self, cache: CachedStore) -> None:
        self._caches.append(cache)

    def detach(self, cache: CachedStore) -> None:
        self._caches = [c for c in self._caches if c is not cache]

    def evict(self) -> None:
        """Evict, one entry per cache in turn, until the budget holds or every cache is empty."""
        caches = self._caches
        empty_in_a_row = 0
        while self.used > self.max_bytes and caches and empty_in_a_row < len(caches):
            self._turn = (self._turn + 1) % len(caches)
            empty_in_a_row = 0 if caches[self._turn].evict_one() else empty_in_a_row + 1

    def __repr__(self) -> str:
        return f"CacheBudget(max_bytes={self.max_bytes}, used={self.used})"


def _size(key: bytes, value: bytes | None) -> int:
    return len(key) + (0 if value is None else len(value)) + ENTRY_OVERHEAD


class CachedStore:
    """A write-back, read-through LRU cache over one store (see the module docstring).

    It offers the store's read and write methods (``get``, ``put``, ``delete``, ``in``,
    ``items``, ``count``), so a :class:`~streamtasks.state.store.TypedStore` can sit on it.
    """

    __slots__ = ("_budget", "_dirty", "_store", "_values", "evictions", "flushed", "hits", "misses")

    def __init__(self, store: KeyValueStore, budget: CacheBudget) -> None:
        self._store = store
        self._budget = budget
        #: key → value (``None``: deleted), least recently used first.
        self._values: OrderedDict[bytes, bytes | None] = OrderedDict()
        #: keys whose cached value the store does not have yet, in first-dirtied order.
        self._dirty: dict[bytes, None] = {}
        #: Entries written to the store by eviction, and by flushes (counters, for metrics).
        self.evictions = 0
        self.flushed = 0
        #: Reads the cache answered, and reads it passed to the store (metrics: the hit ratio).
        self.hits = 0
        self.misses = 0
        budget.attach(self)

    @property
    def store(self) -> KeyValueStore:
        return self._store

    @property
    def name(self) -> str:
        return self._store.name

    @property
    def dirty_count(self) -> int:
        return len(self._dirty)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"CachedStore({self._store!r}, entries={len(self._values)}, dirty={len(self._dirty)})"

    # -- reads ------------------------------------------------------------------------------

    def get(self, key: bytes) -> bytes | None:
        values = self._values
        value = values.get(key, _MISS)
        if value is not _MISS:
            self.hits += 1
            values.move_to_end(key)
            return value  # type: ignore[return-value]
        self.misses += 1
        found = self._store.get(key)
        if found is not None:
            values[key] = found
            self._grow(_size(key, found))
        return found

    def __contains__(self, key: object) -> bool:
        return self.get(_check("key", key)) is not None

    def items(self) -> Iterator[tuple[bytes, bytes]]:
        """Every entry in key order: the cache is flushed, then the store is read."""
        self.flush()
        return self._store.items()

    def count(self) -> int:
        self.flush()
        return self._store.count()

    # -- writes -----------------------------------------------------------------------------

    def put(self, key: bytes, value: bytes) -> None:
        self._write(_check("key", key), _check("value", value))

    def delete(self, key: bytes) -> None:
        self._write(_check("key", key), None)

    def _write(self, key: bytes, value: bytes | None) -> None:
        values = self._values
        old = values.get(key, _MISS)
        values[key] = value
        size = 0 if value is None else len(value)
        if old is _MISS:
            size += len(key) + ENTRY_OVERHEAD
        else:
            values.move_to_end(key)
            if old is not None:
                size -= len(old)  # type: ignore[arg-type]
        self._dirty[key] = None
        budget = self._budget
        budget.used += size
        if budget.used > budget.max_bytes:
            budget.evict()

    def _grow(self, delta: int) -> None:
        budget = self._budget
        budget.used += delta
        if budget.used > budget.max_bytes:
            budget.evict()

    def evict_one(self) -> bool:
        """Drop this cache's least-recently-used entry, writing it to the store first if it is
        dirty. False when the cache is empty."""
        if not self._values:
            return False
        key, value = self._values.popitem(last=False)
        self._budget.used -= _size(key, value)
        if key in self._dirty:
            del self._dirty[key]
            self.evictions += 1
            if value is None:
                self._store.delete(key)
            else:
                self._store.put(key, value)
        return True

    # -- flushing ---------------------------------------------------------------------------

    def flush(self) -> int:
        """Write every dirty entry to the store (one RocksDB batch; the store's sink gets each,
        in the order the keys were first dirtied). Entries stay cached, clean. Returns how many
        were written."""
        if not self._dirty:
            return 0
        values = self._values
        batch = [(key, values[key]) for key in self._dirty]
        self._dirty = {}
        self._store.write_all(batch)
        self.flushed += len(batch)
        return len(batch)

    def invalidate(self) -> None:
        """Flush, then drop every entry (the store is about to be written around the cache)."""
        self.flush()
        self.clear()

    def detach(self) -> None:
        """Drop every entry and leave the budget (the store is closing)."""
        self.clear()
        self._budget.detach(self)

    def clear(self) -> None:
        """Drop every entry, dirty ones included, and give their bytes back to the budget."""
        self._budget.used -= sum(_size(k, v) for k, v in self._values.items())
        self._values.clear()
        self._dirty = {}
