"""Moving a group onto ``streamtasks coordinator`` and off it, as docs/coordinator.md says:
stop the members, copy the committed offsets (an admin commit: no member, epoch -1), start the
members at the new address. The KIP-848 members on the server resume exactly at the offsets the
group had on the cluster, and the classic members back on the cluster resume where the server's
members committed."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from streamtasks.embedded import Cluster
from tests.server.support import ServerProcess

pytestmark = pytest.mark.integration

PARTITIONS = 3
PER_PARTITION = 20


def copy_offsets(
    group: str, partitions: list[TopicPartition], source: str, target: str
) -> list[TopicPartition]:
    src = Consumer({"bootstrap.servers": source, "group.id": group, "enable.auto.commit": False})
    offsets = [tp for tp in src.committed(partitions, timeout=10) if tp.offset >= 0]
    src.close()
    dst = Consumer({"bootstrap.servers": target, "group.id": group, "enable.auto.commit": False})
    dst.commit(offsets=offsets, asynchronous=False)
    dst.close()
    return offsets


def consume(bootstrap: str, group: str, topic: str, count: int, **config: Any) -> dict[int, list[int]]:
    """Offsets read per partition until ``count`` records, committed on close."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            **config,
        }
    )
    c.subscribe([topic])
    seen: dict[int, list[int]] = {}
    deadline = time.monotonic() + 60
    total = 0
    while total < count and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is None or m.error():
            continue
        seen.setdefault(m.partition(), []).append(m.offset())
        total += 1
    c.commit(asynchronous=False)
    c.close()
    return seen


def test_group_moves_onto_the_server_and_back(kafka: Cluster) -> None:
    topic = f"coord-move-{uuid.uuid4().hex[:6]}"
    group = f"g-{topic}"
    kafka.create_topics({topic: PARTITIONS})
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers})
    for p in range(PARTITIONS):
        for i in range(PER_PARTITION):
            producer.produce(topic, value=f"{p}:{i}".encode(), partition=p)
    producer.flush(30)
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    # the group on the cluster (classic) committed 5 per partition
    admin = Consumer(
        {"bootstrap.servers": kafka.bootstrap_servers, "group.id": group, "enable.auto.commit": False}
    )
    admin.commit(offsets=[TopicPartition(topic, p, 5) for p in range(PARTITIONS)], asynchronous=False)
    admin.close()
    server = ServerProcess(kafka.bootstrap_servers).start()
    try:
        moved = copy_offsets(group, tps, kafka.bootstrap_servers, server.address)
        assert sorted((tp.partition, tp.offset) for tp in moved) == [(p, 5) for p in range(PARTITIONS)]
        on_server = consume(server.address, group, topic, PARTITIONS * 5, **{"group.protocol": "consumer"})
        back = copy_offsets(group, tps, server.address, kafka.bootstrap_servers)
    finally:
        server.stop()
    # on the server the group resumed at 5 in every partition, consumed in order from there
    assert {p: offsets[0] for p, offsets in on_server.items()} == {p: 5 for p in on_server}
    for offsets in on_server.values():
        assert offsets == list(range(5, 5 + len(offsets)))
    committed_on_server = {tp.partition: tp.offset for tp in back}
    assert committed_on_server == {p: 5 + len(on_server.get(p, [])) for p in range(PARTITIONS)}
    # back on the cluster (classic) the group resumes where the server's members committed
    remaining = PARTITIONS * PER_PARTITION - sum(committed_on_server.values())
    rest = consume(kafka.bootstrap_servers, group, topic, remaining)
    assert sum(len(offsets) for offsets in rest.values()) == remaining
    for p, offsets in rest.items():
        assert offsets[0] == committed_on_server[p]
