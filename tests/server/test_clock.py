"""The server's timers follow the clock it is given, not the wall clock: a member that joined is
removed when the injected clock passes its session timeout (with no real time passing), and
not before."""

from __future__ import annotations

import asyncio
import io
import uuid

import pytest

from streamtasks.coordinator import CoordinatorConfig
from streamtasks.embedded import Cluster
from streamtasks.protocol import consumer_group_codec as codec
from streamtasks.protocol.consumer_group import ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatRequest
from streamtasks.runtime.connection import AsyncConnection
from streamtasks.server import CoordinatorServer, ServerConfig

pytestmark = pytest.mark.integration


async def session_expiry(bootstrap: str, topic: str) -> tuple[int, int, int]:
    now = [1_000_000]
    server = CoordinatorServer(
        ServerConfig(
            bootstrap_servers=bootstrap,
            listen_port=0,
            topic=f"_st_clock_{uuid.uuid4().hex[:8]}",
            status_interval_s=3600,
            coordinator=CoordinatorConfig(session_timeout_ms=10_000, heartbeat_interval_ms=1_000),
        ),
        clock=lambda: now[0],
        out=io.StringIO(),
    )
    await server.start()
    conn = await AsyncConnection.open("127.0.0.1", server.port)

    async def members() -> int:
        body = await conn.call_raw(
            69, 1, codec.encode_describe_request(ConsumerGroupDescribeRequest(group_ids=("clock",)), 1)
        )
        return len(codec.decode_describe_response(body, 1).groups[0].members)

    try:
        join = ConsumerGroupHeartbeatRequest(
            group_id="clock",
            member_id="m1",
            member_epoch=0,
            rebalance_timeout_ms=5_000,
            subscribed_topic_names=(topic,),
            topic_partitions=(),
        )
        answer = codec.decode_heartbeat_response(
            await conn.call_raw(68, 1, codec.encode_heartbeat_request(join, 1)), 1
        )
        assert answer.error == 0
        joined = await members()
        now[0] += 9_000  # within the session
        await asyncio.sleep(0.5)
        still = await members()
        now[0] += 2_000  # past it
        await asyncio.sleep(0.5)
        gone = await members()
    finally:
        await conn.close()
        await server.stop()
    return joined, still, gone


def test_session_expires_on_the_injected_clock(kafka: Cluster) -> None:
    topic = f"clock-{uuid.uuid4().hex[:6]}"
    kafka.create_topics({topic: 2})
    assert asyncio.run(session_expiry(kafka.bootstrap_servers, topic)) == (1, 1, 0)
