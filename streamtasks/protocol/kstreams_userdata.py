"""Kafka Streams' (Java) own consumer-protocol userdata, read only: its ``SubscriptionInfo``
(member -> leader) and ``AssignmentInfo`` (leader -> member) under the classic protocol named
``"stream"``, for ``streamtasks groups describe`` of a Java Kafka Streams app's group.

Both begin with ``int32 version``. Layouts, big-endian, as Kafka Streams writes them:

SubscriptionInfo (the generated, non-flexible ``SubscriptionInfoData``): v3+ ``int32
latestSupportedVersion``; ``uuid processId``; v1-6 previous active and standby tasks (``int32``
count, ``int32 subtopology, int32 partition`` each); v2+ the endpoint (``int32`` length and
bytes, ``host:port``); v7+ task offset sums (v7-9 grouped by subtopology: ``int32
subtopology``, then ``int32`` count of ``int32 partition, int64 sum``; v10+ one entry per task:
``int32 subtopology, int32 partition, int64 sum, int16-length named topology or -1``); v8+
``int8`` unique field; v9+ ``int32`` error code; v11+ client tags (``bytes key, bytes value``).

AssignmentInfo: v3+ ``int32 commonlySupportedVersion``; active tasks (``int32`` count of task
ids); standby tasks (``int32`` count of task id and its partitions); v2-4 partitions by host;
v5 a topic dictionary then partitions by host; v6+ the dictionary, active then standby
partitions by host; v4+ ``int32`` error code; v7+ ``int64 nextRebalanceMs``. A task id is
``int32 subtopology, int32 partition`` and, from v10, ``int32`` length and UTF-16 chars of its
named topology. Partitions are ``writeUTF`` topic (``uint16`` length) and ``int32`` partition.

Versions above :data:`LATEST_KNOWN_VERSION` are read with its layout (Kafka Streams appended
fields only so far); bytes left over are ignored there, refused for the versions known.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from streamtasks.wire import Reader
from topology.ids import TaskId, TopicPartition

__all__ = [
    "KAFKA_STREAMS_PROTOCOL",
    "LATEST_KNOWN_VERSION",
    "KStreamsAssignmentInfo",
    "KStreamsSubscriptionInfo",
    "decode_kstreams_assignment",
    "decode_kstreams_subscription",
]

#: The classic protocol name of Kafka Streams' ``StreamsPartitionAssignor``.
KAFKA_STREAMS_PROTOCOL = "stream"
#: The newest layout this module knows (Kafka Streams 3.x/4.x write 11 and up).
LATEST_KNOWN_VERSION = 11
_NAMED_TOPOLOGY_VERSION = 10


@dataclass(frozen=True, slots=True, kw_only=True)
class KStreamsSubscriptionInfo:
    version: int
    latest_supported_version: int
    process_id: uuid.UUID
    endpoint: str | None
    prev_tasks: tuple[TaskId, ...] = ()
    standby_tasks: tuple[TaskId, ...] = ()
    #: v7+: each task's summed changelog offsets (-2: a running active task, Kafka's sentinel).
    task_offset_sums: tuple[tuple[TaskId, int], ...] = ()
    error_code: int = 0
    client_tags: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class KStreamsAssignmentInfo:
    version: int
    commonly_supported_version: int
    active_tasks: tuple[TaskId, ...]
    standby_tasks: tuple[TaskId, ...]
    #: host:port -> the partitions of its active (and, v6+, standby) tasks.
    active_partitions_by_host: tuple[tuple[str, tuple[TopicPartition, ...]], ...] = ()
    standby_partitions_by_host: tuple[tuple[str, tuple[TopicPartition, ...]], ...] = ()
    error_code: int = 0
    next_rebalance_ms: int | None = None


def _count(r: Reader, field: str, min_size: int) -> int:
    n = r.int32()
    if n < 0 or n * min_size > r.remaining:
        raise r.fail(f"{field}: bad count {n} ({r.remaining} byte(s) left)")
    return n


def _task(r: Reader, version: int) -> TaskId:
    subtopology, partition = r.int32(), r.int32()
    if version >= _NAMED_TOPOLOGY_VERSION:
        chars = _count(r, "named topology", 2)
        r.raw(2 * chars)  # a named topology (an internal Kafka Streams feature): not shown
    if subtopology < 0 or partition < 0:
        raise r.fail(f"bad task id {subtopology}_{partition}")
    return TaskId(subtopology, partition)


def _plain_tasks(r: Reader, field: str) -> tuple[TaskId, ...]:
    return tuple(TaskId(r.int32(), r.int32()) for _ in range(_count(r, field, 8)))


def _finish(r: Reader, version: int, what: str) -> None:
    if version <= LATEST_KNOWN_VERSION and r.remaining:
        raise r.fail(f"{r.remaining} byte(s) after a v{version} {what}")


def decode_kstreams_subscription(data: bytes) -> KStreamsSubscriptionInfo:
    """A Kafka Streams ``SubscriptionInfo`` (a :class:`~streamtasks.errors.DecodeError` on bad
    bytes)."""
    r = Reader(data, "Kafka Streams SubscriptionInfo")
    version = r.int32()
    if version < 1:
        raise r.fail(f"bad version {version}")
    latest = r.int32() if version >= 3 else version
    process_id = r.uuid()
    prev: tuple[TaskId, ...] = ()
    standby: tuple[TaskId, ...] = ()
    if version <= 6:
        prev, standby = _plain_tasks(r, "prevTasks"), _plain_tasks(r, "standbyTasks")
    endpoint = _bytes(r, "userEndPoint") if version >= 2 else ""
    sums: list[tuple[TaskId, int]] = []
    if version >= 7:
        sums = _offset_sums(r, version)
    error = 0
    if version >= 8:
        r.int8()  # uniqueField: makes each subscription differ
    if version >= 9:
        error = r.int32()
    tags: list[tuple[str, str]] = []
    if version >= 11:
        for _ in range(_count(r, "clientTags", 8)):
            tags.append((_bytes(r, "clientTag key"), _bytes(r, "clientTag value")))
    _finish(r, version, "SubscriptionInfo")
    return KStreamsSubscriptionInfo(
        version=version, latest_supported_version=latest, process_id=process_id, endpoint=endpoint or None,
        prev_tasks=prev, standby_tasks=standby, task_offset_sums=tuple(sorted(sums)), error_code=error,
        client_tags=tuple(tags),
    )  # fmt: skip


def _bytes(r: Reader, field: str) -> str:
    n = r.int32()
    if n < 0:
        return ""
    if n > r.remaining:
        raise r.fail(f"{field}: length {n} past the end")
    return r.raw(n).decode("utf-8", errors="replace")


def _offset_sums(r: Reader, version: int) -> list[tuple[TaskId, int]]:
    sums: list[tuple[TaskId, int]] = []
    for _ in range(_count(r, "taskOffsetSums", 4)):
        subtopology = r.int32()
        if version >= _NAMED_TOPOLOGY_VERSION:
            partition, offset_sum = r.int32(), r.int64()
            r.kafka_nullable_string("namedTopology")
            sums.append((TaskId(subtopology, partition), offset_sum))
            continue
        for _ in range(_count(r, "partitionToOffsetSum", 12)):
            partition, offset_sum = r.int32(), r.int64()
            sums.append((TaskId(subtopology, partition), offset_sum))
    return sums


def _partitions(r: Reader, topics: dict[int, str] | None) -> tuple[TopicPartition, ...]:
    out = []
    for _ in range(_count(r, "partitions", 6 if topics is None else 8)):
        if topics is None:
            topic = r.kafka_string("topic")
        else:
            index = r.int32()
            if index not in topics:
                raise r.fail(f"topic index {index} not in the dictionary")
            topic = topics[index]
        out.append(TopicPartition(topic, r.int32()))
    return tuple(sorted(out))


def _by_host(r: Reader, topics: dict[int, str] | None) -> tuple[tuple[str, tuple[TopicPartition, ...]], ...]:
    hosts = []
    for _ in range(_count(r, "partitionsByHost", 6)):
        host = r.kafka_string("host")
        port = r.int32()
        hosts.append((f"{host}:{port}", _partitions(r, topics)))
    return tuple(sorted(hosts))


def decode_kstreams_assignment(data: bytes) -> KStreamsAssignmentInfo:
    """A Kafka Streams ``AssignmentInfo`` (a :class:`~streamtasks.errors.DecodeError` on bad
    bytes)."""
    r = Reader(data, "Kafka Streams AssignmentInfo")
    version = r.int32()
    if version < 1:
        raise r.fail(f"bad version {version}")
    common = r.int32() if version >= 3 else -1
    active = tuple(_task(r, version) for _ in range(_count(r, "activeTasks", 8)))
    standby = []
    for _ in range(_count(r, "standbyTasks", 12)):
        standby.append(_task(r, version))
        _partitions(r, None)
    active_hosts: tuple[tuple[str, tuple[TopicPartition, ...]], ...] = ()
    standby_hosts: tuple[tuple[str, tuple[TopicPartition, ...]], ...] = ()
    if 2 <= version <= 4:
        active_hosts = _by_host(r, None)
    elif version >= 5:
        topics: dict[int, str] = {}
        for _ in range(_count(r, "topic dictionary", 6)):
            index = r.int32()
            topics[index] = r.kafka_string("topic")
        active_hosts = _by_host(r, topics)
        if version >= 6:
            standby_hosts = _by_host(r, topics)
    error = r.int32() if version >= 4 else 0
    next_ms = r.int64() if version >= 7 else None
    _finish(r, version, "AssignmentInfo")
    return KStreamsAssignmentInfo(
        version=version, commonly_supported_version=common, active_tasks=active,
        standby_tasks=tuple(sorted(standby)), active_partitions_by_host=active_hosts,
        standby_partitions_by_host=standby_hosts, error_code=error, next_rebalance_ms=next_ms,
    )  # fmt: skip
