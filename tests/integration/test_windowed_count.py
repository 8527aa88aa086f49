"""The windowed count example on a real broker: every window emitted once with its final count,
across a stop and a restore from the windowed changelog on a fresh state directory; the
changelog topic is created as Kafka Streams creates a window store's."""

from __future__ import annotations

import asyncio
import re

import pytest
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from streamtasks.embedded import EmbeddedBroker, ExternalCluster
from tests.example_loader import load_example

pytestmark = pytest.mark.integration


async def _topic_configs(bootstrap: str, topic: str) -> dict[str, str]:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        (response,) = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
    finally:
        await admin.close()
    (resource,) = response.resources
    return {entry[0]: entry[1] for entry in resource[4]}


def test_windowed_count_example_emits_every_window_once(
    kafka: EmbeddedBroker | ExternalCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    example = load_example("examples/windowed_count/windowed_count.py", "windowed_count_example")
    status = asyncio.run(example.main(kafka.bootstrap_servers, timeout_s=90.0))
    out = capsys.readouterr().out
    print(out)
    assert status == 0, out
    assert "OK: all 36 windows emitted once" in out
    # the second instance started on an empty state directory: the open windows came from the changelog
    restored = re.search(r"instance-b restored (\d+) changelog records", out)
    assert restored is not None
    assert int(restored.group(1)) > 0
    configs = asyncio.run(_topic_configs(kafka.bootstrap_servers, "windowed-count-counts-changelog"))
    assert configs["cleanup.policy"] == "compact,delete"
    assert configs["retention.ms"] == str(70_000 + 86_400_000)
