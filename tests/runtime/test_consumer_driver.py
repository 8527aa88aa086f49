"""The KIP-848 path of the runtime without a broker: frames, the epoch-carrying commit, the
config switch, and how a Consumer builds its member. Live behaviour:
tests/integration/test_consumer_kip848.py."""

from __future__ import annotations

import asyncio
import base64
import datetime
import io
import struct
import uuid
from typing import Any

import pytest
from kio.schema.consumer_group_heartbeat.v1.response import ConsumerGroupHeartbeatResponse as KResponse
from kio.schema.offset_commit.v9.request import OffsetCommitRequest as KCommitV9
from kio.serial import entity_writer

from assignors.partition.range import RangeAssignor
from streamtasks.errors import BrokerError, ConfigError
from streamtasks.membership.classic import ClassicMember, CoordinatorDiscovered, FindCoordinator
from streamtasks.membership.consumer import ConsumerMember, MetadataUpdated, ResponseReceived, SendRequest
from streamtasks.protocol import classic_group as cg
from streamtasks.protocol.consumer_group import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    HeartbeatAssignment,
    TopicIdPartitions,
)
from streamtasks.protocol.consumer_group_codec import decode_heartbeat_response, encode_heartbeat_request
from streamtasks.protocol.consumer_group_kio import heartbeat_request_to_kio, heartbeat_response_to_kio
from streamtasks.protocol.errors import KafkaErrorCode
from streamtasks.runtime.config import make_config
from streamtasks.runtime.connection import GroupCoordinatorClient
from streamtasks.runtime.consumer import CommitFailedError, Consumer
from streamtasks.runtime.consumer_driver import HEARTBEAT_VERSION, ConsumerGroupDriver, new_member_id
from streamtasks.runtime.framing import encode_raw_request, encode_request, split_flexible_response
from streamtasks.runtime.group_wire import from_wire, offset_commit_v9
from topology.ids import TopicPartition

TOPIC_ID = uuid.UUID("6c1f2a2e-8d2b-4f57-9d3c-4f0e2b1a9c77")


def test_a_raw_heartbeat_frame_is_the_frame_kio_writes() -> None:
    request = ConsumerGroupHeartbeatRequest(
        group_id="g",
        member_id=new_member_id(),
        member_epoch=0,
        instance_id="i-1",
        rebalance_timeout_ms=10_000,
        subscribed_topic_names=("orders",),
        server_assignor="range",
        topic_partitions=(),
    )
    raw = encode_raw_request(
        68,
        HEARTBEAT_VERSION,
        encode_heartbeat_request(request, HEARTBEAT_VERSION),
        correlation_id=9,
        client_id="c",
    )
    kio = encode_request(
        heartbeat_request_to_kio(request, HEARTBEAT_VERSION), correlation_id=9, client_id="c"
    )
    assert raw == kio


def test_a_flexible_response_frame_splits_into_correlation_id_and_body() -> None:
    response = ConsumerGroupHeartbeatResponse(
        error=KafkaErrorCode.NONE,
        member_epoch=7,
        heartbeat_interval_ms=500,
        assignment=HeartbeatAssignment(
            topic_partitions=(TopicIdPartitions(topic_id=TOPIC_ID, partitions=(0, 2)),)
        ),
    )
    entity = heartbeat_response_to_kio(response, HEARTBEAT_VERSION)
    body = io.BytesIO()
    entity_writer(KResponse)(body, entity)
    # response header v1: the correlation id, then an empty tagged-field section
    correlation_id, rest = split_flexible_response(b"\x00\x00\x00\x2a\x00" + body.getvalue())
    assert correlation_id == 42
    assert decode_heartbeat_response(rest, HEARTBEAT_VERSION) == response


def test_the_commit_of_a_kip848_member_is_offset_commit_v9_with_the_member_epoch() -> None:
    request = cg.OffsetCommitRequest(
        group_id="g",
        generation_id=12,
        member_id="m",
        group_instance_id=None,
        offsets=(cg.CommittedOffset(partition=TopicPartition("t", 1), offset=40),),
    )
    entity = offset_commit_v9(request)
    assert isinstance(entity, KCommitV9)
    assert entity.__version__ == 9
    assert (int(entity.generation_id_or_member_epoch), entity.member_id) == (12, "m")
    assert [
        (str(t.name), [(int(p.partition_index), int(p.committed_offset)) for p in t.partitions])
        for t in entity.topics
    ] == [("t", [(1, 40)])]


def test_an_offset_commit_v9_response_decodes_like_v8() -> None:
    from kio.schema.errors import ErrorCode
    from kio.schema.offset_commit.v9 import response as m
    from kio.static.primitive import i32

    wire = m.OffsetCommitResponse(
        throttle_time=i32(0),  # type: ignore[arg-type]
        topics=(
            m.OffsetCommitResponseTopic(
                name="t",  # type: ignore[arg-type]
                partitions=(
                    m.OffsetCommitResponsePartition(partition_index=i32(1), error_code=ErrorCode(113)),
                ),
            ),
        ),
    )
    assert from_wire(wire) == cg.OffsetCommitResponse(
        errors=((TopicPartition("t", 1), KafkaErrorCode.STALE_MEMBER_EPOCH),)
    )


def test_member_ids_look_like_kafkas() -> None:
    ids = {new_member_id() for _ in range(100)}
    assert len(ids) == 100
    for member_id in ids:
        assert len(member_id) == 22
        assert len(base64.urlsafe_b64decode(member_id + "==")) == 16


def test_group_protocol_and_remote_assignor_take_kafka_names() -> None:
    config = make_config(
        {
            "bootstrap.servers": "h:1",
            "group.id": "g",
            "group.protocol": "consumer",
            "group.remote.assignor": "range",
        }
    )
    assert (config.group_protocol, config.group_remote_assignor) == ("consumer", "range")
    assert make_config(bootstrap_servers="h:1", group_id="g").group_protocol == "classic"


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"group_remote_assignor": "uniform"}, "group.remote.assignor needs group.protocol=consumer"),
        ({"group_protocol": "eager"}, "group_protocol"),
        ({"group_protocol": "consumer", "assignors": ["range"]}, "partition.assignment.strategy is for"),
    ],
)
def test_bad_protocol_settings_are_config_errors(settings: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        make_config(bootstrap_servers="h:1", group_id="g", **settings)


def test_a_bare_consumer_cannot_join_a_streams_group() -> None:
    # A streams group member declares a topology: only an App has one.
    with pytest.raises(ConfigError, match="group_protocol='streams' declares a topology"):
        Consumer("a", bootstrap_servers="h:1", group_id="g", group_protocol="streams")


def test_a_consumer_protocol_consumer_runs_the_kip848_member() -> None:
    consumer = Consumer(
        ["b", "a"],
        bootstrap_servers="h:1",
        group_id="g",
        group_protocol="consumer",
        group_remote_assignor="uniform",
        group_instance_id="i",
    )
    member = consumer._member
    assert isinstance(member, ConsumerMember)
    assert member.config.server_assignor == "uniform"
    assert member.config.client_assignors == ()
    assert member.config.topics == ("a", "b")
    assert member.config.group_instance_id == "i"
    assert len(consumer.member_id) == 22
    assert consumer.generation == 0
    assert consumer.enforce_rebalance() is False  # not started
    assert isinstance(Consumer("a", bootstrap_servers="h:1", group_id="g")._member, ClassicMember)


def test_explicit_assignors_under_the_consumer_protocol_are_client_side() -> None:
    consumer = Consumer(
        "a",
        bootstrap_servers="h:1",
        group_id="g",
        group_protocol="consumer",
        partition_assignors=[RangeAssignor()],
    )
    assert isinstance(consumer._member, ConsumerMember)
    assert [a.name for a in consumer._member.config.client_assignors] == ["range"]


def test_user_data_providers_are_for_the_classic_protocol() -> None:
    with pytest.raises(ConfigError, match="classic protocol"):
        Consumer(
            "a",
            bootstrap_servers="h:1",
            group_id="g",
            group_protocol="consumer",
            user_data_provider=lambda *_: b"",
        )


def _api_versions_server(highest_heartbeat: int | None) -> Any:
    """A server that answers ApiVersions only, listing Metadata and, unless ``None``,
    ConsumerGroupHeartbeat up to ``highest_heartbeat``."""
    from kio.schema.api_versions.v3 import response as m
    from kio.schema.errors import ErrorCode
    from kio.schema.response_header.v0.header import ResponseHeader
    from kio.static.primitive import i16, i32Timedelta

    keys = [m.ApiVersion(api_key=i16(3), min_version=i16(0), max_version=i16(12))]
    if highest_heartbeat is not None:
        keys.append(m.ApiVersion(api_key=i16(68), min_version=i16(0), max_version=i16(highest_heartbeat)))
    answer = m.ApiVersionsResponse(
        error_code=ErrorCode.none,
        api_keys=tuple(keys),
        throttle_time=i32Timedelta.parse(datetime.timedelta(0)),
    )

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        size = struct.unpack(">i", await reader.readexactly(4))[0]
        frame = await reader.readexactly(size)
        body = io.BytesIO()
        entity_writer(ResponseHeader)(
            body, ResponseHeader(correlation_id=struct.unpack_from(">i", frame, 4)[0])
        )
        entity_writer(m.ApiVersionsResponse)(body, answer)
        writer.write(struct.pack(">i", len(body.getvalue())) + body.getvalue())
        await writer.drain()
        writer.close()

    return serve


@pytest.mark.parametrize(("highest", "message"), [(None, "does not serve"), (0, "serves only v0 of")])
def test_a_cluster_without_consumer_group_heartbeat_v1_is_refused_at_start(
    highest: int | None, message: str
) -> None:
    async def run() -> str:
        server = await asyncio.start_server(_api_versions_server(highest), "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        consumer = Consumer(
            "a", bootstrap_servers=f"127.0.0.1:{port}", group_id="g", group_protocol="consumer"
        )
        try:
            await consumer.start()
        except BrokerError as exc:
            return str(exc)
        finally:
            server.close()
        return "started"

    said = asyncio.run(run())
    assert message in said
    assert "group_protocol='classic'" in said


# -- Consumer.commit and STALE_MEMBER_EPOCH ---------------------------------------------------


def _joined(consumer: Consumer, epoch: int) -> None:
    """Take the consumer's KIP-848 member through a join answered at ``epoch`` with foo-0."""
    member = consumer._member
    assert isinstance(member, ConsumerMember)
    member.handle(MetadataUpdated(partitions_per_topic={"foo": 1}, topic_ids={"foo": TOPIC_ID}), 0)
    find = next(a for a in member.poll(0) if isinstance(a, FindCoordinator))
    member.handle(CoordinatorDiscovered(request_id=find.request_id), 0)
    _answer_heartbeat(member, 0, epoch)
    consumer._owned = frozenset({TopicPartition("foo", 0)})
    consumer._positions = {TopicPartition("foo", 0): 10}


def _answer_heartbeat(member: ConsumerMember, now_ms: int, epoch: int) -> None:
    sent = next(a for a in member.poll(now_ms) if isinstance(a, SendRequest))
    answer = ConsumerGroupHeartbeatResponse(
        error=KafkaErrorCode.NONE,
        member_epoch=epoch,
        heartbeat_interval_ms=500,
        assignment=HeartbeatAssignment(
            topic_partitions=(TopicIdPartitions(topic_id=TOPIC_ID, partitions=(0,)),)
        ),
    )
    member.handle(ResponseReceived(request_id=sent.request_id, response=answer), now_ms)


class _CommitAnswers:
    """Stands in for the coordinator connection: answers each OffsetCommit with the next code
    and records the epoch it carried; ``then`` runs after the first answer."""

    def __init__(self, codes: list[KafkaErrorCode], then: Any = None) -> None:
        self.codes = codes
        self.epochs: list[int] = []
        self.then = then

    async def send_entity(
        self, entity: Any, response_cls: Any, *, timeout_s: float
    ) -> cg.OffsetCommitResponse:
        self.epochs.append(int(entity.generation_id_or_member_epoch))
        code = self.codes.pop(0)
        if self.then is not None:
            asyncio.get_running_loop().call_later(0.05, self.then)
            self.then = None
        return cg.OffsetCommitResponse(errors=((TopicPartition("foo", 0), code),))


def _consumer() -> Consumer:
    return Consumer(
        "foo", bootstrap_servers="h:1", group_id="g", group_protocol="consumer", request_timeout_ms=1000
    )


def test_a_stale_epoch_commit_is_sent_again_with_the_new_epoch() -> None:
    consumer = _consumer()
    _joined(consumer, 5)
    member = consumer._member
    assert isinstance(member, ConsumerMember)
    answers = _CommitAnswers(
        [KafkaErrorCode.STALE_MEMBER_EPOCH, KafkaErrorCode.NONE],
        then=lambda: _answer_heartbeat(member, 10_000, 6),
    )
    consumer._client = answers  # type: ignore[assignment]
    asyncio.run(consumer.commit())
    assert answers.epochs == [5, 6]


def test_a_stale_epoch_commit_fails_when_no_new_epoch_comes() -> None:
    consumer = _consumer()
    _joined(consumer, 5)
    consumer._client = _CommitAnswers([KafkaErrorCode.STALE_MEMBER_EPOCH])  # type: ignore[assignment]
    with pytest.raises(CommitFailedError, match="STALE_MEMBER_EPOCH"):
        asyncio.run(consumer.commit())


def test_a_stale_epoch_commit_fails_for_a_partition_no_longer_owned() -> None:
    consumer = _consumer()
    _joined(consumer, 5)
    member = consumer._member
    assert isinstance(member, ConsumerMember)

    def moved() -> None:
        _answer_heartbeat(member, 10_000, 6)
        consumer._owned = frozenset()  # what assignment_changed does when the partition moved

    consumer._client = _CommitAnswers([KafkaErrorCode.STALE_MEMBER_EPOCH], then=moved)  # type: ignore[assignment]
    with pytest.raises(CommitFailedError, match="no longer owned"):
        asyncio.run(consumer.commit({TopicPartition("foo", 0): 10}))


def test_a_removed_member_commit_fails_at_once() -> None:
    consumer = _consumer()
    _joined(consumer, 5)
    answers = _CommitAnswers([KafkaErrorCode.UNKNOWN_MEMBER_ID])
    consumer._client = answers  # type: ignore[assignment]
    with pytest.raises(CommitFailedError, match="UNKNOWN_MEMBER_ID"):
        asyncio.run(consumer.commit())
    assert answers.epochs == [5]


# -- client-side assignors' metadata from their hook ------------------------------------------


class _CountingAssignor(RangeAssignor):
    """``range`` writing user data that changes with each call (as task offset sums do)."""

    def __init__(self) -> None:
        self.calls = 0

    def subscription_user_data(
        self, *, topics: tuple[str, ...], previous: tuple[TopicPartition, ...], generation: int | None
    ) -> bytes:
        self.calls += 1
        return f"{self.calls}:{','.join(topics)}:{len(previous)}:{generation}".encode()


def _heartbeat(member: ConsumerMember, now_ms: int) -> tuple[int, ConsumerGroupHeartbeatRequest]:
    sent = next(a for a in member.poll(now_ms) if isinstance(a, SendRequest))
    assert isinstance(sent.request, ConsumerGroupHeartbeatRequest)
    return sent.request_id, sent.request


def test_client_assignor_metadata_is_written_by_its_hook_before_the_first_heartbeat_and_on_enforce() -> None:
    """The driver posts each client-side assignor's metadata as its ``subscription_user_data``
    hook writes it (the streams assignor: process id and task offset sums): before the first
    heartbeat, and again with ``enforce_rebalance`` so the assignor sees what changed."""
    assignor = _CountingAssignor()
    consumer = Consumer(
        "foo",
        bootstrap_servers="h:1",
        group_id="g",
        group_protocol="consumer",
        partition_assignors=[assignor],
    )
    member = consumer._member
    assert isinstance(member, ConsumerMember)
    driver = ConsumerGroupDriver(member, GroupCoordinatorClient("h:1", "g"), consumer)

    def feed_posted(now_ms: int) -> None:
        while not driver._events.empty():
            member.handle(driver._events.get_nowait(), now_ms)

    driver.refresh_assignor_metadata()
    feed_posted(0)
    member.handle(MetadataUpdated(partitions_per_topic={"foo": 1}, topic_ids={"foo": TOPIC_ID}), 0)
    find = next(a for a in member.poll(0) if isinstance(a, FindCoordinator))
    member.handle(CoordinatorDiscovered(request_id=find.request_id), 0)
    request_id, first = _heartbeat(member, 0)
    assert first.client_assignors is not None
    assert [(a.name, a.metadata_bytes) for a in first.client_assignors] == [("range", b"1:foo:0:None")]
    answer = ConsumerGroupHeartbeatResponse(
        error=KafkaErrorCode.NONE,
        member_epoch=3,
        heartbeat_interval_ms=500,
        assignment=HeartbeatAssignment(
            topic_partitions=(TopicIdPartitions(topic_id=TOPIC_ID, partitions=(0,)),)
        ),
    )
    member.handle(ResponseReceived(request_id=request_id, response=answer), 0)
    assert driver.enforce_rebalance("a warm-up caught up")
    feed_posted(1_000)
    _, again = _heartbeat(member, 1_000)
    assert again.client_assignors is not None
    (sent,) = again.client_assignors
    assert sent.metadata_bytes == b"2:foo:1:3"
    assert sent.reason != first.client_assignors[0].reason
