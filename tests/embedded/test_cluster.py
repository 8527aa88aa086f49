"""Whatever broker the session runs on (Tansu, Apache Kafka or STREAMTASKS_BOOTSTRAP's cluster)
answers the group APIs and creates topics that other clients see."""

from __future__ import annotations

import pytest
from kafka.admin import KafkaAdminClient

from streamtasks.embedded import Cluster, ExternalCluster, TopicSpec, api_versions
from streamtasks.errors import BrokerError

JOIN_GROUP, SYNC_GROUP, HEARTBEAT, OFFSET_COMMIT = 11, 14, 12, 8


@pytest.mark.integration
def test_broker_answers_group_apis(kafka: Cluster) -> None:
    host, port = kafka.bootstrap_servers.split(",")[0].rsplit(":", 1)
    versions = api_versions(host, int(port))
    for api in (JOIN_GROUP, SYNC_GROUP, HEARTBEAT, OFFSET_COMMIT):
        assert api in versions
    assert versions[JOIN_GROUP][1] >= 5  # static membership needs JoinGroup v5+


@pytest.mark.integration
def test_created_topics_are_seen_by_another_client(kafka: Cluster) -> None:
    kafka.create_topics(
        [
            TopicSpec(name="embedded-events", partitions=12),
            TopicSpec(name="embedded-changelog", partitions=3, configs={"cleanup.policy": "compact"}),
        ]
    )
    kafka.create_topics({"embedded-events": 12})  # idempotent by default
    with pytest.raises(BrokerError, match="embedded-events"):
        kafka.create_topics({"embedded-events": 12}, exist_ok=False)
    admin = KafkaAdminClient(bootstrap_servers=kafka.bootstrap_servers)
    try:
        described = {t["name"]: t for t in admin.describe_topics(["embedded-events", "embedded-changelog"])}
    finally:
        admin.close()
    assert len(described["embedded-events"]["partitions"]) == 12
    assert len(described["embedded-changelog"]["partitions"]) == 3


def test_external_cluster_needs_host_and_port() -> None:
    with pytest.raises(BrokerError, match="host:port"):
        ExternalCluster("localhost")
    assert ExternalCluster("127.0.0.1:9092,other:9093").port == 9092
