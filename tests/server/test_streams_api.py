"""The serving glue of streams groups (pure: no broker): StreamsGroupHeartbeat / Describe frames
through :class:`~streamtasks.server.handlers.Handlers`, the records they append to the log and
their replay on a second coordinator (fail-over), one kind of group per id, the OffsetCommit /
OffsetFetch rules of a streams group, ApiVersions, the command's settings."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import io
import struct
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from kio.serial import entity_writer

from streamtasks.coordinator import CoordinatorConfig, GroupCoordinator
from streamtasks.coordinator.record_codec import OffsetCommitRecord
from streamtasks.coordinator.streams import StreamsCoordinatorConfig, StreamsGroupCoordinator
from streamtasks.errors import ConfigError, UnknownAssignorError
from streamtasks.membership.streams.records import tasks_of
from streamtasks.protocol import consumer_group_codec as codec
from streamtasks.protocol.consumer_group import ConsumerGroupHeartbeatRequest
from streamtasks.protocol.errors import KafkaErrorCode
from streamtasks.protocol.streams_group import (
    STREAMS_GROUP_DESCRIBE_API_KEY,
    STREAMS_GROUP_HEARTBEAT_API_KEY,
    KeyValue,
    StreamsGroupDescribeRequest,
    StreamsGroupHeartbeatRequest,
    StreamsGroupHeartbeatResponse,
    StreamsGroupStatus,
    Subtopology,
    TopicInfo,
    Topology,
)
from streamtasks.protocol.streams_group_codec import (
    decode_streams_heartbeat_response,
    encode_streams_heartbeat_request,
)
from streamtasks.protocol.streams_group_describe_codec import (
    decode_streams_describe_response,
    encode_streams_describe_request,
)
from streamtasks.runtime.admin import TopicSpec
from streamtasks.server import add_coordinator_arguments, config_from_args
from streamtasks.server.handlers import REFUSED_APIS, Handlers, advertised_apis
from streamtasks.server.log import decode_record, encode_record, is_streams_record
from streamtasks.server.offset_api import OFFSET_COMMIT, element
from streamtasks.server.offsets import (
    OffsetCommitCheck,
    OffsetStore,
    check_streams_commit,
    check_streams_fetch,
)
from streamtasks.server.wire import RequestHeader, kio_request_class, parse_request
from tests.coordinator.streams.support import GROUP, READY, image, topology


class MemoryLog:
    """The log's interface over a list: every append is durable at once."""

    def __init__(self) -> None:
        self.records: list[Any] = []

    def append(self, records: Any) -> asyncio.Future[None]:
        self.records.extend(records)
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        done.set_result(None)
        return done


class Clock:
    def __init__(self) -> None:
        self.now = 1_000

    def __call__(self) -> int:
        return self.now


def _handlers(
    log: MemoryLog,
    clock: Clock,
    *,
    assignor: str = "high_availability",
    topics: dict[str, int] = READY,
    create_topics: Callable[[list[TopicSpec]], Awaitable[None]] | None = None,
) -> Handlers:
    cluster = image(topics)
    return Handlers(
        coordinator=GroupCoordinator(CoordinatorConfig(), image=cluster),
        offsets=OffsetStore(),
        log=log,  # type: ignore[arg-type]
        clock=clock,
        node_id=7,
        advertised=("127.0.0.1", 9092),
        max_groups=10,
        on_unknown_topics=lambda: None,
        streams=StreamsGroupCoordinator(StreamsCoordinatorConfig(assignor=assignor), image=cluster),
        create_topics=create_topics,
    )


def _body(frame: bytes) -> bytes:
    return frame[4 + 4 + 1 :]  # size, correlation id, the flexible header's tagged fields


def _header(api: int, version: int = 1) -> RequestHeader:
    return RequestHeader(api_key=api, api_version=version, correlation_id=5, client_id="t")


async def _beat(
    h: Handlers, request: StreamsGroupHeartbeatRequest, version: int = 1
) -> StreamsGroupHeartbeatResponse:
    frame = await h.handle(
        _header(STREAMS_GROUP_HEARTBEAT_API_KEY, version),
        encode_streams_heartbeat_request(request, version),
        "h",
    )
    assert frame is not None
    return decode_streams_heartbeat_response(_body(frame), version)


def _join(member_id: str, process: str) -> StreamsGroupHeartbeatRequest:
    return StreamsGroupHeartbeatRequest(
        group_id=GROUP,
        member_id=member_id,
        member_epoch=0,
        rebalance_timeout_ms=30_000,
        topology=topology(),
        process_id=process,
        active_tasks=(),
        standby_tasks=(),
        warmup_tasks=(),
    )


@pytest.mark.parametrize("version", [0, 1])
def test_a_join_is_answered_with_tasks_and_its_records_are_in_the_log(version: int) -> None:
    log, clock = MemoryLog(), Clock()

    async def run() -> StreamsGroupHeartbeatResponse:
        return await _beat(_handlers(log, clock), _join("m1", "p1"), version)

    answer = asyncio.run(run())
    assert answer.error is KafkaErrorCode.NONE
    assert answer.member_epoch == 1
    assert tasks_of(answer.active_tasks) == {("0", p) for p in range(4)}
    assert log.records
    assert all(is_streams_record(r) for r in log.records)


def test_a_second_coordinator_replaying_the_log_continues_the_group() -> None:
    """Fail-over: the records the first process wrote, encoded and decoded as the log topic
    holds them, rebuild the same group; a member heartbeating at its epoch keeps its tasks."""
    log, clock = MemoryLog(), Clock()

    async def first() -> tuple[Handlers, StreamsGroupHeartbeatResponse, StreamsGroupHeartbeatResponse]:
        h = _handlers(log, clock)
        one = await _beat(h, _join("m1", "p1"))
        two = await _beat(h, _join("m2", "p2"))
        return h, one, two

    h1, _, two = asyncio.run(first())
    stored = [decode_record(*encode_record(r)) for r in log.records]
    assert stored == log.records
    clock.now += 3_000
    replayed = StreamsGroupCoordinator(
        StreamsCoordinatorConfig(assignor="high_availability"), image=image(READY)
    )
    replayed.load([r for r in stored if is_streams_record(r)], clock.now)
    assert replayed.snapshot() == h1.streams.coordinator.snapshot()

    async def second() -> StreamsGroupHeartbeatResponse:
        h2 = _handlers(MemoryLog(), clock)
        h2.streams.coordinator = replayed
        return await _beat(
            h2,
            StreamsGroupHeartbeatRequest(
                group_id=GROUP,
                member_id="m2",
                member_epoch=two.member_epoch,
                active_tasks=two.active_tasks,
                standby_tasks=two.standby_tasks,
                warmup_tasks=two.warmup_tasks,
            ),
        )

    again = asyncio.run(second())
    assert again.error is KafkaErrorCode.NONE
    assert again.member_epoch >= two.member_epoch


def test_describe_names_the_groups_assignor_and_members() -> None:
    log, clock = MemoryLog(), Clock()

    async def run() -> Any:
        h = _handlers(log, clock, assignor="sticky")
        await _beat(h, _join("m1", "p1"))
        frame = await h.handle(
            _header(STREAMS_GROUP_DESCRIBE_API_KEY),
            encode_streams_describe_request(StreamsGroupDescribeRequest(group_ids=(GROUP, "nope")), 1),
            "h",
        )
        assert frame is not None
        return decode_streams_describe_response(_body(frame), 1)

    described = asyncio.run(run())
    group, unknown = described.groups
    assert group.error is KafkaErrorCode.NONE
    assert group.assignor_name == "sticky"
    assert [m.member_id for m in group.members] == ["m1"]
    assert unknown.error is KafkaErrorCode.GROUP_ID_NOT_FOUND


def test_one_kind_of_group_per_id() -> None:
    log, clock = MemoryLog(), Clock()

    async def run() -> tuple[Any, StreamsGroupHeartbeatResponse]:
        h = _handlers(log, clock)
        await _beat(h, _join("m1", "p1"))
        consumer = ConsumerGroupHeartbeatRequest(
            group_id=GROUP,
            member_id="c1",
            member_epoch=0,
            rebalance_timeout_ms=30_000,
            subscribed_topic_names=("input",),
        )
        frame = await h.handle(_header(68), codec.encode_heartbeat_request(consumer, 1), "h")
        assert frame is not None
        refused = codec.decode_heartbeat_response(_body(frame), 1)
        await h.handle(
            _header(68),
            codec.encode_heartbeat_request(
                ConsumerGroupHeartbeatRequest(
                    group_id="plain",
                    member_id="c1",
                    member_epoch=0,
                    rebalance_timeout_ms=30_000,
                    subscribed_topic_names=("input",),
                ),
                1,
            ),
            "h",
        )
        other = await _beat(h, _plain_join())
        return refused, other

    refused, other = asyncio.run(run())
    assert refused.error is KafkaErrorCode.GROUP_ID_NOT_FOUND
    assert other.error is KafkaErrorCode.GROUP_ID_NOT_FOUND


def _plain_join() -> StreamsGroupHeartbeatRequest:
    j = _join("m9", "p9")
    return StreamsGroupHeartbeatRequest(
        group_id="plain",
        member_id=j.member_id,
        member_epoch=0,
        rebalance_timeout_ms=j.rebalance_timeout_ms,
        topology=j.topology,
        process_id=j.process_id,
        active_tasks=(),
        standby_tasks=(),
        warmup_tasks=(),
    )


def test_a_streams_member_commits_and_fetches_at_its_epoch_only() -> None:
    log, clock = MemoryLog(), Clock()

    async def run() -> Handlers:
        h = _handlers(log, clock)
        await _beat(h, _join("m1", "p1"))
        return h

    group = asyncio.run(run()).streams.coordinator.group(GROUP)
    assert group is not None

    def commit(member: str, epoch: int, version: int = 9) -> KafkaErrorCode:
        check = OffsetCommitCheck(group_id=GROUP, member_id=member, member_epoch=epoch, api_version=version)
        return check_streams_commit(group, check)

    assert commit("m1", 1) is KafkaErrorCode.NONE
    assert commit("m1", 2) is KafkaErrorCode.STALE_MEMBER_EPOCH
    assert commit("m1", 1, version=8) is KafkaErrorCode.UNSUPPORTED_VERSION
    assert commit("ghost", 1) is KafkaErrorCode.UNKNOWN_MEMBER_ID
    assert commit("", -1) is KafkaErrorCode.UNKNOWN_MEMBER_ID  # an admin commit while members run
    assert check_streams_fetch(group, None, -1) is KafkaErrorCode.NONE
    assert check_streams_fetch(group, "m1", 1) is KafkaErrorCode.NONE
    assert check_streams_fetch(group, "m1", 0) is KafkaErrorCode.STALE_MEMBER_EPOCH


def commit_frame(member_id: str, epoch: int, offset: int) -> bytes:
    """An OffsetCommit v9 body for partition 0 of ``input`` in group ``app``."""
    cls = kio_request_class(OFFSET_COMMIT, 9)
    topic_cls = element(cls, "topics")
    partition_cls = element(topic_cls, "partitions")
    request = cls(
        group_id=GROUP,
        generation_id_or_member_epoch=epoch,
        member_id=member_id,
        group_instance_id=None,
        topics=(
            topic_cls(
                name="input",
                partitions=(
                    partition_cls(
                        partition_index=0,
                        committed_offset=offset,
                        committed_leader_epoch=-1,
                        committed_metadata="",
                    ),
                ),
            ),
        ),
    )
    buf = io.BytesIO()
    entity_writer(cls)(buf, request)
    return buf.getvalue()


def test_an_offset_commit_of_a_streams_member_is_written() -> None:
    log, clock = MemoryLog(), Clock()

    async def run() -> tuple[Handlers, list[Any]]:
        h = _handlers(log, clock)
        await _beat(h, _join("m1", "p1"))
        before = len(log.records)
        await h.handle(_header(OFFSET_COMMIT, 9), commit_frame("m1", 1, 42), "h")
        return h, log.records[before:]

    h, written = asyncio.run(run())
    assert [(r.topic, r.partition, r.offset) for r in written if isinstance(r, OffsetCommitRecord)] == [
        ("input", 0, 42)
    ]
    committed = h.offsets.committed("app", "input", 0)
    assert committed is not None
    assert committed.offset == 42


def test_api_versions_advertise_streams_group_apis() -> None:
    broker = {18: (0, 4), 88: (0, 1), 89: (0, 1), 10: (0, 6)}
    apis = advertised_apis(broker)
    assert apis[88] == (0, 1)
    assert apis[89] == (0, 1)
    assert apis_without_broker_support() == {88: (0, 1), 89: (0, 1)}
    assert not {88, 89} & REFUSED_APIS


def apis_without_broker_support() -> dict[int, tuple[int, int]]:
    """The server serves 88 / 89 itself: it advertises them even before a broker that has none."""
    apis = advertised_apis({18: (0, 4)})
    return {k: v for k, v in apis.items() if k in (88, 89)}


def _args(*extra: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_coordinator_arguments(parser)
    return parser.parse_args(["--bootstrap-servers", "b:9092", *extra])


def test_the_command_picks_streams_assignors_per_group() -> None:
    default = config_from_args(_args(), "b:9092").streams
    assert default.assignor == "high_availability"
    cfg = config_from_args(
        _args(
            "--streams-assignor",
            "sticky",
            "--streams-group-assignor",
            "wc=high_availability",
            "--streams-num-standby-replicas",
            "1",
            "--session-timeout-ms",
            "6000",
            "--heartbeat-interval-ms",
            "500",
        ),
        "b:9092",
    ).streams
    assert cfg.assignor_name("wc") == "high_availability"
    assert cfg.assignor_name("other") == "sticky"
    assert (cfg.num_standby_replicas, cfg.session_timeout_ms, cfg.heartbeat_interval_ms) == (1, 6000, 500)
    coordinator = StreamsGroupCoordinator(cfg)
    assert coordinator.assignor("wc").name == "high_availability"
    assert coordinator.assignor("other").name == "sticky"


def test_the_command_paces_streams_targets_as_asked() -> None:
    default = config_from_args(_args(), "b:9092").streams
    assert (default.initial_rebalance_delay_ms, default.assignment_interval_ms) == (0, 0)
    kafka = config_from_args(
        _args("--streams-initial-rebalance-delay-ms", "3000", "--streams-assignment-interval-ms", "1000"),
        "b:9092",
    ).streams
    assert (kafka.initial_rebalance_delay_ms, kafka.assignment_interval_ms) == (3000, 1000)


def test_the_command_refuses_an_unknown_assignor_and_a_malformed_pair() -> None:
    with pytest.raises(UnknownAssignorError, match="available"):
        config_from_args(_args("--streams-assignor", "nope"), "b:9092")
    with pytest.raises(ConfigError, match="GROUP=NAME"):
        config_from_args(_args("--streams-group-assignor", "wc"), "b:9092")


@pytest.mark.parametrize("api", [STREAMS_GROUP_HEARTBEAT_API_KEY, STREAMS_GROUP_DESCRIBE_API_KEY])
@pytest.mark.parametrize("version", [0, 1])
def test_request_frames_of_both_versions_are_read(api: int, version: int) -> None:
    """The session reads the header before the handler runs: v1 of both APIs, which kio has no
    schema for, is flexible (request header v2) as v0 is."""
    body = (
        encode_streams_heartbeat_request(_join("m1", "p1"), version)
        if api == STREAMS_GROUP_HEARTBEAT_API_KEY
        else encode_streams_describe_request(StreamsGroupDescribeRequest(group_ids=(GROUP,)), version)
    )
    payload = struct.pack(">hhih", api, version, 9, 1) + b"c" + b"\0" + body
    header, parsed = parse_request(payload)
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (
        api,
        version,
        9,
        "c",
    )
    assert parsed == body


def test_missing_internal_topics_are_created_by_the_coordinator() -> None:
    """MISSING_INTERNAL_TOPICS: the coordinator creates the changelog with the subtopology's
    partition count and the declared configs (Kafka's broker does; Java clients wait for it)."""
    created: list[list[TopicSpec]] = []
    log, clock = MemoryLog(), Clock()
    declared = Topology(
        epoch=1,
        subtopologies=(
            Subtopology(
                subtopology_id="0",
                source_topics=("input",),
                state_changelog_topics=(
                    TopicInfo(
                        name="app-store-changelog",
                        topic_configs=(KeyValue(key="cleanup.policy", value="compact"),),
                    ),
                ),
            ),
        ),
    )

    async def create(specs: list[TopicSpec]) -> None:
        created.append(specs)

    async def run() -> StreamsGroupHeartbeatResponse:
        h = _handlers(log, clock, topics={"input": 4}, create_topics=create)
        answer = await _beat(h, dataclasses.replace(_join("m1", "p1"), topology=declared))
        await asyncio.sleep(0)  # the creation task runs
        await _beat(h, dataclasses.replace(_join("m2", "p2"), topology=declared))
        await asyncio.sleep(0)
        return answer

    answer = asyncio.run(run())
    assert [s.status_code for s in answer.status or ()] == [StreamsGroupStatus.MISSING_INTERNAL_TOPICS]
    assert created[0] == [
        TopicSpec(name="app-store-changelog", partitions=4, configs={"cleanup.policy": "compact"})
    ]
    assert len(created) == 2  # asked again while the topic is still absent from the image
