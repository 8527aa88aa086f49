"""Interactive queries: read an App's stores, locally or wherever the key lives.

* ``app.store(name).get(key)``: a read-only view of this process's copy of a store; the key's
  task must run here (active; or standby with ``allow_standby=True``).
* ``await app.query(store, key, allow_standby=False)``: the key's task is the one of the
  partition the producer's default partitioner gives the key's serialized bytes among the
  partitions of the store's subtopology (as Kafka Streams' ``queryMetadataForKey`` with the
  default partitioner); the query goes to the process hosting that task's active, found in the
  assignment metadata (:class:`streamtasks.streams.hosts.HostMetadata`: one implementation per
  group protocol), here or over HTTP (:mod:`streamtasks.app.query_http`). With
  ``allow_standby`` a standby answers when the active cannot; its answer carries its lag.

Never a stale value presented as current: a process answers only while its member is stable
(no rebalance of its own under way), the key's task runs here in the asked role, and (active)
is not restoring. Otherwise the answer is :class:`~streamtasks.errors.StoreUnavailableError`
(retryable, with a ``reason``; HTTP 503). The answer says which process gave it, whether it was
the active, and a standby's lag in changelog records.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from streamtasks.app.sending import partition_for
from streamtasks.app.tasks import TaskSet
from streamtasks.errors import StoreUnavailableError, UnknownStoreError
from streamtasks.state.serdes import BYTES, Serde
from streamtasks.streams.hosts import HostMetadata
from topology.ids import TaskId, TopicPartition
from topology.model import Topology

__all__ = ["QueryResult", "ReadOnlyStore", "StoreQueries"]


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class QueryResult:
    """A key's value as one process holds it. ``found``: whether the store has the key
    (``value`` is None otherwise). ``host``: the endpoint that answered (None: this process
    without an endpoint). ``active``: the answer is the active task's (current); a standby's
    is ``lag`` changelog records behind (None: its changelog end is unknown yet)."""

    store: str
    key: Any
    value: Any
    found: bool
    task: TaskId
    host: str | None
    active: bool
    lag: int | None = 0


class StoreQueries:
    """Local reads and the routing of queries (module docstring). ``stable()``: the app runs and
    its member holds its current assignment; ``hosts``: the assignment metadata (replace it
    for another group protocol); ``endpoint``: this process's ``application_server``."""

    def __init__(
        self,
        topology: Topology,
        tasks: TaskSet,
        serdes: Mapping[str, tuple[Serde[Any], Serde[Any]]],
        *,
        hosts: HostMetadata,
        stable: Callable[[], bool],
        endpoint: str | None,
        end_offsets: Callable[[], Mapping[TopicPartition, int]],
    ) -> None:
        self._tasks = tasks
        self._serdes = dict(serdes)
        self.hosts = hosts
        self.stable = stable
        self.endpoint = endpoint
        self._end_offsets = end_offsets
        self._subtopology = {store.name: sub.id for sub in topology.subtopologies for store in sub.stores}

    def serdes(self, store: str) -> tuple[Serde[Any], Serde[Any]]:
        """The store's key and value serdes (an :class:`UnknownStoreError` if no such store)."""
        if store not in self._subtopology:
            raise UnknownStoreError(
                f"no store {store!r} in the topology (stores: {sorted(self._subtopology)})"
            )
        return self._serdes.get(store, (BYTES, BYTES))

    def task_of(self, store: str, key: Any) -> TaskId:
        """The task that holds ``key`` in ``store``."""
        key_serde, _ = self.serdes(store)
        return self.task_of_bytes(store, key_serde.serialize(key))

    def task_of_bytes(self, store: str, key: bytes) -> TaskId:
        self.serdes(store)
        sub = self._subtopology[store]
        count = self._tasks.partition_count(sub)
        if count == 0:
            raise StoreUnavailableError("not-running", "the app has not started (no partition counts yet)")
        return TaskId(sub, partition_for(key, list(range(count))))

    def store(self, name: str, *, allow_standby: bool = False) -> ReadOnlyStore:
        """A read-only view of this process's copy of store ``name``."""
        self.serdes(name)
        return ReadOnlyStore(self, name, allow_standby=allow_standby)

    def local(self, store: str, key: Any, *, allow_standby: bool = False) -> QueryResult:
        """``key``'s value in this process's copy of ``store`` (a
        :class:`StoreUnavailableError` unless that copy may answer, see the module docstring)."""
        key_serde, _ = self.serdes(store)
        raw = self.local_bytes(store, key_serde.serialize(key), allow_standby=allow_standby)
        return dataclasses.replace(raw, key=key)

    def local_bytes(self, store: str, key: bytes, *, allow_standby: bool) -> QueryResult:
        """As :meth:`local`, for the serialized key; ``value`` is the deserialized value."""
        task_id = self.task_of_bytes(store, key)
        if not self.stable():
            raise StoreUnavailableError("rebalancing", "this process is not running a stable assignment")
        task = self._tasks.tasks.get(task_id)
        if task is None or task.closed:
            raise StoreUnavailableError("not-hosted", f"task {task_id} is not on this process")
        if task.is_active and task.restoring:
            raise StoreUnavailableError("restoring", f"task {task_id} is restoring its stores")
        if not task.is_active and not allow_standby:
            raise StoreUnavailableError("not-active", f"task {task_id} is a standby here")
        typed = task.typed.get(store)
        if typed is None:
            raise UnknownStoreError(f"store {store!r} is not a key-value store of task {task_id}")
        _, value_serde = self.serdes(store)
        data = typed.store.get(key)
        lag = 0 if task.is_active else task.lag(self._end_offsets())
        return QueryResult(
            store=store,
            key=key,
            value=None if data is None else value_serde.deserialize(data),
            found=data is not None,
            task=task_id,
            host=self.endpoint,
            active=task.is_active,
            lag=lag,
        )

    def candidates(self, task: TaskId, *, allow_standby: bool) -> list[str | None]:
        """Who to ask for ``task``, in order: its active's endpoint, then (``allow_standby``)
        its standbys'; None stands for this process when it has no endpoint and no metadata
        names any (a single process, or one without ``application_server``)."""
        hosts = self.hosts.hosts_of(task)
        out: list[str | None] = [] if hosts.active is None else [hosts.active]
        if allow_standby:
            out += [h for h in hosts.standbys if h not in out]
        if not out and self.endpoint is None and not self.hosts.endpoints():
            local = self._tasks.tasks.get(task)
            if local is not None and (local.is_active or allow_standby):
                out.append(None)
        return out


class ReadOnlyStore:
    """A read-only view of this process's copy of one store: ``get`` answers for a key whose
    task runs here (else :class:`StoreUnavailableError`); ``items`` iterates the copies of every
    task here that may answer (actives; standbys too with ``allow_standby``)."""

    def __init__(self, queries: StoreQueries, name: str, *, allow_standby: bool) -> None:
        self._queries = queries
        self.name = name
        self._allow_standby = allow_standby

    def get(self, key: Any) -> Any:
        return self._queries.local(self.name, key, allow_standby=self._allow_standby).value

    def items(self) -> Iterator[tuple[Any, Any]]:
        for task in list(self._queries._tasks.tasks.values()):
            if task.closed or (task.is_active and task.restoring):
                continue
            if task.is_active or self._allow_standby:
                typed = task.typed.get(self.name)
                if typed is not None:
                    yield from typed.items()
