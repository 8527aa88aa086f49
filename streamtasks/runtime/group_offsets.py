"""A group's committed offsets and its partitions' log offsets, for ``streamtasks groups
describe --offsets`` and ``reset-offsets``: OffsetFetch v7 (every committed offset of the
group), ListOffsets v7 on each partition's leader (earliest, latest, or the first offset at a
time) and an admin OffsetCommit v8 (generation -1, no member: what Kafka accepts for an empty
group only).

Every failure is one :class:`~streamtasks.errors.StreamTasksError` naming the broker and the
cause (as in :mod:`streamtasks.runtime.group_admin`).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable, Mapping

from kio.schema.list_offsets.v7.request import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from kio.schema.list_offsets.v7.response import ListOffsetsResponse
from kio.schema.metadata.v12.response import MetadataResponse
from kio.schema.offset_fetch.v7.request import OffsetFetchRequest as KOffsetFetchRequest
from kio.schema.offset_fetch.v7.response import OffsetFetchResponse as KOffsetFetchResponse
from kio.static.primitive import i8, i32, i64

from streamtasks.errors import BrokerError
from streamtasks.protocol import classic_group as cg
from streamtasks.protocol.errors import KafkaErrorCode
from streamtasks.runtime.admin import metadata_request
from streamtasks.runtime.connection import AsyncConnection, ConnectionLost, GroupCoordinatorClient, open_any
from streamtasks.runtime.group_admin import CLIENT_ID, RETRIABLE, check_answer, send_retrying
from streamtasks.runtime.security import ClientSettings
from topology.ids import TopicPartition

__all__ = [
    "EARLIEST",
    "LATEST",
    "commit_group_offsets",
    "fetch_committed",
    "list_offsets",
    "topic_partitions",
]

_log = logging.getLogger(__name__)

#: ListOffsets' special timestamps.
LATEST = -1
EARLIEST = -2


async def fetch_committed(
    settings: ClientSettings, group_id: str, *, timeout_s: float = 10.0
) -> dict[TopicPartition, int]:
    """Every committed offset of the group (OffsetFetch v7 with no topic: all of them)."""
    _log.debug("OffsetFetch v7 of group %r with %r", group_id, settings)
    client = GroupCoordinatorClient(settings, group_id, client_id=CLIENT_ID, timeout_s=timeout_s)
    who = f"the coordinator of group {group_id!r}"
    try:
        try:
            answer = await send_retrying(
                client,
                lambda: client.send_entity(
                    KOffsetFetchRequest(group_id=group_id, topics=None),  # type: ignore[arg-type]
                    KOffsetFetchResponse,
                    timeout_s=timeout_s,
                ),
                lambda answer: answer.error,
                timeout_s,
            )
        except ConnectionLost as exc:
            raise BrokerError(f"{who} did not answer OffsetFetch v7: {exc}") from None
    finally:
        await client.close()
    assert isinstance(answer, cg.OffsetFetchResponse)
    check_answer(answer.error, who, "OffsetFetch v7")
    found: dict[TopicPartition, int] = {}
    for tp, offset, error in answer.offsets:
        check_answer(error, who, f"OffsetFetch v7 for {tp}")
        if offset >= 0:
            found[tp] = offset
    return found


async def _metadata(settings: ClientSettings, topics: Iterable[str], timeout_s: float) -> MetadataResponse:
    conn = await open_any(settings, CLIENT_ID, timeout_s=timeout_s)
    try:
        answer = await conn.call(metadata_request(topics), MetadataResponse, timeout_s=timeout_s)
    finally:
        await conn.close()
    assert isinstance(answer, MetadataResponse)
    return answer


async def topic_partitions(
    settings: ClientSettings, topics: Iterable[str], *, timeout_s: float = 10.0
) -> list[TopicPartition]:
    """Every partition of ``topics``; an unknown topic is a :class:`BrokerError`."""
    metadata = await _metadata(settings, topics, timeout_s)
    found: list[TopicPartition] = []
    for t in metadata.topics:
        check_answer(
            KafkaErrorCode.of(int(t.error_code.value)), "the cluster", f"Metadata for topic {t.name!r}"
        )
        found.extend(TopicPartition(str(t.name), int(p.partition_index)) for p in t.partitions)
    return sorted(found)


async def list_offsets(
    settings: ClientSettings,
    partitions: Iterable[TopicPartition],
    timestamp: int = LATEST,
    *,
    timeout_s: float = 10.0,
) -> dict[TopicPartition, int]:
    """Each partition's offset at ``timestamp`` (:data:`LATEST`, :data:`EARLIEST`, or epoch
    milliseconds: the first offset at or after it, -1 when there is none), asked of its leader."""
    wanted = sorted(set(partitions))
    if not wanted:
        return {}
    metadata = await _metadata(settings, {tp.topic for tp in wanted}, timeout_s)
    brokers = {int(b.node_id): (str(b.host), int(b.port)) for b in metadata.brokers}
    leaders = {
        TopicPartition(str(t.name), int(p.partition_index)): int(p.leader_id)
        for t in metadata.topics
        for p in t.partitions
    }
    by_leader: dict[int, list[TopicPartition]] = defaultdict(list)
    for tp in wanted:
        if leaders.get(tp, -1) not in brokers:
            raise BrokerError(f"the cluster at {settings.bootstrap_servers} names no leader for {tp}")
        by_leader[leaders[tp]].append(tp)
    found: dict[TopicPartition, int] = {}
    for leader, tps in sorted(by_leader.items()):
        found.update(await _list_on(settings, brokers[leader], tps, timestamp, timeout_s))
    return found


async def _list_on(
    settings: ClientSettings,
    address: tuple[str, int],
    tps: list[TopicPartition],
    timestamp: int,
    timeout_s: float,
) -> dict[TopicPartition, int]:
    by_topic: dict[str, list[int]] = defaultdict(list)
    for tp in tps:
        by_topic[tp.topic].append(tp.partition)
    request = ListOffsetsRequest(
        replica_id=i32(-1),  # type: ignore[arg-type]
        isolation_level=i8(0),
        topics=tuple(
            ListOffsetsTopic(
                name=topic,  # type: ignore[arg-type]
                partitions=tuple(
                    ListOffsetsPartition(partition_index=i32(p), timestamp=i64(timestamp)) for p in ps
                ),
            )
            for topic, ps in sorted(by_topic.items())
        ),
    )
    conn = await AsyncConnection.open(*address, client_id=CLIENT_ID, timeout_s=timeout_s, security=settings)
    who = f"the broker at {conn.peer}"
    _log.debug("ListOffsets v7 (timestamp %d) of %d partition(s) on %s", timestamp, len(tps), who)
    try:
        try:
            answer = await conn.call(request, ListOffsetsResponse, timeout_s=timeout_s)
        except ConnectionLost as exc:
            raise BrokerError(f"{who} did not answer ListOffsets v7: {exc}") from None
    finally:
        await conn.close()
    found: dict[TopicPartition, int] = {}
    for t in answer.topics:
        for p in t.partitions:
            tp = TopicPartition(str(t.name), int(p.partition_index))
            check_answer(KafkaErrorCode.of(int(p.error_code.value)), who, f"ListOffsets v7 for {tp}")
            found[tp] = int(p.offset)
    return found


async def commit_group_offsets(
    settings: ClientSettings, group_id: str, offsets: Mapping[TopicPartition, int], *, timeout_s: float = 10.0
) -> None:
    """Commit ``offsets`` for an empty group, as an admin (generation -1, no member id); the
    coordinator refuses it while the group has members."""
    request = cg.OffsetCommitRequest(
        group_id=group_id,
        generation_id=-1,
        member_id="",
        group_instance_id=None,
        offsets=tuple(cg.CommittedOffset(partition=tp, offset=o) for tp, o in sorted(offsets.items())),
    )
    who = f"the coordinator of group {group_id!r}"
    _log.debug("OffsetCommit v8 of %d offset(s) for group %r with %r", len(offsets), group_id, settings)
    client = GroupCoordinatorClient(settings, group_id, client_id=CLIENT_ID, timeout_s=timeout_s)
    try:
        try:
            answer = await send_retrying(
                client,
                lambda: client.send(request, timeout_s=timeout_s),
                lambda answer: next((e for _, e in answer.errors if e in RETRIABLE), KafkaErrorCode.NONE),
                timeout_s,
            )
        except ConnectionLost as exc:
            raise BrokerError(f"{who} did not answer OffsetCommit v8: {exc}") from None
    finally:
        await client.close()
    assert isinstance(answer, cg.OffsetCommitResponse)
    for tp, error in answer.errors:
        check_answer(error, who, f"OffsetCommit v8 for {tp}")
