"""The Java ``KafkaConsumer`` as a group peer (issue 11, item 4).

One classic-protocol group of five: two streamtasks members (`cooperative_sticky`), the Java
consumer of ``java/peer`` (`CooperativeStickyAssignor`), kafka-python 3
(`CooperativeStickyAssignor`) and confluent-kafka (`cooperative-sticky`). Every member offers
exactly one protocol, ``cooperative-sticky``, so whichever member the coordinator makes leader
assigns for everyone. Each member is bounced in turn while a producer writes; from every
member's callbacks no partition is owned twice at any moment, and every record produced is
consumed.

- dynamic members: a member leaves (LeaveGroup), the group rebalances without it, then it
  comes back as a new member;
- static members (KIP-345, ``group.instance.id`` for all five): a member closes without leaving
  and its replacement starts at once, within the session timeout, under the same instance id.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest

from streamtasks.embedded import Cluster, EmbeddedBroker
from tests.integration.harness import (
    Audit,
    JavaPeer,
    JavaPeerMissing,
    LiveGroup,
    java_peer,
    rolling_bounce_group,
)

pytestmark = pytest.mark.integration

PARTITIONS = 10
WAIT_S = 90


#: Why the Java peer cannot join a group on Tansu (docs/testing.md, "Where the embedded broker
#: differs from Apache Kafka").
TANSU_SKIP = (
    "Tansu closes the connection on the Java 4.4 client's ApiVersions v5 request (KIP-1242: it "
    "names the cluster and node it expects), so the Java consumer never reaches the group "
    "coordinator; run with STREAMTASKS_BROKER=kafka"
)


@pytest.fixture(scope="module")
def peer(kafka: Cluster) -> JavaPeer:
    """The compiled Java peer, or a skip that says what to install or why the broker cannot serve it."""
    try:
        compiled = java_peer()
    except JavaPeerMissing as exc:
        pytest.skip(f"the Java consumer peer cannot run here: {exc}")
    if isinstance(kafka, EmbeddedBroker):
        pytest.skip(TANSU_SKIP)
    return compiled


async def java_group(
    kafka: Cluster, peer: JavaPeer, log_dir: Path, *, static: bool, order: tuple[str, ...]
) -> Audit:
    topic = f"interop-java-{'static' if static else 'dynamic'}-{uuid.uuid4().hex[:6]}"
    g = LiveGroup.create(kafka, topic, PARTITIONS, log_dir=log_dir, java_peer=peer)
    print(f"Java peer logs and the callbacks' timeline: {log_dir}")

    def make(name: str) -> Any:
        instance = name if static else None
        if name.startswith("st"):
            return g.streamtasks(name, assignors=["cooperative_sticky"], group_instance_id=instance)
        if name == "java":
            return g.java(name, {"group.instance.id": name} if static else {})
        if name == "kafka-python":
            return g.kafka_python(name, group_instance_id=instance)
        return g.confluent(name, group_instance_id=instance)

    await rolling_bounce_group(
        make, order, g.audit, g.partitions, g.producer(), static=static, log_dir=log_dir, wait_s=WAIT_S
    )
    return g.audit


@pytest.mark.parametrize(
    ("static", "order"),
    [
        (False, ("st1", "java", "kafka-python", "confluent", "st2")),
        (True, ("java", "st1", "kafka-python", "confluent", "st2")),
    ],
    ids=["dynamic", "static"],
)
def test_java_peer_rolling_bounce(
    kafka: Cluster, peer: JavaPeer, tmp_path: Path, static: bool, order: tuple[str, ...]
) -> None:
    audit = asyncio.run(java_group(kafka, peer, tmp_path, static=static, order=order))
    report = audit.ledger.report(0)
    assert report.violations == (), audit.timeline()
    assert audit.records.lost() == []
    assert audit.records.produced_count > 0
