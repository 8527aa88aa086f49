"""One KIP-848 consumer group, three clients (issue 14, item 1): two streamtasks members
(``group_protocol="consumer"``), confluent-kafka / librdkafka (``group.protocol=consumer``) and
the Java ``KafkaConsumer`` of ``java/peer`` (``group.protocol=consumer``), on Apache Kafka's
coordinator with its default server-side assignor.

Each member is bounced in turn while a producer writes: from every member's callbacks no
partition is owned twice at any moment, and every offset the broker acknowledged is consumed
(the audit is per (partition, offset), not per total).

- dynamic members: a member leaves (epoch -1), the group reconciles without it, then it comes
  back as a new member (epoch 0, a new member id);
- static members (``group.instance.id`` for all four): a member leaves with epoch -2 and its
  replacement, under the same instance id, takes its assignment over.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest

from streamtasks.embedded import Cluster, EmbeddedBroker
from streamtasks.protocol.consumer_group import CONSUMER_GROUP_HEARTBEAT_API_KEY, DescribedMember
from tests.integration.harness import (
    Audit,
    JavaPeer,
    JavaPeerMissing,
    LiveGroup,
    java_peer,
    rolling_bounce_group,
)
from tests.integration.test_consumer_kip848 import KIP848, TANSU_SKIP, describe

pytestmark = pytest.mark.integration

PARTITIONS = 8
WAIT_S = 90


@pytest.fixture(scope="module")
def peer(kafka: Cluster) -> JavaPeer:
    """The compiled Java peer, or a skip saying what is missing."""
    if isinstance(kafka, EmbeddedBroker):
        pytest.skip(TANSU_SKIP)
    if CONSUMER_GROUP_HEARTBEAT_API_KEY not in kafka.api_versions():
        pytest.skip("the cluster does not serve ConsumerGroupHeartbeat (API 68)")
    try:
        return java_peer()
    except JavaPeerMissing as exc:
        pytest.skip(f"the Java consumer peer cannot run here: {exc}")


async def kip848_group(
    kafka: Cluster, peer: JavaPeer, log_dir: Path, *, static: bool, order: tuple[str, ...]
) -> tuple[Audit, list[DescribedMember]]:
    topic = f"interop-kip848-{'static' if static else 'dynamic'}-{uuid.uuid4().hex[:6]}"
    g = LiveGroup.create(kafka, topic, PARTITIONS, record_ids="offset", log_dir=log_dir, java_peer=peer)
    print(f"Java peer logs and the callbacks' timeline: {log_dir}")

    def make(name: str) -> Any:
        instance = name if static else None
        if name.startswith("st"):
            return g.streamtasks(name, group_instance_id=instance, **KIP848)
        if name == "java":
            static_id = {"group.instance.id": name} if static else {}
            return g.java(name, {"group.protocol": "consumer", **static_id})
        return g.confluent(name, group_instance_id=instance, group_protocol="consumer")

    async def joined() -> None:
        described.extend(await describe(g.bootstrap, g.group))

    described: list[DescribedMember] = []
    await rolling_bounce_group(
        make, order, g.audit, g.partitions, g.producer(), static=static, log_dir=log_dir, wait_s=WAIT_S,
        joined=joined,
    )  # fmt: skip
    return g.audit, described


@pytest.mark.parametrize(
    ("static", "order"),
    [
        (False, ("st1", "java", "confluent", "st2")),
        (True, ("java", "st1", "confluent", "st2")),
    ],
    ids=["dynamic", "static"],
)
def test_kip848_group_of_streamtasks_librdkafka_and_java_rolling_bounce(
    kafka: Cluster, peer: JavaPeer, tmp_path: Path, static: bool, order: tuple[str, ...]
) -> None:
    audit, described = asyncio.run(kip848_group(kafka, peer, tmp_path, static=static, order=order))
    # four members of one consumer group, each speaking KIP-848 (member type 1, not classic 0)
    assert len(described) == 4
    assert {m.member_type for m in described} == {1}
    assert "java" in {m.client_id for m in described}
    report = audit.ledger.report(0)
    assert report.violations == (), audit.timeline()
    assert audit.records.lost() == []
    assert audit.records.produced_count > 0
