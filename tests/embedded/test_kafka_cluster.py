"""The three-broker Apache Kafka cluster: replicated topics survive a killed partition leader and
a killed group coordinator, and the broker comes back on its ports and data with its replicas
in sync again. Runs on the session's ``kafka_cluster`` (tests/conftest.py; Apache Kafka only)."""

from __future__ import annotations

import asyncio
import time

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from streamtasks.embedded.kafka_cluster import KafkaCluster
from streamtasks.errors import BrokerError
from tests.embedded.procs import alive, wait_gone

pytestmark = pytest.mark.integration


def test_refuses_no_brokers() -> None:
    with pytest.raises(BrokerError, match="at least one broker"):
        KafkaCluster(0)


def test_three_brokers_with_their_own_processes_ports_and_data(cluster_to_break: KafkaCluster) -> None:
    cluster = cluster_to_break
    assert [b.node_id for b in cluster.brokers] == [1, 2, 3]
    assert len({b.pid for b in cluster.brokers}) == 3
    assert len({b.port for b in cluster.brokers}) == 3
    assert len({b.directory for b in cluster.brokers}) == 3
    assert cluster.bootstrap_servers == ",".join(b.address for b in cluster.brokers)
    brokers = cluster.metadata(()).brokers
    assert {(int(b.node_id), f"{b.host}:{b.port}") for b in brokers} == {
        (b.node_id, b.address) for b in cluster.brokers
    }
    assert cluster.active_controller() in {1, 2, 3}  # every node is a voter of the quorum


async def _produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", request_timeout_ms=30_000)
    await producer.start()
    try:
        for value in values:
            await producer.send_and_wait(topic, value, partition=0)
    finally:
        await producer.stop()


async def _read_all(bootstrap: str, topic: str, count: int) -> list[bytes]:
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False
    )
    await consumer.start()
    try:
        consumer.assign([TopicPartition(topic, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(got) < count and time.monotonic() < deadline:
            batches = await consumer.getmany(timeout_ms=500)
            got += [r.value for records in batches.values() for r in records if r.value is not None]
        return got
    finally:
        await consumer.stop()


def test_a_killed_leader_loses_no_acknowledged_record(cluster_to_break: KafkaCluster) -> None:
    cluster = cluster_to_break
    cluster.create_topics({"cluster-leader": 1})
    cluster.wait_isr_full(["cluster-leader"])
    replicas = cluster.metadata(["cluster-leader"]).topics[0].partitions[0].replica_nodes
    assert len(replicas) == 3  # the cluster's default replication factor
    asyncio.run(_produce(cluster.bootstrap_servers, "cluster-leader", [b"a", b"b"]))

    leader = cluster.broker(cluster.leaders(["cluster-leader"])[("cluster-leader", 0)])
    pid = leader.pid
    assert pid is not None
    leader.kill()
    assert wait_gone(pid)
    asyncio.run(_produce(cluster.bootstrap_servers, "cluster-leader", [b"c"]))  # acks=all, 2 in sync
    assert cluster.leaders(["cluster-leader"])[("cluster-leader", 0)] not in (leader.node_id, -1)
    assert cluster.under_replicated(["cluster-leader"]) == [("cluster-leader", 0)]

    leader.start()
    assert leader.pid is not None
    assert leader.pid != pid
    assert alive(leader.pid)
    cluster.wait_isr_full(["cluster-leader"])
    assert asyncio.run(_read_all(cluster.bootstrap_servers, "cluster-leader", 3)) == [b"a", b"b", b"c"]


async def _commit(bootstrap: str, group: str, topic: str, offset: int) -> int | None:
    """Commit ``offset`` for the group (a manual-assignment member) and read it back."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False, request_timeout_ms=30_000
    )
    await consumer.start()
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        await consumer.commit({tp: offset})
        committed: int | None = await consumer.committed(tp)
        return committed
    finally:
        await consumer.stop()


def test_a_killed_coordinator_moves_the_group_and_keeps_its_offsets(cluster_to_break: KafkaCluster) -> None:
    cluster = cluster_to_break
    cluster.create_topics({"cluster-coordinated": 1})
    group = "cluster-group"
    assert asyncio.run(_commit(cluster.bootstrap_servers, group, "cluster-coordinated", 1)) == 1
    coordinator = cluster.broker(cluster.coordinator_of(group))
    coordinator.kill()

    assert cluster.coordinator_of(group, not_on=coordinator.node_id) != coordinator.node_id
    assert asyncio.run(_commit(cluster.bootstrap_servers, group, "cluster-coordinated", 2)) == 2

    coordinator.start()
    cluster.wait_under_replicated(0)
    assert asyncio.run(_commit(cluster.bootstrap_servers, group, "cluster-coordinated", 3)) == 3
