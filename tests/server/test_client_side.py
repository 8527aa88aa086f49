"""streamtasks members (``Consumer(group_protocol="consumer")`` with a client-side assignor)
against ``streamtasks coordinator``: the member the server picks runs PrepareAssignment ->
its assignor -> InstallAssignment on the private API keys, the group rolls through a bounce
with no partition owned twice, and every acknowledged (partition, offset) is consumed."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from typing import Any

import pytest

from assignors.partition.range import RangeAssignor
from streamtasks.embedded import Cluster
from tests.integration.harness import Audit, SteadyProducer, StreamtasksWorker, stable, wait_until
from tests.server.support import ServerProcess, status_count
from tests.server.test_live import describe
from topology import TopicPartition

pytestmark = pytest.mark.integration

PARTITIONS = 6
WAIT_S = 90


async def client_side_bounce(kafka: Cluster, server: ServerProcess) -> tuple[Audit, Any]:
    topic = f"coord-cs-{uuid.uuid4().hex[:6]}"
    group = f"g-{topic}"
    kafka.create_topics({topic: PARTITIONS})
    partitions = {TopicPartition(topic, p) for p in range(PARTITIONS)}
    audit = Audit(partitions)
    producer = SteadyProducer(
        kafka.bootstrap_servers, topic, audit, partitions=PARTITIONS, record_ids="offset"
    )
    await producer.start()

    def make(name: str) -> StreamtasksWorker:
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

    workers: dict[str, StreamtasksWorker] = {}
    described = None
    try:
        for name in ("st1", "st2"):
            workers[name] = make(name)
            await workers[name].start()
            await wait_until(stable(audit, partitions, set(workers)), WAIT_S, f"{name} to get partitions")
        described = await describe(server, group)
        for name in ("st1", "st2"):
            await workers.pop(name).stop()
            audit.gone(name)
            await wait_until(stable(audit, partitions, set(workers)), WAIT_S, f"the group without {name}")
            workers[name] = make(name)
            await workers[name].start()
            await wait_until(stable(audit, partitions, set(workers)), WAIT_S, f"{name} back")
        await producer.stop()
        await wait_until(lambda: not audit.records.lost(), WAIT_S, "every record consumed")
    finally:
        for w in workers.values():
            with contextlib.suppress(Exception):
                await w.stop()
    return audit, described


@pytest.mark.smoke  # the coordinator in front of Tansu too (make test's second part)
def test_streamtasks_members_assign_client_side_through_the_server(kafka: Cluster) -> None:
    server = ServerProcess(kafka.bootstrap_servers).start()
    try:
        audit, described = asyncio.run(client_side_bounce(kafka, server))
        time.sleep(1.5)  # one more status line
        prepares, installs = status_count(server, "prepares"), status_count(server, "installs")
    finally:
        server.stop()
    assert audit.ledger.report(0).violations == (), audit.timeline()
    assert audit.records.lost() == []
    assert audit.records.produced_count > 0
    assert described is not None
    assert described.error == 0
    assert described.assignor_name == "range"
    assert len(described.members) == 2
    # the assignment was computed by the members: Prepare -> assign -> Install, once per epoch at least
    assert prepares >= 4, server.status()
    assert installs >= 4, server.status()
