"""One group on ``streamtasks coordinator`` with every kind of KIP-848 member: streamtasks
members assigning client-side (``range`` through Prepare/Install), the Java ``KafkaConsumer``
and librdkafka with ``group.protocol=consumer`` (server-side assignment only): a rolling bounce
with no partition owned twice and every acknowledged (partition, offset) consumed."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from pathlib import Path
from typing import Any

import pytest

from assignors.partition.range import RangeAssignor
from streamtasks.embedded import Cluster
from tests.integration.harness import (
    Audit,
    JavaPeer,
    JavaWorker,
    SteadyProducer,
    StreamtasksWorker,
    confluent_worker,
    stable,
    start_worker,
    stop_worker,
    wait_until,
)
from tests.server.support import ServerProcess
from tests.server.test_live import describe
from topology import TopicPartition

pytestmark = pytest.mark.integration

PARTITIONS = 8
WAIT_S = 120


async def mixed(kafka: Cluster, server: ServerProcess, peer: JavaPeer, log_dir: Path) -> tuple[Audit, Any]:
    topic = f"coord-mixed-{uuid.uuid4().hex[:6]}"
    group = f"g-{topic}"
    kafka.create_topics({topic: PARTITIONS})
    partitions = {TopicPartition(topic, p) for p in range(PARTITIONS)}
    audit = Audit(partitions)
    producer = SteadyProducer(
        kafka.bootstrap_servers, topic, audit, partitions=PARTITIONS, record_ids="offset"
    )
    await producer.start()

    def make(name: str) -> Any:
        if name.startswith("st"):
            return StreamtasksWorker(
                name,
                audit,
                topic,
                record_ids="offset",
                bootstrap_servers=server.address,
                group_id=group,
                group_protocol="consumer",
                partition_assignors=[RangeAssignor()],
            )
        if name == "java":
            return JavaWorker(
                name,
                audit,
                peer,
                bootstrap=server.address,
                group=group,
                topic=topic,
                log_dir=log_dir,
                properties={"group.protocol": "consumer"},
                record_ids="offset",
            )
        return confluent_worker(
            name, audit, server.address, group, topic, group_protocol="consumer", record_ids="offset"
        )

    order = ("st1", "java", "confluent", "st2")
    workers: dict[str, Any] = {}
    described = None
    try:
        for name in order:
            workers[name] = make(name)
            await start_worker(workers[name])
            await wait_until(stable(audit, partitions, set(workers)), WAIT_S, f"{name} to get partitions")
        described = await describe(server, group)
        for name in order:
            await stop_worker(workers.pop(name))
            audit.gone(name)
            await wait_until(stable(audit, partitions, set(workers)), WAIT_S, f"the group without {name}")
            workers[name] = make(name)
            await start_worker(workers[name])
            await wait_until(stable(audit, partitions, set(workers)), WAIT_S, f"{name} back")
        await producer.stop()
        await wait_until(lambda: not audit.records.lost(), WAIT_S, "every record consumed")
    finally:
        for w in workers.values():
            with contextlib.suppress(Exception):
                await stop_worker(w)
    return audit, described


def test_streamtasks_java_and_librdkafka_members_in_one_group(
    kafka: Cluster, peer: JavaPeer, tmp_path: Path
) -> None:
    server = ServerProcess(kafka.bootstrap_servers).start()
    try:
        audit, described = asyncio.run(mixed(kafka, server, peer, tmp_path))
    finally:
        server.stop()
    assert audit.ledger.report(0).violations == (), audit.timeline()
    assert audit.records.lost() == []
    assert audit.records.produced_count > 0
    assert described is not None
    assert len(described.members) == 4
    assert {m.member_type for m in described.members} == {1}
