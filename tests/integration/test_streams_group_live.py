"""The streams-group codecs against the embedded Apache Kafka 4.4.0 (issue 29, item 1): a
StreamsGroupHeartbeat v0 / v1 joins a one-member streams group with a topology (one
subtopology, one source topic, one state changelog the broker must create), heartbeats until
the broker assigns every task, StreamsGroupDescribe v0 / v1 shows the member with that
assignment and the configured topology, and the member leaves. What the broker needs is in
docs/streams-groups.md."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from streamtasks.embedded import Cluster, EmbeddedBroker
from streamtasks.protocol.errors import KafkaErrorCode
from streamtasks.protocol.streams_group import (
    STREAMS_GROUP_DESCRIBE_API_KEY,
    STREAMS_GROUP_HEARTBEAT_API_KEY,
    StreamsGroupDescribeRequest,
    StreamsGroupHeartbeatRequest,
    StreamsGroupHeartbeatResponse,
    StreamsGroupStatus,
    Subtopology,
    TaskIds,
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
from streamtasks.runtime.connection import ConnectionLost, GroupCoordinatorClient
from streamtasks.runtime.consumer_driver import new_member_id

pytestmark = pytest.mark.integration

WAIT_S = 60


@pytest.fixture(scope="module")
def streams_kafka(kafka: Cluster) -> Cluster:
    """The test cluster, or a skip where it has no streams-group coordinator."""
    if isinstance(kafka, EmbeddedBroker):
        pytest.skip("Tansu does not serve StreamsGroupHeartbeat (API 88); run with STREAMTASKS_BROKER=kafka")
    served = kafka.api_versions()
    if served.get(STREAMS_GROUP_HEARTBEAT_API_KEY, (0, -1))[1] < 1:
        pytest.skip("the cluster does not serve StreamsGroupHeartbeat v1 (API 88)")
    return kafka


async def heartbeat(
    client: GroupCoordinatorClient, request: StreamsGroupHeartbeatRequest, version: int
) -> StreamsGroupHeartbeatResponse:
    body = encode_streams_heartbeat_request(request, version)
    raw = await client.send_raw(STREAMS_GROUP_HEARTBEAT_API_KEY, version, body, timeout_s=10)
    return decode_streams_heartbeat_response(raw, version)


async def find_coordinator(client: GroupCoordinatorClient, deadline: float) -> None:
    """A freshly started broker answers COORDINATOR_NOT_AVAILABLE until __consumer_offsets exists."""
    while True:
        try:
            await client.ensure_coordinator()
            return
        except ConnectionLost:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.5)


async def join_until_assigned(
    bootstrap: str, group: str, topic: str, version: int
) -> tuple[list[StreamsGroupHeartbeatResponse], StreamsGroupHeartbeatResponse]:
    """Join, heartbeat (reporting the tasks the broker gave) until every task is active here;
    every response and the describe afterwards; then leave."""
    client = GroupCoordinatorClient(bootstrap, group)
    member_id, process_id = new_member_id(), str(uuid.uuid4())
    topology = Topology(
        epoch=0,
        subtopologies=(
            Subtopology(
                subtopology_id="0",
                source_topics=(topic,),
                state_changelog_topics=(TopicInfo(name=f"{group}-store-changelog", topic_configs=()),),
            ),
        ),
    )
    request = StreamsGroupHeartbeatRequest(
        group_id=group,
        member_id=member_id,
        member_epoch=0,
        rebalance_timeout_ms=10_000,
        topology=topology,
        active_tasks=(),
        standby_tasks=(),
        warmup_tasks=(),
        process_id=process_id,
        client_tags=(),
        task_offsets=(),
        task_end_offsets=(),
    )
    responses: list[StreamsGroupHeartbeatResponse] = []
    owned: tuple[TaskIds, ...] = ()
    deadline = time.monotonic() + WAIT_S
    try:
        await find_coordinator(client, deadline)
        while True:
            response = await heartbeat(client, request, version)
            if response.error.retriable:  # COORDINATOR_LOAD_IN_PROGRESS on a fresh broker
                assert time.monotonic() < deadline, response
                await asyncio.sleep(0.5)
                continue
            responses.append(response)
            assert response.error is KafkaErrorCode.NONE, response
            if response.active_tasks is not None:
                owned = response.active_tasks
            if owned == (TaskIds(subtopology_id="0", partitions=(0, 1)),):
                break
            assert time.monotonic() < deadline, responses[-3:]
            await asyncio.sleep(response.heartbeat_interval_ms / 1000)
            request = StreamsGroupHeartbeatRequest(
                group_id=group,
                member_id=member_id,
                member_epoch=response.member_epoch,
                active_tasks=owned,
                standby_tasks=(),
                warmup_tasks=(),
            )
        leave = StreamsGroupHeartbeatRequest(group_id=group, member_id=member_id, member_epoch=-1)
        describe_body = encode_streams_describe_request(
            StreamsGroupDescribeRequest(group_ids=(group,)), version
        )
        raw = await client.send_raw(STREAMS_GROUP_DESCRIBE_API_KEY, version, describe_body, timeout_s=10)
        described = decode_streams_describe_response(raw, version)
        left = await heartbeat(client, leave, version)
    finally:
        await client.close()
    (found,) = described.groups
    assert found.error is KafkaErrorCode.NONE, found
    (member,) = found.members
    assert member.member_id == member_id
    assert member.process_id == process_id
    assert member.assignment.active_tasks == owned
    assert found.topology is not None
    assert found.topology.subtopologies is not None
    (sub,) = found.topology.subtopologies
    assert sub.source_topics == (topic,)
    assert [t.name for t in sub.state_changelog_topics] == [f"{group}-store-changelog"]
    assert sub.state_changelog_topics[0].partitions == 2  # set by the broker from the source
    if version >= 1:
        assert found.assignor_name == "sticky"
    assert left.member_epoch == -1
    assert left.error is KafkaErrorCode.NONE
    return responses, left


@pytest.mark.parametrize("version", [0, 1])
def test_a_streams_member_joins_gets_its_tasks_is_described_and_leaves(
    streams_kafka: Cluster, version: int
) -> None:
    group = f"streams-codec-v{version}-{uuid.uuid4().hex[:8]}"
    topic = f"{group}-in"
    streams_kafka.create_topics({topic: 2})
    responses, _ = asyncio.run(join_until_assigned(streams_kafka.bootstrap_servers, group, topic, version))
    first = responses[0]
    assert first.member_epoch >= 1
    assert first.heartbeat_interval_ms == 500
    assert first.task_offset_interval_ms > 0
    if version == 0:
        assert first.acceptable_recovery_lag == -1  # an int32 legacy field instead
    statuses = {s.status_code for r in responses for s in r.status or ()}
    # The broker creates the changelog itself; a member may see MISSING_INTERNAL_TOPICS meanwhile,
    # and MISSING_SOURCE_TOPICS while the just-created source topic is not yet in the broker's
    # metadata image (seen once in a clean-clone CI run; docs/streams-groups.md).
    transient = {StreamsGroupStatus.MISSING_INTERNAL_TOPICS, StreamsGroupStatus.MISSING_SOURCE_TOPICS}
    assert statuses <= transient, responses
    print(
        f"\nStreamsGroupHeartbeat v{version}: assigned after {len(responses)} heartbeat(s), "
        f"statuses seen {sorted(statuses)}, epoch {responses[-1].member_epoch}, "
        f"TaskOffsetIntervalMs {first.task_offset_interval_ms}, "
        f"AcceptableRecoveryLag {first.acceptable_recovery_lag}"
        f" / legacy {first.acceptable_recovery_lag_legacy}"
    )
