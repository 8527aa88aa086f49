"""Reading a key-value or window store across the tasks that have it, for the test driver."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from streamtasks.state import TypedStore, TypedWindowStore
from topology.ids import TaskId

__all__ = ["StoreView", "WindowStoreView"]


class StoreView:
    """The store ``name`` of every task that has it: a key is read from the task that holds it
    (the first in task order, should two hold it); :meth:`items` lists every task's entries."""

    def __init__(self, name: str, stores: Mapping[TaskId, TypedStore[Any, Any]]) -> None:
        self.name = name
        self._stores = dict(sorted(stores.items()))

    def get(self, key: Any, default: Any = None) -> Any:
        for store in self._stores.values():
            value = store.get(key)
            if value is not None:
                return value
        return default

    def __getitem__(self, key: Any) -> Any:
        value = self.get(key)
        if value is None:
            raise KeyError(key)
        return value

    def __contains__(self, key: object) -> bool:
        return self.get(key) is not None

    def task_of(self, key: Any) -> TaskId | None:
        """The task whose store holds ``key`` (None: none does)."""
        return next((tid for tid, store in self._stores.items() if store.get(key) is not None), None)

    def items(self) -> Iterator[tuple[Any, Any]]:
        """Every entry of every task's store, task by task, each in its store's key order."""
        for store in self._stores.values():
            yield from store.items()

    def to_dict(self) -> dict[Any, Any]:
        return dict(self.items())

    def by_task(self) -> dict[TaskId, dict[Any, Any]]:
        return {tid: dict(store.items()) for tid, store in self._stores.items()}

    def __len__(self) -> int:
        return sum(store.count() for store in self._stores.values())

    def __repr__(self) -> str:
        return f"StoreView({self.name!r}, tasks={[str(t) for t in self._stores]})"


class WindowStoreView:
    """The window store ``name`` of every task that has it. A window is read from the first
    task (in task order) holding it; range reads go through every task's store, task by task,
    each in its store's order (by key bytes, then window start). Reads see the record cache."""

    def __init__(self, name: str, stores: Mapping[TaskId, TypedWindowStore[Any, Any]]) -> None:
        self.name = name
        self._stores = dict(sorted(stores.items()))

    def get(self, key: Any, window_start: int) -> Any:
        """The value of ``key``'s window starting at ``window_start`` (None: no task has it)."""
        return next((v for s in self._stores.values() if (v := s.get(key, window_start)) is not None), None)

    def fetch(self, key: Any, time_from: int, time_to: int) -> list[tuple[int, Any]]:
        """``(window_start, value)`` of ``key``'s windows starting in ``[time_from, time_to]``,
        by window start."""
        return sorted(
            (row for s in self._stores.values() for row in s.fetch(key, time_from, time_to)),
            key=lambda row: row[0],
        )

    def fetch_all(self, time_from: int, time_to: int) -> list[tuple[Any, int, Any]]:
        """``(key, window_start, value)`` of every window starting in ``[time_from, time_to]``."""
        return [row for s in self._stores.values() for row in s.fetch_all(time_from, time_to)]

    def all(self) -> list[tuple[Any, int, Any]]:
        """Every live window of every task."""
        return [row for s in self._stores.values() for row in s.all()]

    def by_task(self) -> dict[TaskId, list[tuple[Any, int, Any]]]:
        return {tid: list(s.all()) for tid, s in self._stores.items()}

    def task_of(self, key: Any, window_start: int) -> TaskId | None:
        """The task whose store holds ``key``'s window at ``window_start`` (None: none does)."""
        return next((t for t, s in self._stores.items() if s.get(key, window_start) is not None), None)

    def __len__(self) -> int:
        return len(self.all())

    def __repr__(self) -> str:
        return f"WindowStoreView({self.name!r}, tasks={[str(t) for t in self._stores]})"
