"""The window store: Kafka's windowed key layout, range fetches, retention, restore, the cache."""

from __future__ import annotations

import struct
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamtasks.errors import StateError
from streamtasks.state import (
    INT64,
    STRING,
    CacheBudget,
    CachedStore,
    KeyValueStore,
    TypedWindowStore,
    WindowStore,
    split_window_key,
    tumbling_window_start,
    window_key,
)
from streamtasks.state.window import segment_interval
from tests.state.test_store import Recorder

MINUTE = 60_000


@pytest.fixture
def db(tmp_path: Path) -> Iterator[KeyValueStore]:
    s = KeyValueStore(tmp_path / "rocksdb" / "clicks", name="clicks")
    yield s
    s.close()


# -- the layout ---------------------------------------------------------------------------------


def test_layout_is_kafkas_store_key() -> None:
    # WindowKeySchema.toStoreKeyBinary: key bytes, window start as a big-endian long, seqnum as
    # a big-endian int
    stored = window_key(b"user-1", 1_700_000_040_000, 3)
    assert stored == b"user-1" + struct.pack(">q", 1_700_000_040_000) + struct.pack(">i", 3)
    assert stored.hex()[-24:] == "0000018bcfe60440" + "00000003"
    assert split_window_key(stored) == (b"user-1", 1_700_000_040_000, 3)
    assert split_window_key(window_key(b"", 0)) == (b"", 0, 0)


def test_layout_refuses_what_it_cannot_order() -> None:
    with pytest.raises(ValueError, match="window start"):
        window_key(b"k", -1)
    with pytest.raises(ValueError, match="sequence number"):
        window_key(b"k", 0, 2**31)
    with pytest.raises(TypeError, match="bytes"):
        window_key("k", 0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at least 12 bytes"):
        split_window_key(b"short")


@given(key=st.binary(max_size=40), start=st.integers(0, 2**63 - 1), seq=st.integers(0, 2**31 - 1))
def test_layout_round_trips(key: bytes, start: int, seq: int) -> None:
    assert split_window_key(window_key(key, start, seq)) == (key, start, seq)


@given(
    key=st.binary(max_size=16),
    a=st.tuples(st.integers(0, 2**63 - 1), st.integers(0, 2**31 - 1)),
    b=st.tuples(st.integers(0, 2**63 - 1), st.integers(0, 2**31 - 1)),
)
def test_one_keys_windows_sort_by_start_then_seqnum(
    key: bytes, a: tuple[int, int], b: tuple[int, int]
) -> None:
    assert (window_key(key, *a) < window_key(key, *b)) == (a < b)


def test_tumbling_window_start() -> None:
    assert tumbling_window_start(0, MINUTE) == 0
    assert tumbling_window_start(59_999, MINUTE) == 0
    assert tumbling_window_start(60_000, MINUTE) == 60_000
    assert tumbling_window_start(1_700_000_059_123, MINUTE) == 1_700_000_040_000
    with pytest.raises(ValueError, match="positive"):
        tumbling_window_start(5, 0)
    with pytest.raises(ValueError, match=">= 0"):
        tumbling_window_start(-5, MINUTE)


def test_segment_interval_is_kafkas_default() -> None:
    assert segment_interval(10 * MINUTE) == 5 * MINUTE
    assert segment_interval(MINUTE) == MINUTE  # at least a minute


# -- reads and writes -----------------------------------------------------------------------------


def test_put_get_and_fetch_in_window_order(db: KeyValueStore) -> None:
    ws = WindowStore(db, size_ms=MINUTE, retention_ms=60 * MINUTE)
    for start in (3 * MINUTE, 0, MINUTE):
        ws.put(b"a", f"a@{start}".encode(), start)
    ws.put(b"b", b"b@0", 0)
    ws.put(b"a", b"a@60000 again", MINUTE)  # same window, no duplicates: replaces
    assert ws.get(b"a", MINUTE) == b"a@60000 again"
    assert ws.get(b"a", 2 * MINUTE) is None
    assert list(ws.fetch(b"a", 0, 3 * MINUTE)) == [
        (0, b"a@0"),
        (MINUTE, b"a@60000 again"),
        (3 * MINUTE, b"a@180000"),
    ]
    assert list(ws.fetch(b"a", 1, 3 * MINUTE - 1)) == [(MINUTE, b"a@60000 again")]
    assert list(ws.fetch(b"a", 5, 4)) == []
    assert list(ws.fetch_all(0, MINUTE)) == [
        (b"a", 0, b"a@0"),
        (b"a", MINUTE, b"a@60000 again"),
        (b"b", 0, b"b@0"),
    ]
    ws.put(b"a", None, 0)  # a delete
    assert [start for key, start, _ in ws.all() if key == b"a"] == [MINUTE, 3 * MINUTE]


def test_fetch_does_not_mix_in_longer_keys_with_the_same_prefix(db: KeyValueStore) -> None:
    ws = WindowStore(db, size_ms=MINUTE, retention_ms=60 * MINUTE)
    ws.put(b"a", b"1", MINUTE)
    # b"a" + 8 bytes of start sorts between a's windows; Kafka's hasNextCondition filters it too
    ws.put(b"a" + struct.pack(">q", 0), b"impostor", 0)
    ws.put(b"a\x00", b"impostor", MINUTE)
    assert list(ws.fetch(b"a", 0, 10 * MINUTE)) == [(MINUTE, b"1")]


def test_duplicates_get_sequence_numbers_and_null_puts_are_ignored(db: KeyValueStore) -> None:
    sink = Recorder()
    db = KeyValueStore(db.path.parent / "joins", name="joins", sink=sink)
    try:
        ws = WindowStore(db, size_ms=MINUTE, retention_ms=MINUTE, retain_duplicates=True)
        ws.put(b"k", b"x", 0)
        ws.put(b"k", b"x", 0)
        ws.put(b"k", None, 0)
        assert list(ws.fetch(b"k", 0, 0)) == [(0, b"x"), (0, b"x")]
        assert [split_window_key(k) for k, _ in sink.records] == [(b"k", 0, 1), (b"k", 0, 2)]
        assert ws.get(b"k", 0) is None  # seqnum 0 is never written with duplicates (as Kafka)
    finally:
        db.close()


class Model:
    """What a window store must return: every put kept, expired ones dropped by Kafka's rule."""

    def __init__(self, retention: int) -> None:
        self.retention = retention
        self.observed = -1
        self.rows: dict[tuple[bytes, int], bytes] = {}

    def put(self, key: bytes, value: bytes | None, start: int) -> None:
        self.observed = max(self.observed, start)
        if start <= self.observed - self.retention:
            return
        if value is None:
            self.rows.pop((key, start), None)
        else:
            self.rows[(key, start)] = value

    def live(self) -> list[tuple[bytes, int, bytes]]:
        return sorted((k, s, v) for (k, s), v in self.rows.items() if s > self.observed - self.retention)


writes = st.lists(
    st.tuples(
        st.sampled_from([b"a", b"ab", b"b", b""]),
        st.one_of(st.none(), st.binary(min_size=1, max_size=3)),
        st.integers(0, 40).map(lambda n: n * 30_000),
    ),
    max_size=40,
)


@settings(max_examples=60, deadline=None)
@given(rows=writes, cached=st.booleans())
def test_reads_match_a_model_with_retention(
    rows: list[tuple[bytes, bytes | None, int]], cached: bool
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        db = KeyValueStore(Path(tmp) / "w", name="w")
        try:
            cache = CachedStore(db, CacheBudget(200)) if cached else None
            ws = WindowStore(
                db,
                size_ms=MINUTE,
                retention_ms=2 * MINUTE,
                front=cache,
                flush=None if cache is None else cache.flush,
            )
            model = Model(2 * MINUTE)
            for key, value, start in rows:
                ws.put(key, value, start)
                model.put(key, value, start)
            assert list(ws.all()) == model.live()
            live = {(k, s): v for k, s, v in model.live()}
            for key in (b"a", b"ab", b""):
                assert list(ws.fetch(key, 0, 10**9)) == [(s, v) for k, s, v in model.live() if k == key]
                for start in (0, 30_000, 600_000, 1_200_000):
                    assert ws.get(key, start) == live.get((key, start))
            assert list(ws.fetch_all(60_000, 600_000)) == [
                r for r in model.live() if 60_000 <= r[1] <= 600_000
            ]
        finally:
            db.close()


# -- retention ----------------------------------------------------------------------------------


def test_expired_puts_are_dropped_and_old_windows_purged(db: KeyValueStore) -> None:
    sink = Recorder()
    db = KeyValueStore(db.path.parent / "logged", name="logged", sink=sink)
    try:
        ws = WindowStore(db, size_ms=MINUTE, retention_ms=10 * MINUTE)
        for minute in range(0, 30):
            ws.put(b"k", str(minute).encode(), minute * MINUTE)
        # observed 29 min, retention 10: windows starting at or before 19 min are expired
        assert ws.observed_stream_time == 29 * MINUTE
        assert [s // MINUTE for s, _ in ws.fetch(b"k", 0, 10**9)] == list(range(20, 30))
        assert ws.get(b"k", 19 * MINUTE) is None
        ws.put(b"k", b"late", 19 * MINUTE)
        assert ws.expired_puts == 1
        assert len(sink.records) == 30  # the late put reached neither the store nor the changelog
        # purged every 5 minutes of expiry point (segment interval): at most ~15 windows stay on disk
        assert ws.purged >= 10
        assert db.count() <= 15
        assert all(v is not None for _, v in sink.records)  # purging writes no tombstones
    finally:
        db.close()


def test_restore_skips_expired_records_and_moves_stream_time(db: KeyValueStore) -> None:
    ws = WindowStore(db, size_ms=MINUTE, retention_ms=5 * MINUTE)
    changelog = [(window_key(b"k", m * MINUTE), str(m).encode()) for m in range(0, 12)]
    changelog.append((window_key(b"k", 3 * MINUTE), b"old again"))  # expired by then
    changelog.append((window_key(b"k", 11 * MINUTE), None))  # a tombstone
    applied = ws.restore_batch(changelog)
    assert ws.observed_stream_time == 11 * MINUTE
    assert [s // MINUTE for s, _ in ws.fetch(b"k", 0, 10**9)] == [7, 8, 9, 10]
    assert ws.restore_skipped > 0
    assert applied + ws.restore_skipped == len(changelog)
    with pytest.raises(StateError, match="bad changelog key"):
        ws.restore_batch([(b"tiny", b"v")])


def test_cached_writes_reach_the_changelog_on_flush_merged(db: KeyValueStore) -> None:
    sink = Recorder()
    db = KeyValueStore(db.path.parent / "cached", name="cached", sink=sink)
    try:
        cache = CachedStore(db, CacheBudget(10_000))
        ws = WindowStore(db, size_ms=MINUTE, retention_ms=10 * MINUTE, front=cache, flush=cache.flush)
        typed = TypedWindowStore(ws, STRING, INT64)
        for n in range(1, 6):
            typed.put("user-1", n, 0)
        assert typed.get("user-1", 0) == 5
        assert sink.records == []  # nothing flushed yet
        assert list(typed.fetch("user-1", 0, 0)) == [(0, 5)]  # a range read flushes first
        assert sink.records == [(window_key(b"user-1", 0), INT64.serialize(5))]
        assert list(typed.fetch_all(0, MINUTE)) == [("user-1", 0, 5)]
        assert list(typed.all()) == [("user-1", 0, 5)]
        typed.put("user-1", None, 0)
        assert typed.get("user-1", 0) is None
    finally:
        db.close()


def test_a_retention_shorter_than_the_window_is_refused(db: KeyValueStore) -> None:
    with pytest.raises(ValueError, match="retention_ms"):
        WindowStore(db, size_ms=MINUTE, retention_ms=MINUTE - 1)
    with pytest.raises(ValueError, match="size_ms"):
        WindowStore(db, size_ms=0, retention_ms=MINUTE)


def test_range_is_inclusive_and_ordered(db: KeyValueStore) -> None:
    for key in (b"a", b"b", b"ba", b"c"):
        db.put(key, key)
    assert [k for k, _ in db.range(b"b", b"ba")] == [b"b", b"ba"]
    assert [k for k, _ in db.range(b"a0", b"bz")] == [b"b", b"ba"]
    assert list(db.range(b"d", b"e")) == []
