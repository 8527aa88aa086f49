"""Reading a store across the tasks that have it, for the test driver."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from streamtasks.state import TypedStore
from topology.ids import TaskId

__all__ = ["StoreView"]


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
