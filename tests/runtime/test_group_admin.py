"""``streamtasks groups``' requests against a broker that refuses them (a fake one that closes
the connection on an API it does not serve, as Apache Kafka does on an API version it does not
know). The answers of a real broker are in tests/integration/test_groups.py."""

from __future__ import annotations

import asyncio
import struct

import pytest

from streamtasks.errors import BrokerError
from streamtasks.runtime.group_admin import describe_group
from streamtasks.runtime.security import ClientSettings
from tests.runtime.fake_coordinator import FakeCoordinator

#: DescribeGroups, ConsumerGroupDescribe.
REFUSED = {15, 69}


class RefusingCoordinator(FakeCoordinator):
    """Answers ApiVersions and FindCoordinator (with itself); hangs up on the group RPCs."""

    refused: int = 0

    def _answer(self, payload: bytes) -> bytes | None:
        if struct.unpack_from(">h", payload, 0)[0] in REFUSED:
            self.refused += 1
            return None
        return super()._answer(payload)


def test_a_coordinator_that_refuses_describe_groups_is_one_broker_error_naming_the_api() -> None:
    async def scenario() -> tuple[str, int]:
        broker = RefusingCoordinator()
        async with broker:
            with pytest.raises(BrokerError) as caught:
                await describe_group(ClientSettings.of(broker.address), "g", timeout_s=5)
            return str(caught.value), broker.refused

    message, refused = asyncio.run(scenario())
    # ConsumerGroupDescribe refused: no consumer group there; then DescribeGroups refused: the error.
    assert refused == 2
    assert "the coordinator of group 'g' did not answer DescribeGroups v5" in message
    assert "\n" not in message
