from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamtasks.state import CacheBudget, CachedStore, KeyValueStore, TypedStore
from streamtasks.state.cache import ENTRY_OVERHEAD
from streamtasks.state.serdes import INT64, STRING

Op = tuple[str, bytes, bytes]


class Recorder:
    def __init__(self) -> None:
        self.records: list[tuple[bytes, bytes | None]] = []

    def __call__(self, key: bytes, value: bytes | None) -> None:
        self.records.append((key, value))

    def last(self) -> dict[bytes, bytes | None]:
        return dict(self.records)


def last_present(log: Recorder) -> dict[bytes, bytes]:
    return {k: v for k, v in log.last().items() if v is not None}


keys = st.sampled_from([b"a", b"b", b"c", b"d", b"e", b"f", b"gg", b"hhh"])
ops = st.lists(
    st.tuples(st.sampled_from(["put", "put", "put", "delete", "get", "flush"]), keys, st.binary(max_size=40)),
    max_size=120,
)


def run(store: KeyValueStore | CachedStore, workload: list[Op]) -> list[bytes | None]:
    reads: list[bytes | None] = []
    for op, key, value in workload:
        if op == "put":
            store.put(key, value)
        elif op == "delete":
            store.delete(key)
        elif op == "get":
            reads.append(store.get(key))
        elif isinstance(store, CachedStore):
            store.flush()
    return reads


@given(workload=ops, budget=st.sampled_from([0, 1, 150, 400, 10_000]))
def test_cache_on_and_off_agree_per_key(workload: list[Op], budget: int) -> None:
    """Reads, the store after a flush and the changelog's last value per key are the same with
    the cache as without it, for any budget (a tiny one evicts on nearly every write)."""
    with tempfile.TemporaryDirectory() as tmp:
        plain_log, cached_log = Recorder(), Recorder()
        with (
            KeyValueStore(Path(tmp) / "plain", name="s", sink=plain_log) as plain,
            KeyValueStore(Path(tmp) / "cached", name="s", sink=cached_log) as under,
        ):
            cache = CachedStore(under, CacheBudget(budget))
            assert run(cache, workload) == run(plain, workload)
            cache.flush()
            assert dict(cache.items()) == dict(plain.items()) == dict(under.items())
            assert last_present(cached_log) == last_present(plain_log) == dict(plain.items())
            # the cache never writes a key more often than the plain store does
            assert len(cached_log.records) <= len(plain_log.records)


def test_updates_between_flushes_are_merged(tmp_path: Path) -> None:
    log = Recorder()
    with KeyValueStore(tmp_path / "s", name="counts", sink=log) as store:
        counts = TypedStore(CachedStore(store, CacheBudget(1 << 20)), STRING, INT64)
        for _ in range(1000):
            counts.put("k", (counts.get("k") or 0) + 1)
        counts.put("gone", 1)
        counts.delete("gone")
        assert log.records == []
        assert store.get(b"k") is None
        assert isinstance(counts.store, CachedStore)
        assert counts.store.flush() == 2
        assert log.records == [(b"k", INT64.serialize(1000)), (b"gone", None)]
        assert store.get(b"k") == INT64.serialize(1000)
        assert counts.store.flush() == 0  # clean now: nothing written twice


def test_eviction_under_a_tiny_budget_writes_dirty_entries_through(tmp_path: Path) -> None:
    log = Recorder()
    entry = 1 + 1 + ENTRY_OVERHEAD
    budget = CacheBudget(2 * entry)
    with KeyValueStore(tmp_path / "s", name="s", sink=log) as store:
        cache = CachedStore(store, budget)
        cache.put(b"a", b"1")
        cache.put(b"b", b"2")
        assert (len(cache), budget.used, log.records) == (2, 2 * entry, [])
        assert cache.get(b"a") == b"1"  # a is now the most recently used
        cache.put(b"c", b"3")  # over budget: b, least recently used, is evicted and written
        assert log.records == [(b"b", b"2")]
        assert store.get(b"b") == b"2"
        assert (len(cache), budget.used, cache.evictions) == (2, 2 * entry, 1)
        assert cache.get(b"b") == b"2"  # read through again: evicts a (dirty), written too
        assert log.records == [(b"b", b"2"), (b"a", b"1")]
        assert budget.used <= budget.max_bytes
        cache.flush()
        assert dict(store.items()) == {b"a": b"1", b"b": b"2", b"c": b"3"}


def test_one_budget_is_shared_by_caches_and_given_back_on_clear(tmp_path: Path) -> None:
    budget = CacheBudget(10_000)
    with KeyValueStore(tmp_path / "x", name="x") as x, KeyValueStore(tmp_path / "y", name="y") as y:
        cx, cy = CachedStore(x, budget), CachedStore(y, budget)
        cx.put(b"k", b"v")
        cy.put(b"kk", b"vv")
        assert budget.used == 2 * ENTRY_OVERHEAD + 6
        cx.put(b"k", b"longer")  # replacing an entry counts the difference only
        assert budget.used == 2 * ENTRY_OVERHEAD + 11
        cx.clear()
        assert budget.used == ENTRY_OVERHEAD + 4
        assert x.get(b"k") is None
        cy.invalidate()
        assert budget.used == 0
        assert y.get(b"kk") == b"vv"


def test_contains_count_and_types(tmp_path: Path) -> None:
    with KeyValueStore(tmp_path / "s", name="s") as store:
        cache = CachedStore(store, CacheBudget(10_000))
        cache.put(b"a", b"")
        store.put(b"b", b"x")
        assert b"a" in cache
        assert b"b" in cache
        assert b"c" not in cache
        cache.delete(b"b")
        assert b"b" not in cache
        assert store.get(b"b") == b"x"
        assert cache.count() == 1  # flushes first
        with pytest.raises(TypeError):
            cache.put("a", b"v")  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            cache.put(b"a", None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="cannot be negative"):
        CacheBudget(-1)


def test_an_idle_cache_gives_room_to_a_busy_one(tmp_path: Path) -> None:
    """Over the budget, entries are evicted from every cache in turn, not only the writer's."""
    budget = CacheBudget(4 * (2 + 1 + ENTRY_OVERHEAD))
    with KeyValueStore(tmp_path / "x", name="x") as x, KeyValueStore(tmp_path / "y", name="y") as y:
        idle, busy = CachedStore(x, budget), CachedStore(y, budget)
        idle.put(b"a0", b"1")
        idle.put(b"a1", b"1")
        for i in range(10):
            busy.put(f"b{i}".encode(), b"1")
        assert len(idle) == 0
        assert dict(x.items()) == {b"a0": b"1", b"a1": b"1"}  # written through on eviction
        assert budget.used <= budget.max_bytes
        busy.detach()
        assert budget.used == 0
