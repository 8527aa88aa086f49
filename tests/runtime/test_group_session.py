"""The KIP-848 member's session timeout is the coordinator's: one DescribeConfigs of the GROUP
resource at start (the group's ``consumer.session.timeout.ms``, else the broker's default), the
configured ``session.timeout.ms`` with a warning when it cannot be read."""

from __future__ import annotations

import asyncio
import datetime
import logging
import uuid

import pytest
from kio.schema.describe_configs.v4.response import (
    DescribeConfigsResourceResult,
    DescribeConfigsResponse,
    DescribeConfigsResult,
)
from kio.schema.errors import ErrorCode
from kio.static.primitive import i8, i32Timedelta

from streamtasks.embedded import EmbeddedBroker, ExternalCluster, KafkaBroker
from streamtasks.membership.consumer import ConsumerMember
from streamtasks.runtime.admin import set_group_configs
from streamtasks.runtime.connection import AsyncConnection
from streamtasks.runtime.consumer import Consumer
from streamtasks.runtime.consumer_driver import open_kip848_bootstrap
from streamtasks.runtime.group_session import (
    GROUP_RESOURCE_TYPE,
    SESSION_TIMEOUT_KEY,
    coordinator_session_timeout,
    session_timeout_from,
)

#: The embedded Apache Kafka broker's group.consumer.session.timeout.ms.
BROKER_SESSION_MS = 10_000


def answer(
    *, error: int = 0, value: str | None = "10000", name: str = SESSION_TIMEOUT_KEY
) -> DescribeConfigsResponse:
    entry = DescribeConfigsResourceResult(
        name=name,
        value=value,
        read_only=False,
        config_source=i8(5),
        is_sensitive=False,
        synonyms=(),
        config_type=i8(3),
        documentation=None,
    )
    result = DescribeConfigsResult(
        error_code=ErrorCode(error),
        error_message="denied" if error else None,
        resource_type=i8(GROUP_RESOURCE_TYPE),
        resource_name="g",
        configs=(entry,),
    )
    return DescribeConfigsResponse(throttle_time=i32Timedelta.parse(datetime.timedelta(0)), results=(result,))


def test_the_groups_value_is_read() -> None:
    assert session_timeout_from(answer(), "g") == 10_000


@pytest.mark.parametrize(
    ("response", "why"),
    [
        (answer(error=30), "GROUP_AUTHORIZATION_FAILED denied"),
        (answer(value=None), f"no {SESSION_TIMEOUT_KEY} in the answer"),
        (answer(name="other"), f"no {SESSION_TIMEOUT_KEY} in the answer"),
        (answer(value="soon"), "is not a number"),
        (answer(value="0"), "is not positive"),
    ],
)
def test_no_usable_value_says_why(response: DescribeConfigsResponse, why: str) -> None:
    found = session_timeout_from(response, "g")
    assert isinstance(found, str)
    assert why in found
    assert session_timeout_from(answer(), "another group") == "no answer for group 'another group'"


def apache_only(kafka: object) -> None:
    if not isinstance(kafka, KafkaBroker):
        pytest.skip("group configs are Apache Kafka's (10 s: the embedded broker's setting)")


async def read(bootstrap: str, group: str) -> int:
    conn = await open_kip848_bootstrap(bootstrap, "test")
    try:
        event = await coordinator_session_timeout(
            conn, group, configured_ms=6_000, where=bootstrap, timeout_s=10.0
        )
    finally:
        await conn.close()
    return event.session_timeout_ms


def test_a_refused_lookup_falls_back_to_the_configured_timeout_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def main() -> int:
        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.read(4)
            writer.close()  # closes the connection on the request, as a server that refuses it

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        conn = await AsyncConnection.open("127.0.0.1", port, timeout_s=5.0)
        try:
            event = await coordinator_session_timeout(
                conn, "g", configured_ms=6_000, where="127.0.0.1", timeout_s=5.0
            )
        finally:
            await conn.close()
            server.close()
        return event.session_timeout_ms

    with caplog.at_level(logging.WARNING, logger="streamtasks.driver"):
        assert asyncio.run(main()) == 6_000
    assert any("could not read consumer.session.timeout.ms" in r.getMessage() for r in caplog.records)


@pytest.mark.integration
def test_apache_kafka_names_the_broker_default_then_the_groups_own(
    kafka: EmbeddedBroker | ExternalCluster | KafkaBroker,
) -> None:
    apache_only(kafka)
    group = f"session-{uuid.uuid4().hex[:8]}"
    assert asyncio.run(read(kafka.bootstrap_servers, group)) == BROKER_SESSION_MS
    asyncio.run(set_group_configs(kafka.bootstrap_servers, group, {SESSION_TIMEOUT_KEY: "7000"}))
    assert asyncio.run(read(kafka.bootstrap_servers, group)) == 7_000


@pytest.mark.integration
def test_a_started_consumer_uses_the_coordinators_session_timeout(
    kafka: EmbeddedBroker | ExternalCluster | KafkaBroker,
) -> None:
    apache_only(kafka)
    topic = f"session-{uuid.uuid4().hex[:8]}"
    kafka.create_topics({topic: 1})

    async def main() -> int:
        consumer = Consumer(
            topic,
            bootstrap_servers=kafka.bootstrap_servers,
            group_id=f"g-{topic}",
            group_protocol="consumer",
            session_timeout_ms=6_000,
            heartbeat_interval_ms=500,
        )
        await consumer.start()
        try:
            member = consumer._member
            assert isinstance(member, ConsumerMember)
            for _ in range(100):
                if member.config.session_timeout_ms != 6_000:
                    break
                await asyncio.sleep(0.05)
            return member.config.session_timeout_ms
        finally:
            await consumer.stop()

    assert asyncio.run(asyncio.wait_for(main(), 60)) == BROKER_SESSION_MS
