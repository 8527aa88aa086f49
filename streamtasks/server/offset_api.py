"""OffsetCommit (v2-v9) and OffsetFetch (v1-v9) on kio's generated classes, any version: the
request is read through kio, checked by :mod:`.offsets`' rules, and answered with the
response class of the same version (fields a version lacks are left out)."""

from __future__ import annotations

import dataclasses
import datetime
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode

from streamtasks.coordinator import GroupCoordinator
from streamtasks.coordinator.record_codec import OffsetCommitRecord
from streamtasks.coordinator.streams import StreamsGroupCoordinator
from streamtasks.protocol.errors import KafkaErrorCode
from streamtasks.server.offsets import (
    MAX_METADATA_BYTES,
    OffsetCommitCheck,
    OffsetStore,
    check_commit,
    check_fetch,
    check_streams_commit,
    check_streams_fetch,
)
from streamtasks.server.wire import kio_response_class

__all__ = [
    "ClusterOffsets",
    "Partition",
    "element",
    "make",
    "OFFSET_COMMIT",
    "OFFSET_COMMIT_VERSIONS",
    "OFFSET_FETCH",
    "OFFSET_FETCH_VERSIONS",
    "commit",
    "fetch",
]

OFFSET_COMMIT, OFFSET_FETCH = 8, 9
OFFSET_COMMIT_VERSIONS = (2, 9)
OFFSET_FETCH_VERSIONS = (1, 9)
_ZERO = datetime.timedelta(0)


Partition = tuple[str, int]


@dataclass(slots=True)
class ClusterOffsets:
    """A transactional group's committed offsets as the backing cluster answered them
    (:mod:`.txn_api`): the group's error code, and per partition (offset, leader epoch,
    metadata, error code), codes as the cluster's ints."""

    error: int = 0
    partitions: dict[Partition, tuple[int, int, str, int]] = field(default_factory=dict)

    def has(self, tp: Partition) -> bool:
        """The cluster has something to say about ``tp`` (an offset, or an error such as
        UNSTABLE_OFFSET_COMMIT); otherwise the server's own store answers."""
        entry = self.partitions.get(tp)
        return entry is not None and (entry[0] >= 0 or entry[3] != 0)


_FIELDS: dict[type[Any], frozenset[str]] = {}
_ELEMENTS: dict[tuple[type[Any], str], type[Any]] = {}


def _fields(cls: type[Any]) -> frozenset[str]:
    if cls not in _FIELDS:
        _FIELDS[cls] = frozenset(f.name for f in dataclasses.fields(cls))
    return _FIELDS[cls]


def element(cls: type[Any], field: str) -> type[Any]:
    """The element class of a kio class's ``tuple[X, ...]`` field."""
    if (cls, field) not in _ELEMENTS:
        hint = typing.get_type_hints(cls)[field]
        _ELEMENTS[cls, field] = typing.cast(type[Any], typing.get_args(hint)[0])
    return _ELEMENTS[cls, field]


def make(cls: type[Any], **values: Any) -> Any:
    """An instance of a kio class from the values its version has (others are dropped)."""
    known = _fields(cls)
    return cls(**{k: v for k, v in values.items() if k in known})


def _error(code: KafkaErrorCode) -> ErrorCode:
    return ErrorCode(int(code))


def commit(
    request: Any,
    version: int,
    *,
    coordinator: GroupCoordinator,
    store: OffsetStore,
    now_ms: int,
    streams: StreamsGroupCoordinator | None = None,
) -> tuple[list[OffsetCommitRecord], Any]:
    """The records to write and the response of one OffsetCommit (``streams``: the streams
    groups, whose members commit by their rules)."""
    group_id = str(request.group_id)
    check = OffsetCommitCheck(
        group_id=group_id,
        member_id=str(request.member_id or ""),
        member_epoch=int(request.generation_id_or_member_epoch),
        api_version=version,
    )
    streams_group = streams.group(group_id) if streams is not None else None
    if streams_group is not None:
        verdict = check_streams_commit(streams_group, check)
    else:
        verdict = check_commit(coordinator.group(group_id), check)
    response_cls = kio_response_class(OFFSET_COMMIT, version)
    topic_cls = element(response_cls, "topics")
    partition_cls = element(topic_cls, "partitions")
    records: list[OffsetCommitRecord] = []
    topics = []
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            metadata = p.committed_metadata
            error = verdict
            if (
                error is KafkaErrorCode.NONE
                and metadata is not None
                and len(metadata.encode()) > MAX_METADATA_BYTES
            ):
                error = KafkaErrorCode.OFFSET_METADATA_TOO_LARGE
            if error is KafkaErrorCode.NONE:
                records.append(
                    OffsetCommitRecord(
                        group_id=group_id,
                        topic=str(topic.name),
                        partition=int(p.partition_index),
                        offset=int(p.committed_offset),
                        leader_epoch=int(getattr(p, "committed_leader_epoch", -1)),
                        metadata=metadata,
                        commit_timestamp_ms=now_ms,
                    )
                )
            partitions.append(
                make(partition_cls, partition_index=p.partition_index, error_code=_error(error))
            )
        topics.append(make(topic_cls, name=topic.name, partitions=tuple(partitions)))
    return records, make(response_cls, throttle_time=_ZERO, topics=tuple(topics))


def _partitions_answer(
    partition_cls: type[Any],
    store: OffsetStore,
    group_id: str,
    wanted: list[tuple[str, int]],
    cluster: ClusterOffsets | None = None,
) -> dict[str, list[Any]]:
    """Each wanted partition's committed offset: the cluster's where it has one (a
    transactional group), else the server's store's."""
    out: dict[str, list[Any]] = {}
    metadata: str | None
    for topic, partition in wanted:
        if cluster is not None and cluster.has((topic, partition)):
            offset, leader_epoch, metadata, code = cluster.partitions[topic, partition]
        else:
            committed = store.committed(group_id, topic, partition)
            code = 0
            offset = -1 if committed is None else committed.offset
            leader_epoch = -1 if committed is None else committed.leader_epoch
            metadata = "" if committed is None else committed.metadata
        out.setdefault(topic, []).append(
            make(
                partition_cls,
                partition_index=partition,
                committed_offset=offset,
                committed_leader_epoch=leader_epoch,
                metadata=metadata,
                error_code=ErrorCode(code),
            )
        )
    return out


def _wanted(
    store: OffsetStore,
    group_id: str,
    topics: Any,
    names: Callable[[Any], Any],
    cluster: ClusterOffsets | None = None,
) -> list[tuple[str, int]]:
    if topics is None:  # every partition the group committed
        extra = [] if cluster is None else [tp for tp in cluster.partitions if cluster.has(tp)]
        return sorted({*store.partitions(group_id), *extra})
    return [(str(t.name), int(p)) for t in topics for p in names(t)]


def fetch(
    request: Any,
    version: int,
    *,
    coordinator: GroupCoordinator,
    store: OffsetStore,
    streams: StreamsGroupCoordinator | None = None,
    cluster: Mapping[str, ClusterOffsets] | None = None,
) -> Any:
    """The response of one OffsetFetch (one group before v8, a batch of groups from v8);
    ``cluster``: the backing cluster's answer for the transactional groups among them."""
    response_cls = kio_response_class(OFFSET_FETCH, version)
    from_cluster = cluster or {}
    if version < 8:
        group_id = str(request.group_id)
        topic_cls = element(response_cls, "topics")
        partition_cls = element(topic_cls, "partitions")
        found = from_cluster.get(group_id)
        if found is not None and found.error:
            return make(response_cls, throttle_time=_ZERO, topics=(), error_code=ErrorCode(found.error))
        wanted = _wanted(store, group_id, request.topics, lambda t: t.partition_indexes, found)
        by_topic = _partitions_answer(partition_cls, store, group_id, wanted, found)
        topics = tuple(make(topic_cls, name=n, partitions=tuple(ps)) for n, ps in by_topic.items())
        return make(response_cls, throttle_time=_ZERO, topics=topics, error_code=_error(KafkaErrorCode.NONE))
    group_cls = element(response_cls, "groups")
    topic_cls = element(group_cls, "topics")
    partition_cls = element(topic_cls, "partitions")
    groups = []
    for g in request.groups:
        group_id = str(g.group_id)
        member_id, member_epoch = getattr(g, "member_id", None), int(getattr(g, "member_epoch", -1))
        streams_group = streams.group(group_id) if streams is not None else None
        if streams_group is not None:
            code = int(check_streams_fetch(streams_group, member_id, member_epoch))
        else:
            code = int(check_fetch(coordinator.group(group_id), member_id, member_epoch))
        found = from_cluster.get(group_id)
        if not code and found is not None:
            code = found.error
        wanted = [] if code else _wanted(store, group_id, g.topics, lambda t: t.partition_indexes, found)
        by_topic = _partitions_answer(partition_cls, store, group_id, wanted, found)
        topics = tuple(make(topic_cls, name=n, partitions=tuple(ps)) for n, ps in by_topic.items())
        groups.append(make(group_cls, group_id=group_id, topics=topics, error_code=ErrorCode(code)))
    return make(response_cls, throttle_time=_ZERO, groups=tuple(groups))
