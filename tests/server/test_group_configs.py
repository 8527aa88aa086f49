"""DescribeConfigs of GROUP resources answered by ``streamtasks coordinator`` with its own
consumer-group session timeout and heartbeat interval (not forwarded: the backing cluster's
values are not the ones this coordinator expires members after)."""

from __future__ import annotations

import asyncio
import io
import struct
import uuid

import pytest
from kio.schema.describe_configs.v4 import request as describe_req
from kio.schema.describe_configs.v4.response import DescribeConfigsResponse
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i8

from streamtasks.embedded import Cluster
from streamtasks.runtime.consumer_driver import open_kip848_bootstrap
from streamtasks.runtime.group_session import coordinator_session_timeout, describe_group_session_request
from streamtasks.server.group_configs import GROUP_RESOURCE, describe_group_configs
from tests.server.support import ServerProcess

TOPIC_RESOURCE = 2


def body(request: describe_req.DescribeConfigsRequest) -> bytes:
    buf = io.BytesIO()
    entity_writer(describe_req.DescribeConfigsRequest)(buf, request)
    return buf.getvalue()


def decoded(frame: bytes) -> DescribeConfigsResponse:
    (correlation_id,) = struct.unpack_from(">i", frame, 4)
    assert correlation_id == 7
    response, _ = entity_reader(DescribeConfigsResponse)(memoryview(frame)[4:], 5)  # after the header
    return response


def answer(request: describe_req.DescribeConfigsRequest) -> bytes | None:
    return describe_group_configs(4, 7, body(request), session_timeout_ms=6_000, heartbeat_interval_ms=500)


def test_a_group_resource_is_answered_with_the_coordinators_values() -> None:
    frame = answer(describe_group_session_request("g"))
    assert frame is not None
    (result,) = decoded(frame).results
    assert (int(result.resource_type), result.resource_name, result.error_code.value) == (
        GROUP_RESOURCE,
        "g",
        0,
    )
    assert [(c.name, c.value, c.read_only) for c in result.configs] == [
        ("consumer.session.timeout.ms", "6000", True)
    ]


def test_all_keys_when_none_named() -> None:
    request = describe_req.DescribeConfigsRequest(
        resources=(
            describe_req.DescribeConfigsResource(
                resource_type=i8(GROUP_RESOURCE), resource_name="g", configuration_keys=None
            ),
        )
    )
    frame = answer(request)
    assert frame is not None
    (result,) = decoded(frame).results
    assert {c.name: c.value for c in result.configs} == {
        "consumer.heartbeat.interval.ms": "500",
        "consumer.session.timeout.ms": "6000",
    }


def test_any_other_resource_is_forwarded() -> None:
    request = describe_req.DescribeConfigsRequest(
        resources=(
            describe_req.DescribeConfigsResource(
                resource_type=i8(GROUP_RESOURCE), resource_name="g", configuration_keys=None
            ),
            describe_req.DescribeConfigsResource(
                resource_type=i8(TOPIC_RESOURCE), resource_name="t", configuration_keys=None
            ),
        )
    )
    assert answer(request) is None


@pytest.mark.integration
def test_a_member_reads_the_coordinators_session_timeout_through_the_server(kafka: Cluster) -> None:
    server = ServerProcess(kafka.bootstrap_servers).start()  # --session-timeout-ms 6000

    async def read() -> int:
        conn = await open_kip848_bootstrap(server.address, "test")
        try:
            event = await coordinator_session_timeout(
                conn, f"g-{uuid.uuid4().hex[:6]}", configured_ms=45_000, where=server.address, timeout_s=10.0
            )
        finally:
            await conn.close()
        return event.session_timeout_ms

    try:
        assert asyncio.run(asyncio.wait_for(read(), 60)) == 6_000
    finally:
        server.stop()
