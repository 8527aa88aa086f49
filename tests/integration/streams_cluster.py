"""The skip every live streams-group test needs: a cluster with a streams-group coordinator."""

from __future__ import annotations

import pytest

from streamtasks.embedded import Cluster, EmbeddedBroker
from streamtasks.protocol.streams_group import STREAMS_GROUP_HEARTBEAT_API_KEY

__all__ = ["require_streams_groups"]


def require_streams_groups(kafka: Cluster) -> Cluster:
    """``kafka``, or a skip where it serves no StreamsGroupHeartbeat v1 (API 88): Tansu, and
    Apache Kafka before 4.1."""
    if isinstance(kafka, EmbeddedBroker):
        pytest.skip("Tansu does not serve StreamsGroupHeartbeat (API 88); run with STREAMTASKS_BROKER=kafka")
    if kafka.api_versions().get(STREAMS_GROUP_HEARTBEAT_API_KEY, (0, -1))[1] < 1:
        pytest.skip("the cluster does not serve StreamsGroupHeartbeat v1 (API 88)")
    return kafka
