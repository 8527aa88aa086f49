"""Creating topics while a bootstrap server is down (a broker restarted, killed): the next one
that accepts a connection is asked, as the App and streamtasks coordinator create theirs."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from streamtasks.embedded import EmbeddedBroker, ExternalCluster
from streamtasks.errors import BrokerError
from streamtasks.runtime.admin import create_topics_async
from streamtasks.runtime.connection import ConnectionLost


def test_no_bootstrap_server_up_is_connection_lost_naming_the_last() -> None:
    with pytest.raises(ConnectionLost, match=r"127\.0\.0\.1:2"):
        asyncio.run(create_topics_async("127.0.0.1:1,127.0.0.1:2", {"t": 1}))


@pytest.mark.integration
def test_a_dead_first_bootstrap_server_is_passed_over(kafka: EmbeddedBroker | ExternalCluster) -> None:
    topic = f"admin-{uuid.uuid4().hex[:8]}"
    bootstrap = f"127.0.0.1:1,{kafka.bootstrap_servers}"
    asyncio.run(asyncio.wait_for(create_topics_async(bootstrap, {topic: 2}), 60))  # waits until led
    with pytest.raises(BrokerError, match="already exists"):  # it is there
        asyncio.run(asyncio.wait_for(create_topics_async(bootstrap, {topic: 2}, exist_ok=False), 60))
