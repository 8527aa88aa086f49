"""Converting a group between the classic protocol and a streams group on ``streamtasks
coordinator`` (pure: frames through :class:`~streamtasks.server.handlers.Handlers`, the log in a
list): Apache Kafka's offline rule (``coordinator/kinds.py``). An emptied classic (consumer)
group becomes a streams group at the first streams heartbeat, an emptied streams group becomes a
classic group at the first JoinGroup, a group with members of the other kind refuses; the
committed offsets stay under the group id both ways; the log, encoded and decoded as the topic
holds it, replays to the same groups on a new process."""

from __future__ import annotations

import asyncio
import datetime
import io
from typing import Any, cast

from kio.serial import entity_writer

from streamtasks.coordinator import CoordinatorConfig, GroupCoordinator, GroupEpochTombstone, Record
from streamtasks.coordinator.record_codec import OffsetCommitRecord, OffsetCommitTombstone
from streamtasks.coordinator.streams import (
    StreamsCoordinatorConfig,
    StreamsGroupCoordinator,
    StreamsGroupRecord,
    StreamsGroupTombstone,
)
from streamtasks.protocol import consumer_group_codec as codec
from streamtasks.protocol.consumer_group import ConsumerGroupHeartbeatRequest
from streamtasks.protocol.consumer_protocol import ConsumerProtocolSubscription, encode_subscription
from streamtasks.protocol.errors import KafkaErrorCode
from streamtasks.protocol.streams_group import StreamsGroupHeartbeatRequest, Subtopology, Topology
from streamtasks.server.classic_api import JOIN_GROUP
from streamtasks.server.handlers import Handlers
from streamtasks.server.log import decode_record, encode_record, is_streams_record
from streamtasks.server.offset_api import OFFSET_COMMIT, OFFSET_FETCH, element
from streamtasks.server.offsets import OffsetStore
from streamtasks.server.routing import decode_kio_response
from streamtasks.server.wire import kio_request_class
from tests.coordinator.streams.support import GROUP, READY, image
from tests.server.test_streams_api import Clock, MemoryLog, _beat, _handlers, _header, _join, commit_frame

_SUBSCRIPTION = ConsumerProtocolSubscription(topics=("input",), user_data=None)


def _frame(cls: type[Any], request: Any) -> bytes:
    buf = io.BytesIO()
    entity_writer(cls)(buf, request)
    return buf.getvalue()


async def _consumer_beat(h: Handlers, member_id: str, epoch: int) -> Any:
    request = ConsumerGroupHeartbeatRequest(
        group_id=GROUP,
        member_id=member_id,
        member_epoch=epoch,
        rebalance_timeout_ms=30_000,
        subscribed_topic_names=("input",) if epoch == 0 else None,
    )
    frame = await h.handle(_header(68), codec.encode_heartbeat_request(request, 1), "h")
    assert frame is not None
    return codec.decode_heartbeat_response(frame[4 + 4 + 1 :], 1)


async def _classic_join(h: Handlers, member_id: str = "") -> Any:
    cls = kio_request_class(JOIN_GROUP, 9)
    protocol_cls = element(cls, "protocols")
    request = cls(
        group_id=GROUP,
        session_timeout=datetime.timedelta(seconds=10),
        rebalance_timeout=datetime.timedelta(seconds=30),
        member_id=member_id,
        group_instance_id=None,
        protocol_type="consumer",
        protocols=(protocol_cls(name="streamtasks", metadata=encode_subscription(_SUBSCRIPTION)),),
        reason=None,
    )
    frame = await h.handle(_header(JOIN_GROUP, 9), _frame(cls, request), "h")
    assert frame is not None
    return decode_kio_response(JOIN_GROUP, 9, frame)[1]


async def _admin_commit(h: Handlers, offset: int) -> KafkaErrorCode:
    frame = await h.handle(_header(OFFSET_COMMIT, 9), commit_frame("", -1, offset), "h")
    assert frame is not None
    _, response = decode_kio_response(OFFSET_COMMIT, 9, frame)
    return KafkaErrorCode(int(response.topics[0].partitions[0].error_code.value))


async def _fetched(h: Handlers) -> int:
    cls = kio_request_class(OFFSET_FETCH, 9)
    group_cls = element(cls, "groups")
    request = cls(
        groups=(group_cls(group_id=GROUP, member_id=None, member_epoch=-1, topics=None),),
        require_stable=False,
    )
    frame = await h.handle(_header(OFFSET_FETCH, 9), _frame(cls, request), "h")
    assert frame is not None
    _, response = decode_kio_response(OFFSET_FETCH, 9, frame)
    return int(response.groups[0].topics[0].partitions[0].committed_offset)


def _replayed(log: MemoryLog, clock: Clock) -> tuple[GroupCoordinator, StreamsGroupCoordinator, OffsetStore]:
    """A new process loading the log as ``CoordinatorServer.start`` does."""
    stored = [decode_record(*encode_record(r)) for r in log.records]
    consumer = GroupCoordinator(CoordinatorConfig(), image=image(READY))
    streams = StreamsGroupCoordinator(StreamsCoordinatorConfig(), image=image(READY))
    offsets = OffsetStore()
    offsets_records = [r for r in stored if isinstance(r, OffsetCommitRecord | OffsetCommitTombstone)]
    for r in offsets_records:
        offsets.replay(r)
    streams.load([r for r in stored if is_streams_record(r)], clock.now)
    groups = [cast("Record", r) for r in stored if not is_streams_record(r) and r not in offsets_records]
    consumer.apply(consumer.load(groups, clock.now))
    return consumer, streams, offsets


def test_an_emptied_classic_group_becomes_a_streams_group_keeping_its_offsets_and_replays() -> None:
    log, clock = MemoryLog(), Clock()

    async def run() -> tuple[Handlers, Any, Any, int]:
        h = _handlers(log, clock)
        joined = await _consumer_beat(h, "c1", 0)
        assert joined.error is KafkaErrorCode.NONE
        await _consumer_beat(h, "c1", -1)  # leaves: the group is empty
        assert await _admin_commit(h, 42) is KafkaErrorCode.NONE
        clock.now += 100
        streams = await _beat(h, _join("s1", "p1"))
        return h, joined, streams, await _fetched(h)

    h, _, streams, fetched = asyncio.run(run())
    assert streams.error is KafkaErrorCode.NONE
    assert streams.member_epoch == 1
    assert GROUP not in h.coordinator.groups
    assert GROUP in h.streams.coordinator.groups
    assert h.streams.conversions == 1
    assert fetched == 42  # the committed offset stayed under the group id
    # the consumer group's tombstone is written before the streams group's first record
    kinds = [type(r) for r in log.records]
    assert kinds.index(GroupEpochTombstone) < kinds.index(StreamsGroupRecord)
    consumer, replayed, offsets = _replayed(log, clock)
    assert GROUP not in consumer.groups
    assert replayed.snapshot() == h.streams.coordinator.snapshot()
    assert offsets.committed(GROUP, "input", 0) is not None


def test_a_streams_heartbeat_for_a_classic_group_with_members_is_refused_and_changes_nothing() -> None:
    log, clock = MemoryLog(), Clock()

    async def run() -> tuple[Handlers, Any, int]:
        h = _handlers(log, clock)
        await _consumer_beat(h, "c1", 0)
        before = len(log.records)
        refused = await _beat(h, _join("s1", "p1"))
        return h, refused, len(log.records) - before

    h, refused, written = asyncio.run(run())
    assert refused.error is KafkaErrorCode.GROUP_ID_NOT_FOUND
    assert "is not a streams group" in (refused.error_message or "")
    assert "1 member(s)" in (refused.error_message or "")
    assert written == 0
    assert GROUP in h.coordinator.groups
    assert GROUP not in h.streams.coordinator.groups


def test_a_failed_streams_join_converts_nothing() -> None:
    """Kafka drops the deletion's records with a failed heartbeat's: an invalid topology for an
    emptied classic group leaves the classic group in place."""
    log, clock = MemoryLog(), Clock()
    bad = Topology(
        epoch=1,
        subtopologies=(
            Subtopology(subtopology_id="0", source_topics=("input",)),
            Subtopology(subtopology_id="0", source_topics=("input",)),
        ),
    )

    async def run() -> tuple[Handlers, Any]:
        h = _handlers(log, clock)
        await _consumer_beat(h, "c1", 0)
        await _consumer_beat(h, "c1", -1)
        j = _join("s1", "p1")
        request = StreamsGroupHeartbeatRequest(
            group_id=GROUP,
            member_id=j.member_id,
            member_epoch=0,
            rebalance_timeout_ms=j.rebalance_timeout_ms,
            topology=bad,
            process_id=j.process_id,
            active_tasks=(),
            standby_tasks=(),
            warmup_tasks=(),
        )
        return h, await _beat(h, request)

    h, answer = asyncio.run(run())
    assert answer.error is KafkaErrorCode.STREAMS_INVALID_TOPOLOGY
    assert GROUP in h.coordinator.groups
    assert GROUP not in h.streams.coordinator.groups
    assert not any(is_streams_record(r) for r in log.records)


def test_a_classic_join_takes_an_emptied_streams_group_back_and_replays() -> None:
    log, clock = MemoryLog(), Clock()

    async def run() -> tuple[Handlers, Any, Any]:
        h = _handlers(log, clock)
        joined = await _beat(h, _join("s1", "p1"))
        await _beat(
            h,
            StreamsGroupHeartbeatRequest(group_id=GROUP, member_id="s1", member_epoch=-1),
        )
        assert await _admin_commit(h, 7) is KafkaErrorCode.NONE  # allowed: no members
        clock.now += 100
        first = await _classic_join(h)  # v9: MEMBER_ID_REQUIRED, with the id to use
        return h, joined, first

    h, joined, first = asyncio.run(run())
    assert joined.error is KafkaErrorCode.NONE
    assert int(first.error_code.value) == KafkaErrorCode.MEMBER_ID_REQUIRED
    assert GROUP not in h.streams.coordinator.groups
    assert h.streams.conversions == 1
    assert isinstance([r for r in log.records if is_streams_record(r)][-1], StreamsGroupTombstone)
    _, replayed, offsets = _replayed(log, clock)
    assert replayed.groups == {}
    committed = offsets.committed(GROUP, "input", 0)
    assert committed is not None
    assert committed.offset == 7


def test_a_classic_join_for_a_streams_group_with_members_is_an_inconsistent_group_protocol() -> None:
    log, clock = MemoryLog(), Clock()

    async def run() -> tuple[Handlers, Any, Any]:
        h = _handlers(log, clock)
        await _beat(h, _join("s1", "p1"))
        refused = await _classic_join(h)
        consumer = await _consumer_beat(h, "c1", 0)
        return h, refused, consumer

    h, refused, consumer = asyncio.run(run())
    assert int(refused.error_code.value) == KafkaErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert consumer.error is KafkaErrorCode.GROUP_ID_NOT_FOUND  # KIP-848 never converts it
    assert GROUP in h.streams.coordinator.groups
    assert h.streams.conversions == 0
