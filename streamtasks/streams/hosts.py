"""Which process hosts a task: the metadata interactive queries route by.

Every process of an application knows, from its latest assignment, the interactive-query
endpoint (``host:port``, the App's ``application_server``) of the process running each task as
active and of those keeping a standby (or warm-up) copy of it. Where that comes from depends on
the group protocol, so the lookup is an interface, :class:`HostMetadata`, with one
implementation per protocol:

* :class:`AssignmentInfoHosts`: the classic protocol and KIP-848 on ``streamtasks coordinator``
  (the client-side assignor): the leader's ``AssignmentInfo`` carries ``active_tasks_by_host``
  and ``standby_tasks_by_host``, built from the endpoints members wrote in their
  ``SubscriptionInfo``.
* :class:`EndpointPartitionsHosts`: streams groups (KIP-1071): the heartbeat response's
  ``partitions_by_user_endpoint`` maps each endpoint to the source partitions it hosts (active
  and standby); a partition's task is the topology's.

Pure: the implementations read what they are handed (a callable returning the latest
assignment metadata), nothing else.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from streamtasks.errors import TopologyError
from streamtasks.protocol.streams_group import EndpointToPartitions, TopicPartitions
from streamtasks.protocol.userdata import AssignmentInfo
from topology.ids import TaskId, TopicPartition
from topology.model import Topology

__all__ = ["AssignmentInfoHosts", "EndpointPartitionsHosts", "HostMetadata", "TaskHosts", "endpoint_text"]


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskHosts:
    """Where one task lives: the endpoint of its active (None: no process with an endpoint
    runs it) and those of its standbys and warm-ups, sorted."""

    task: TaskId
    active: str | None
    standbys: tuple[str, ...] = ()


class HostMetadata(Protocol):
    """The endpoints hosting each task, as of this process's latest assignment."""

    def hosts_of(self, task: TaskId) -> TaskHosts:
        """The task's active and standby endpoints."""
        ...

    def endpoints(self) -> tuple[str, ...]:
        """Every endpoint the metadata names, sorted."""
        ...


def _hosts(
    task: TaskId, active: Mapping[str, frozenset[TaskId]], standby: Mapping[str, frozenset[TaskId]]
) -> TaskHosts:
    owners = sorted(h for h, ts in active.items() if task in ts)
    return TaskHosts(
        task=task,
        # Two owners only in a metadata the assignor never writes; the first, deterministically.
        active=owners[0] if owners else None,
        standbys=tuple(sorted(h for h, ts in standby.items() if task in ts and h not in owners)),
    )


class AssignmentInfoHosts:
    """Classic protocol and KIP-848 (client-side assignor): the ``*_tasks_by_host`` maps of the
    latest ``AssignmentInfo`` (``info()``)."""

    def __init__(self, info: Callable[[], AssignmentInfo]) -> None:
        self._info = info

    def hosts_of(self, task: TaskId) -> TaskHosts:
        info = self._info()
        return _hosts(task, info.active_tasks_by_host, info.standby_tasks_by_host)

    def endpoints(self) -> tuple[str, ...]:
        info = self._info()
        return tuple(sorted({*info.active_tasks_by_host, *info.standby_tasks_by_host}))


def endpoint_text(host: str, port: int) -> str:
    """``host:port`` (an IPv6 host in brackets)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class EndpointPartitionsHosts:
    """Streams groups (KIP-1071): the latest ``partitions_by_user_endpoint`` (``endpoints()``),
    partitions turned into tasks by ``topology``. A partition no subtopology reads is skipped."""

    def __init__(self, topology: Topology, endpoints: Callable[[], Sequence[EndpointToPartitions]]) -> None:
        self._topology = topology
        self._endpoints = endpoints
        self._seen: Sequence[EndpointToPartitions] | None = None
        self._maps: tuple[dict[str, frozenset[TaskId]], dict[str, frozenset[TaskId]]] = ({}, {})

    def _tasks(self, topics: Sequence[TopicPartitions]) -> set[TaskId]:
        out: set[TaskId] = set()
        for entry in topics:
            for p in entry.partitions:
                try:
                    out.add(self._topology.task_for(TopicPartition(entry.topic, p)))
                except TopologyError:
                    continue
        return out

    def _by_host(self) -> tuple[dict[str, frozenset[TaskId]], dict[str, frozenset[TaskId]]]:
        current = self._endpoints()
        if current is not self._seen:  # rebuilt once per new heartbeat answer
            active: dict[str, set[TaskId]] = {}
            standby: dict[str, set[TaskId]] = {}
            for entry in current:
                host = endpoint_text(entry.user_endpoint.host, entry.user_endpoint.port)
                active.setdefault(host, set()).update(self._tasks(entry.active_partitions))
                standby.setdefault(host, set()).update(self._tasks(entry.standby_partitions))
            self._maps = (
                {h: frozenset(ts) for h, ts in active.items()},
                {h: frozenset(ts) for h, ts in standby.items()},
            )
            self._seen = current
        return self._maps

    def hosts_of(self, task: TaskId) -> TaskHosts:
        active, standby = self._by_host()
        return _hosts(task, active, standby)

    def endpoints(self) -> tuple[str, ...]:
        active, standby = self._by_host()
        return tuple(sorted({*active, *standby}))
