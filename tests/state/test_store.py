from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from streamtasks.errors import StateError, StoreClosedError
from streamtasks.state import INT64, JSON, STRING, KeyValueStore, TypedStore


class Recorder:
    def __init__(self) -> None:
        self.records: list[tuple[bytes, bytes | None]] = []

    def __call__(self, key: bytes, value: bytes | None) -> None:
        self.records.append((key, value))


@pytest.fixture
def store(tmp_path: Path) -> Iterator[KeyValueStore]:
    s = KeyValueStore(tmp_path / "rocksdb" / "counts", name="counts")
    yield s
    s.close()


def test_put_get_delete_contains(store: KeyValueStore) -> None:
    assert store.get(b"k") is None
    assert b"k" not in store
    store.put(b"k", b"v1")
    store.put(b"k", b"v2")
    store.put(b"empty", b"")
    assert store.get(b"k") == b"v2"
    assert store.get(b"empty") == b""
    assert b"empty" in store
    store.delete(b"k")
    store.delete(b"never-there")
    assert store.get(b"k") is None
    assert store.count() == 1


def test_identity_properties(tmp_path: Path) -> None:
    with KeyValueStore(tmp_path / "s", name="s") as store:
        assert (store.name, store.path, store.closed) == ("s", tmp_path / "s", False)
        assert "open" in repr(store)
    assert store.closed
    assert "closed" in repr(store)


def test_items_in_unsigned_byte_order(store: KeyValueStore) -> None:
    for key in (b"b", b"\xff", b"a", b"\x00", b"ab", b""):
        store.put(key, key + b"!")
    assert [k for k, _ in store.items()] == [b"", b"\x00", b"a", b"ab", b"b", b"\xff"]
    assert dict(store.items())[b"ab"] == b"ab!"
    assert store.count() == 6
    assert store.approximate_count() >= 0


def test_items_sees_the_store_as_of_the_call(store: KeyValueStore) -> None:
    store.put(b"a", b"1")
    entries = store.items()
    store.put(b"b", b"2")
    assert list(entries) == [(b"a", b"1")]
    assert list(entries) == []


def test_sink_receives_writes_and_tombstones_in_order(tmp_path: Path) -> None:
    sink = Recorder()
    with KeyValueStore(tmp_path / "s", name="s", sink=sink) as store:
        store.put(b"a", b"1")
        store.delete(b"a")
        store.delete(b"missing")
        store.put(b"b", b"")
    assert sink.records == [(b"a", b"1"), (b"a", None), (b"missing", None), (b"b", b"")]


def test_write_is_applied_before_the_sink_runs(tmp_path: Path) -> None:
    seen: list[bytes | None] = []
    stores: list[KeyValueStore] = []

    def sink(key: bytes, value: bytes | None) -> None:
        seen.append(stores[0].get(key))
        raise RuntimeError("changelog unavailable")

    with KeyValueStore(tmp_path / "s", name="s", sink=sink) as kv:
        stores.append(kv)
        with pytest.raises(RuntimeError, match="changelog unavailable"):
            kv.put(b"k", b"v")
        assert seen == [b"v"]
        assert kv.get(b"k") == b"v"


def test_restore_batch_applies_puts_and_deletes_without_calling_the_sink(tmp_path: Path) -> None:
    sink = Recorder()
    with KeyValueStore(tmp_path / "s", name="s", sink=sink) as store:
        store.put(b"gone", b"x")
        sink.records.clear()
        records = [(b"a", b"1"), (b"b", b"2"), (b"a", None), (b"gone", None), (b"c", b"3")]
        assert store.restore_batch(records) == 5
        assert list(store.items()) == [(b"b", b"2"), (b"c", b"3")]
        assert store.restore_batch([]) == 0
        assert store.restore_batch(iter([(b"d", b"4")])) == 1
    assert sink.records == []


def test_restore_batch_with_a_bad_record_writes_nothing(store: KeyValueStore) -> None:
    with pytest.raises(TypeError, match="store value \\(or None\\) must be bytes, got str"):
        store.restore_batch([(b"a", b"1"), (b"b", "2")])  # type: ignore[list-item]
    assert store.count() == 0


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda s: s.get("k"), "store key must be bytes, got str"),
        (lambda s: s.put("k", b"v"), "store key must be bytes, got str"),
        (lambda s: s.put(b"k", 1), "store value must be bytes, got int"),
        (lambda s: s.put(b"k", None), "store value must be bytes, got NoneType"),
        (lambda s: s.put(bytearray(b"k"), b"v"), "store key must be bytes, got bytearray"),
        (lambda s: s.delete(1), "store key must be bytes, got int"),
        (lambda s: 1 in s, "store key must be bytes, got int"),
        (lambda s: s.restore_batch([("k", None)]), "store key must be bytes, got str"),
    ],
)
def test_non_bytes_keys_and_values_raise_type_error(
    store: KeyValueStore, call: Callable[[KeyValueStore], object], match: str
) -> None:
    with pytest.raises(TypeError, match=match):
        call(store)
    assert store.count() == 0


def test_closed_store_raises_and_close_is_idempotent(tmp_path: Path) -> None:
    store = KeyValueStore(tmp_path / "s", name="s")
    store.close()
    store.close()
    for call in (
        lambda: store.get(b"k"),
        lambda: store.put(b"k", b"v"),
        lambda: store.delete(b"k"),
        lambda: b"k" in store,
        store.items,
        store.count,
        store.approximate_count,
        lambda: store.restore_batch([]),
        store.flush,
    ):
        with pytest.raises(StoreClosedError, match=f"store 's' at {tmp_path / 's'} is closed"):
            call()


def test_closing_ends_open_iterators_and_releases_the_database(tmp_path: Path) -> None:
    path = tmp_path / "s"
    store = KeyValueStore(path, name="s")
    store.restore_batch([(b"a", b"1"), (b"b", b"2")])
    entries = store.items()
    assert next(entries) == (b"a", b"1")
    store.close()
    with pytest.raises(StoreClosedError, match="closed while iterating"):
        next(entries)
    # Reopening proves the half-read iterator no longer holds RocksDB's lock.
    with KeyValueStore(path, name="s") as again:
        assert again.get(b"b") == b"2"


def test_reopen_keeps_the_data(tmp_path: Path) -> None:
    path = tmp_path / "task" / "rocksdb" / "s"
    with KeyValueStore(path, name="s") as store:
        store.put(b"k", b"v")
        store.flush()
    with KeyValueStore(path, name="s") as store:
        assert list(store.items()) == [(b"k", b"v")]


def test_reopen_keeps_unflushed_data(tmp_path: Path) -> None:
    with KeyValueStore(tmp_path / "s", name="s") as store:
        store.put(b"k", b"v")
    with KeyValueStore(tmp_path / "s", name="s") as store:
        assert store.get(b"k") == b"v"


def test_opening_an_open_database_twice_is_a_state_error(store: KeyValueStore) -> None:
    with pytest.raises(StateError, match="cannot open store 'counts'"):
        KeyValueStore(store.path, name="counts")


def test_store_needs_a_name(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="non-empty name"):
        KeyValueStore(tmp_path / "s", name="")


def test_typed_store_round_trips_python_values(tmp_path: Path) -> None:
    sink = Recorder()
    with KeyValueStore(tmp_path / "s", name="s", sink=sink) as raw:
        typed = TypedStore(raw, STRING, JSON)
        typed.put("b", {"n": 2})
        typed.put("a", [1, "x"])
        assert typed.get("b") == {"n": 2}
        assert typed.get("zz") is None
        assert "a" in typed
        assert list(typed.items()) == [("a", [1, "x"]), ("b", {"n": 2})]
        typed.delete("a")
        assert "a" not in typed
        assert typed.count() == 1
        assert (typed.name, typed.store) == ("s", raw)
        assert "STRING" in repr(typed)
    assert sink.records == [(b"b", b'{"n":2}'), (b"a", b'[1,"x"]'), (b"a", None)]


def test_typed_store_orders_by_serialized_key(tmp_path: Path) -> None:
    with KeyValueStore(tmp_path / "s", name="s") as raw:
        typed = TypedStore(raw, INT64, INT64)
        for n in (3, -1, 0, 2**40):
            typed.put(n, n * 2)
        # Big-endian two's complement: negative keys sort after every non-negative one.
        assert [k for k, _ in typed.items()] == [0, 3, 2**40, -1]


def test_typed_store_surfaces_serde_errors(tmp_path: Path) -> None:
    with KeyValueStore(tmp_path / "s", name="s") as raw:
        raw.put(b"k", b"not json")
        typed = TypedStore(raw, STRING, JSON)
        with pytest.raises(StateError, match="serde JSON"):
            typed.get("k")
