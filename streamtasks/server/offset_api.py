"""OffsetCommit (v2-v9) and OffsetFetch (v1-v9) on kio's generated classes, any version: the
request is read through kio, checked by :mod:`.offsets`' rules, and answered with the
response class of the same version (fields a version lacks are left out)."""

from __future__ import annotations

import dataclasses
import datetime
import typing
from collections.abc import Callable
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
    error: KafkaErrorCode,
) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for topic, partition in wanted:
        committed = None if error is not KafkaErrorCode.NONE else store.committed(group_id, topic, partition)
        out.setdefault(topic, []).append(
            make(
                partition_cls,
                partition_index=partition,
                committed_offset=-1 if committed is None else committed.offset,
                committed_leader_epoch=-1 if committed is None else committed.leader_epoch,
                metadata="" if committed is None else committed.metadata,
                error_code=_error(error),
            )
        )
    return out


def _wanted(
    store: OffsetStore, group_id: str, topics: Any, names: Callable[[Any], Any]
) -> list[tuple[str, int]]:
    if topics is None:  # every partition the group committed
        return list(store.partitions(group_id))
    return [(str(t.name), int(p)) for t in topics for p in names(t)]


def fetch(
    request: Any,
    version: int,
    *,
    coordinator: GroupCoordinator,
    store: OffsetStore,
    streams: StreamsGroupCoordinator | None = None,
) -> Any:
    """The response of one OffsetFetch (one group before v8, a batch of groups from v8)."""
    response_cls = kio_response_class(OFFSET_FETCH, version)
    if version < 8:
        group_id = str(request.group_id)
        topic_cls = element(response_cls, "topics")
        partition_cls = element(topic_cls, "partitions")
        wanted = _wanted(store, group_id, request.topics, lambda t: t.partition_indexes)
        by_topic = _partitions_answer(partition_cls, store, group_id, wanted, KafkaErrorCode.NONE)
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
            error = check_streams_fetch(streams_group, member_id, member_epoch)
        else:
            error = check_fetch(coordinator.group(group_id), member_id, member_epoch)
        wanted = (
            []
            if error is not KafkaErrorCode.NONE
            else _wanted(store, group_id, g.topics, lambda t: t.partition_indexes)
        )
        by_topic = _partitions_answer(partition_cls, store, group_id, wanted, KafkaErrorCode.NONE)
        topics = tuple(make(topic_cls, name=n, partitions=tuple(ps)) for n, ps in by_topic.items())
        groups.append(make(group_cls, group_id=group_id, topics=topics, error_code=_error(error)))
    return make(response_cls, throttle_time=_ZERO, groups=tuple(groups))
