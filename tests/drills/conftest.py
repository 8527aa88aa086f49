"""Fixtures of the drills' live tests."""

from __future__ import annotations

import pytest

from streamtasks.drills.kafka_streams_peer import word_count_program
from streamtasks.embedded import Cluster, EmbeddedBroker
from streamtasks.embedded.java import JavaUnavailable
from streamtasks.protocol.streams_group import STREAMS_GROUP_HEARTBEAT_API_KEY


@pytest.fixture(scope="module")
def ks_kafka(kafka: Cluster) -> Cluster:
    """The test cluster where Kafka Streams' Java word count can join a streams group: it
    serves StreamsGroupHeartbeat v1 and Java / Maven are here (the program compiled once);
    a skip saying why otherwise."""
    if isinstance(kafka, EmbeddedBroker):
        pytest.skip("Tansu does not serve StreamsGroupHeartbeat (API 88); run with STREAMTASKS_BROKER=kafka")
    if kafka.api_versions().get(STREAMS_GROUP_HEARTBEAT_API_KEY, (0, -1))[1] < 1:
        pytest.skip("the cluster does not serve StreamsGroupHeartbeat v1 (API 88)")
    try:
        word_count_program()
    except JavaUnavailable as exc:  # pragma: no cover - depends on the machine
        pytest.skip(f"Kafka Streams cannot run here: {exc}")
    return kafka
