"""Window stores: values kept per key and per time window, dropped once older than a retention.

The byte layout of a stored key is Kafka Streams' ``WindowKeySchema`` "store key"::

    <serialized key> <window start: int64 big-endian> <sequence number: int32 big-endian>

so the changelog of a :class:`WindowStore` holds the same keys as that of a Kafka Streams
``WindowStore<Bytes, byte[]>`` (``Stores.persistentWindowStore``; the *timestamped* stores the
DSL uses prefix each value with an 8-byte timestamp, which this store does not). The sequence
number is 0 unless duplicates are retained (``retain_duplicates=True``, Kafka's stream-stream
join stores): then every put gets the next number (``(n + 1) & 0x7FFFFFFF``, starting at 1),
so a put never replaces another and a put of ``None`` is ignored.

Locally the store is one RocksDB database (a :class:`~streamtasks.state.store.KeyValueStore`)
holding exactly the changelog's keys, sorted by key bytes then window start; Kafka Streams
spreads them over time segments. Retention follows Kafka Streams' rule: the store's *observed
stream time* is the largest window start it was given (by a put or by a restored changelog
record); a record whose window start is ``<= observed - retention_ms`` is expired: a put of one
is dropped (counted in :attr:`WindowStore.expired_puts`), a restored one is not applied, and
reads never return one. Expired records are deleted from the database (without changelog
tombstones: the windowed changelog topic drops them by its own ``retention.ms``, as Kafka
Streams configures it) each time the expiry point has moved by a segment interval since the
last purge (``segment_interval = max(retention_ms // 2, 60_000)``, Kafka's default; one walk of
the database each time), so a store holds at most about ``retention + segment_interval`` of
windows. Observed stream time starts unknown
(-1) when a store is opened, as in Kafka Streams.

Window starts must be ``>= 0`` (the big-endian layout orders negative numbers after positive
ones). :func:`tumbling_window_start` gives the start of the tumbling window of a timestamp.

Point reads and writes go through an optional front store (the record cache); range reads
(:meth:`WindowStore.fetch`, :meth:`~WindowStore.fetch_all`, :meth:`~WindowStore.all`) flush
it first and then read the database.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable, Iterable, Iterator
from typing import Final, Generic, TypeVar

from streamtasks.errors import StateError
from streamtasks.state.serdes import Serde
from streamtasks.state.store import ByteStore, KeyValueStore, _check_bytes

__all__ = [
    "SEQNUM_SIZE",
    "SUFFIX_SIZE",
    "TIMESTAMP_SIZE",
    "TypedWindowStore",
    "WindowStore",
    "segment_interval",
    "split_window_key",
    "tumbling_window_start",
    "window_key",
]

TIMESTAMP_SIZE: Final = 8
SEQNUM_SIZE: Final = 4
SUFFIX_SIZE: Final = TIMESTAMP_SIZE + SEQNUM_SIZE
_SUFFIX = struct.Struct(">qi")
_SEQNUM_MAX: Final = 0x7FFFFFFF
_INT64_MAX: Final = 2**63 - 1
#: Kafka Streams' smallest default segment interval (``RocksDbWindowBytesStoreSupplier``).
_MIN_SEGMENT_INTERVAL_MS: Final = 60_000

K = TypeVar("K")
V = TypeVar("V")

log = logging.getLogger(__name__)


def window_key(key: bytes, window_start: int, seqnum: int = 0) -> bytes:
    """The stored key of ``key``'s window starting at ``window_start`` (Kafka's layout)."""
    if not 0 <= window_start <= _INT64_MAX:
        raise ValueError(f"a window start must be in [0, 2**63), got {window_start}")
    if not 0 <= seqnum <= _SEQNUM_MAX:
        raise ValueError(f"a sequence number must be in [0, 2**31), got {seqnum}")
    return _check_bytes("key", key) + _SUFFIX.pack(window_start, seqnum)


def split_window_key(stored: bytes) -> tuple[bytes, int, int]:
    """``(key, window_start, seqnum)`` of a stored key; :class:`ValueError` if it is too short."""
    if len(stored) < SUFFIX_SIZE:
        raise ValueError(f"a window store key has at least {SUFFIX_SIZE} bytes, got {len(stored)}")
    start, seqnum = _SUFFIX.unpack_from(stored, len(stored) - SUFFIX_SIZE)
    return stored[:-SUFFIX_SIZE], int(start), int(seqnum)


def tumbling_window_start(timestamp: int, size_ms: int) -> int:
    """The start of the tumbling window of ``size_ms`` that ``timestamp`` (ms, ``>= 0``) falls in
    (Kafka's ``TimeWindows.ofSizeWithNoGrace(size)``: windows ``[n * size, (n + 1) * size)``)."""
    if size_ms <= 0:
        raise ValueError(f"a window size must be positive, got {size_ms}")
    if timestamp < 0:
        raise ValueError(f"a record timestamp must be >= 0 to fall in a window, got {timestamp}")
    return timestamp - timestamp % size_ms


def segment_interval(retention_ms: int) -> int:
    """How far the expiry point moves between two purges (Kafka Streams' default segment
    interval: half the retention, at least a minute)."""
    return max(retention_ms // 2, _MIN_SEGMENT_INTERVAL_MS)


class WindowStore:
    """One window store of one task, in bytes (see the module docstring).

    ``db`` is the database (its sink, if any, is the changelog); ``front`` is where point reads
    and writes go (a record cache in front of ``db``; ``db`` itself by default) and ``flush``
    writes what ``front`` holds back to ``db`` before a range read or a purge.
    """

    __slots__ = (
        "_db",
        "_flush",
        "_front",
        "_interval",
        "_purge_at",
        "_seqnum",
        "expired_puts",
        "observed_stream_time",
        "purged",
        "restore_skipped",
        "retain_duplicates",
        "retention_ms",
        "size_ms",
    )

    def __init__(
        self,
        db: KeyValueStore,
        *,
        size_ms: int,
        retention_ms: int,
        retain_duplicates: bool = False,
        front: ByteStore | None = None,
        flush: Callable[[], object] | None = None,
    ) -> None:
        if size_ms <= 0:
            raise ValueError(f"window store {db.name!r}: size_ms must be positive, got {size_ms}")
        if retention_ms < size_ms:
            raise ValueError(
                f"window store {db.name!r}: retention_ms ({retention_ms}) must be >= size_ms ({size_ms})"
            )
        self._db = db
        self._front: ByteStore = db if front is None else front
        self._flush = flush
        self.size_ms = size_ms
        self.retention_ms = retention_ms
        self.retain_duplicates = retain_duplicates
        self._seqnum = 0
        #: The largest window start put or restored; -1 until one is.
        self.observed_stream_time = -1
        #: The observed stream time at which the next purge is due: when the expiry point has
        #: moved a segment interval past the last purge's (the first once it reaches one).
        self._interval = segment_interval(retention_ms)
        self._purge_at = self._interval + retention_ms
        #: Counters: puts dropped as expired, restored records skipped as expired, records purged.
        self.expired_puts = 0
        self.restore_skipped = 0
        self.purged = 0

    @property
    def name(self) -> str:
        return self._db.name

    @property
    def db(self) -> KeyValueStore:
        return self._db

    def __repr__(self) -> str:
        return (
            f"WindowStore(name={self.name!r}, size_ms={self.size_ms}, retention_ms={self.retention_ms}, "
            f"retain_duplicates={self.retain_duplicates}, observed_stream_time={self.observed_stream_time})"
        )

    @property
    def expiry_point(self) -> int:
        """Window starts at or below this are expired (-1 - retention while nothing was seen)."""
        return self.observed_stream_time - self.retention_ms

    def _live(self, window_start: int) -> bool:
        return window_start > self.observed_stream_time - self.retention_ms

    # -- writes -----------------------------------------------------------------------------

    def put(self, key: bytes, value: bytes | None, window_start: int) -> None:
        """Store ``value`` for ``key``'s window starting at ``window_start`` (``None`` deletes
        it; ignored when duplicates are retained). A put into an expired window is dropped."""
        stored = window_key(key, window_start, 0)  # checks the key and the start first
        if value is not None:
            _check_bytes("value", value)
        self.observed_stream_time = max(self.observed_stream_time, window_start)
        if not self._live(window_start):
            self.expired_puts += 1
            log.debug("window store %r: dropped a put into expired window %d", self.name, window_start)
            return
        if self.retain_duplicates:
            if value is None:
                return
            self._seqnum = (self._seqnum + 1) & _SEQNUM_MAX
            stored = window_key(key, window_start, self._seqnum)
        if value is None:
            self._front.delete(stored)
        else:
            self._front.put(stored, value)
        self._maybe_purge()

    def restore_batch(self, records: Iterable[tuple[bytes, bytes | None]]) -> int:
        """Apply changelog records in order (no changelog writes), skipping expired ones as
        observed stream time moves with them. Returns how many were applied."""
        rows: list[tuple[bytes, bytes | None]] = []
        for stored, value in records:
            try:
                _, start, _ = split_window_key(_check_bytes("key", stored))
            except ValueError as exc:
                raise StateError(f"window store {self.name!r}: bad changelog key: {exc}") from None
            self.observed_stream_time = max(self.observed_stream_time, start)
            if self._live(start):
                rows.append((stored, value))
            else:
                self.restore_skipped += 1
        applied = self._db.restore_batch(rows)
        self._maybe_purge()
        return applied

    def _maybe_purge(self) -> None:
        if self.observed_stream_time < self._purge_at:
            return
        point = self.expiry_point
        self._purge_at = point + self._interval + self.retention_ms
        if self._flush is not None:
            self._flush()
        expired = [(stored, None) for stored, _ in self._db.items() if not self._live(_start_of(stored))]
        if expired:
            self.purged += self._db.restore_batch(expired)

    # -- reads ------------------------------------------------------------------------------

    def get(self, key: bytes, window_start: int) -> bytes | None:
        """The value of ``key``'s window starting at ``window_start`` (sequence number 0, so
        always ``None`` when duplicates are retained); ``None`` for an expired window."""
        stored = window_key(key, window_start, 0)
        if not self._live(window_start):
            return None
        return self._front.get(stored)

    def fetch(self, key: bytes, time_from: int, time_to: int) -> Iterator[tuple[int, bytes]]:
        """``(window_start, value)`` of ``key``'s live windows starting in
        ``[time_from, time_to]``, by window start (then sequence number)."""
        low = max(time_from, self.expiry_point + 1, 0)
        if low > time_to:
            return
        if self._flush is not None:
            self._flush()
        upper = window_key(key, time_to, _SEQNUM_MAX)
        for stored, value in self._db.range(window_key(key, low, 0), upper):
            found, start, _ = split_window_key(stored)
            # a longer key that starts with ``key`` can sort inside the range (Kafka's
            # HasNextCondition filters the same way)
            if found == key and low <= start <= time_to:
                yield start, value

    def fetch_all(self, time_from: int, time_to: int) -> Iterator[tuple[bytes, int, bytes]]:
        """``(key, window_start, value)`` of every live window starting in ``[time_from,
        time_to]``, by key bytes then window start (walks the whole store)."""
        low = max(time_from, self.expiry_point + 1)
        for key, start, value in self.all():
            if low <= start <= time_to:
                yield key, start, value

    def all(self) -> Iterator[tuple[bytes, int, bytes]]:
        """``(key, window_start, value)`` of every live window, by key bytes then window start."""
        if self._flush is not None:
            self._flush()
        for stored, value in self._db.items():
            key, start, _ = split_window_key(stored)
            if self._live(start):
                yield key, start, value


def _start_of(stored: bytes) -> int:
    return split_window_key(stored)[1]


class TypedWindowStore(Generic[K, V]):
    """A :class:`WindowStore` seen through a key serde and a value serde: what processors get
    from ``ctx.window_store(name)``."""

    __slots__ = ("_key_serde", "_store", "_value_serde")

    def __init__(self, store: WindowStore, key_serde: Serde[K], value_serde: Serde[V]) -> None:
        self._store = store
        self._key_serde = key_serde
        self._value_serde = value_serde

    @property
    def store(self) -> WindowStore:
        return self._store

    @property
    def name(self) -> str:
        return self._store.name

    @property
    def size_ms(self) -> int:
        return self._store.size_ms

    @property
    def retention_ms(self) -> int:
        return self._store.retention_ms

    def __repr__(self) -> str:
        return f"TypedWindowStore({self._store!r}, {self._key_serde!r}, {self._value_serde!r})"

    def put(self, key: K, value: V | None, window_start: int) -> None:
        data = None if value is None else self._value_serde.serialize(value)
        self._store.put(self._key_serde.serialize(key), data, window_start)

    def get(self, key: K, window_start: int) -> V | None:
        data = self._store.get(self._key_serde.serialize(key), window_start)
        return None if data is None else self._value_serde.deserialize(data)

    def fetch(self, key: K, time_from: int, time_to: int) -> Iterator[tuple[int, V]]:
        for start, data in self._store.fetch(self._key_serde.serialize(key), time_from, time_to):
            yield start, self._value_serde.deserialize(data)

    def fetch_all(self, time_from: int, time_to: int) -> Iterator[tuple[K, int, V]]:
        for key, start, data in self._store.fetch_all(time_from, time_to):
            yield self._key_serde.deserialize(key), start, self._value_serde.deserialize(data)

    def all(self) -> Iterator[tuple[K, int, V]]:
        for key, start, data in self._store.all():
            yield self._key_serde.deserialize(key), start, self._value_serde.deserialize(data)
