"""``streamtasks coordinator`` in front of the test cluster, with librdkafka members
(confluent-kafka, ``group.protocol=consumer``) that bootstrap to it and consume from the
cluster: a group served by the server (ConsumerGroupDescribe on the server names every member;
the backing cluster knows no such group), a rolling bounce with no partition owned twice and
every acknowledged (partition, offset) consumed, and the server killed with -9 and started
again: members keep their epochs and partitions, commits resume, nothing is lost."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from typing import Any

import pytest

from streamtasks.embedded import Cluster
from streamtasks.protocol import consumer_group_codec as codec
from streamtasks.protocol.consumer_group import ConsumerGroupDescribeRequest, DescribedGroup
from streamtasks.runtime.connection import AsyncConnection
from tests.integration.harness import (
    Audit,
    SteadyProducer,
    confluent_worker,
    stable,
    start_worker,
    stop_worker,
    wait_until,
)
from tests.server.support import ServerProcess, status_count
from topology import TopicPartition

pytestmark = pytest.mark.integration

PARTITIONS = 6
WAIT_S = 90


async def describe(server: ServerProcess, group: str) -> DescribedGroup:
    host, port = server.address.split(":")
    conn = await AsyncConnection.open(host, int(port))
    try:
        body = await conn.call_raw(
            69, 1, codec.encode_describe_request(ConsumerGroupDescribeRequest(group_ids=(group,)), 1)
        )
    finally:
        await conn.close()
    return codec.decode_describe_response(body, 1).groups[0]


def setup(kafka: Cluster, server: ServerProcess) -> tuple[str, str, set[TopicPartition], Audit]:
    topic = f"coord-{uuid.uuid4().hex[:6]}"
    kafka.create_topics({topic: PARTITIONS})
    partitions = {TopicPartition(topic, p) for p in range(PARTITIONS)}
    return topic, f"g-{topic}", partitions, Audit(partitions)


async def rolling_bounce(kafka: Cluster, server: ServerProcess) -> tuple[Audit, list[DescribedGroup]]:
    topic, group, partitions, audit = setup(kafka, server)
    producer = SteadyProducer(
        kafka.bootstrap_servers, topic, audit, partitions=PARTITIONS, record_ids="offset"
    )
    await producer.start()
    workers: dict[str, Any] = {}
    seen: list[DescribedGroup] = []

    def make(name: str) -> Any:
        return confluent_worker(
            name, audit, server.address, group, topic, group_protocol="consumer", record_ids="offset"
        )

    try:
        for name in ("c1", "c2", "c3"):
            workers[name] = make(name)
            await start_worker(workers[name])
            await wait_until(stable(audit, partitions, set(workers)), WAIT_S, f"{name} to get partitions")
        seen.append(await describe(server, group))
        for name in ("c1", "c2", "c3"):
            await stop_worker(workers.pop(name))
            audit.gone(name)
            await wait_until(stable(audit, partitions, set(workers)), WAIT_S, f"the group without {name}")
            workers[name] = make(name)
            await start_worker(workers[name])
            await wait_until(stable(audit, partitions, set(workers)), WAIT_S, f"{name} back")
        seen.append(await describe(server, group))
        await producer.stop()
        await wait_until(lambda: not audit.records.lost(), WAIT_S, "every record consumed")
    finally:
        for w in workers.values():
            with contextlib.suppress(Exception):
                await stop_worker(w)
    return audit, seen


def test_librdkafka_members_rolling_bounce_through_the_server(kafka: Cluster) -> None:
    server = ServerProcess(kafka.bootstrap_servers).start()
    try:
        audit, described = asyncio.run(rolling_bounce(kafka, server))
    finally:
        server.stop()
    report = audit.ledger.report(0)
    assert report.violations == (), audit.timeline()
    assert audit.records.lost() == []
    assert audit.records.produced_count > 0
    for group in described:  # the server coordinates the group: three KIP-848 members there
        assert group.error == 0
        assert len(group.members) == 3
        assert {m.member_type for m in group.members} == {1}
        assert group.group_epoch >= group.assignment_epoch > 0
    assert described[1].group_epoch > described[0].group_epoch  # the bounce went through it
    assert "closed_malformed=0" in server.status()


async def kill_and_restart(kafka: Cluster, server: ServerProcess) -> tuple[Audit, dict[str, Any]]:
    topic, group, partitions, audit = setup(kafka, server)
    producer = SteadyProducer(
        kafka.bootstrap_servers, topic, audit, partitions=PARTITIONS, record_ids="offset"
    )
    await producer.start()
    workers = {
        name: confluent_worker(
            name, audit, server.address, group, topic, group_protocol="consumer", record_ids="offset"
        )
        for name in ("c1", "c2")
    }
    facts: dict[str, Any] = {}
    try:
        for w in workers.values():
            await start_worker(w)
        await wait_until(
            stable(audit, partitions, set(workers)), WAIT_S, "two members sharing the partitions"
        )
        await asyncio.sleep(2)  # a few auto-commits
        before = await describe(server, group)
        facts["history_before"] = len(audit.history)
        facts["commits_before"] = status_count(server, "commits")
        await asyncio.to_thread(server.kill)
        await asyncio.sleep(2)  # members keep consuming what they own while the coordinator is gone
        await asyncio.to_thread(server.start)
        after = await describe(server, group)
        await asyncio.sleep(6)  # heartbeats and auto-commits against the restarted server
        again = await describe(server, group)
        facts["before"], facts["after"], facts["again"] = before, after, again
        facts["history_after"] = len(audit.history)
        facts["commits_after"] = status_count(server, "commits")
        facts["replayed"] = next(line for line in reversed(server.lines) if "listening on" in line)
        await producer.stop()
        await wait_until(lambda: not audit.records.lost(), WAIT_S, "every record consumed")
    finally:
        for w in workers.values():
            with contextlib.suppress(Exception):
                await stop_worker(w)
    return audit, facts


def _members(group: DescribedGroup) -> dict[str, tuple[int, tuple[Any, ...]]]:
    return {m.member_id: (m.member_epoch, m.assignment.topic_partitions) for m in group.members}


@pytest.mark.smoke  # the coordinator in front of Tansu too (make test's second part)
def test_server_killed_and_restarted_members_keep_epochs_and_partitions(kafka: Cluster) -> None:
    server = ServerProcess(kafka.bootstrap_servers).start()
    try:
        audit, facts = asyncio.run(kill_and_restart(kafka, server))
    finally:
        server.stop()
    assert facts["before"].error == 0
    assert len(facts["before"].members) == 2
    # the restarted server loaded the same members at the same epochs, owning the same partitions
    assert _members(facts["after"]) == _members(facts["before"])
    assert _members(facts["again"]) == _members(facts["before"])
    assert facts["after"].group_epoch == facts["before"].group_epoch
    # no partition moved: no callback at all since the kill
    assert facts["history_after"] == facts["history_before"], audit.timeline()
    assert "replayed 0 records" not in facts["replayed"]
    assert facts["commits_after"] > 0  # commits resumed against the new process
    report = audit.ledger.report(0)
    assert report.violations == (), audit.timeline()
    assert audit.records.lost() == []


def test_transactional_producer_through_the_server(kafka: Cluster) -> None:
    """FindCoordinator for a transaction is forwarded (the cluster coordinates transactions) and
    its answer names the broker's listener on the server; the transaction commits."""
    from confluent_kafka import Consumer as CKConsumer
    from confluent_kafka import Producer

    topic = f"coord-tx-{uuid.uuid4().hex[:6]}"
    kafka.create_topics({topic: 1})
    server = ServerProcess(kafka.bootstrap_servers).start()
    try:
        producer = Producer({"bootstrap.servers": server.address, "transactional.id": f"tx-{topic}"})
        producer.init_transactions(30)
        producer.begin_transaction()
        for i in range(10):
            producer.produce(topic, value=str(i).encode())
        producer.commit_transaction(30)
        reader = CKConsumer(
            {
                "bootstrap.servers": kafka.bootstrap_servers,
                "group.id": f"r-{topic}",
                "auto.offset.reset": "earliest",
                "isolation.level": "read_committed",
            }
        )
        reader.subscribe([topic])
        values: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(values) < 10 and time.monotonic() < deadline:
            message = reader.poll(0.5)
            if message is not None and not message.error():
                values.append(message.value())
        reader.close()
    finally:
        server.stop()
    assert sorted(values) == sorted(str(i).encode() for i in range(10))
    assert "forwarded=0" not in server.status()


def test_sigterm_stops_cleanly_with_connections_open(kafka: Cluster) -> None:
    import socket

    server = ServerProcess(kafka.bootstrap_servers).start()
    host, port = server.address.split(":")
    idle = socket.create_connection((host, int(port)), timeout=10)
    try:
        code = server.terminate()
    finally:
        idle.close()
    time.sleep(0.2)
    assert code == 0, "\n".join(server.lines)
    assert "streamtasks coordinator: stopped" in server.lines
    assert not any("Traceback" in line or "ERROR" in line for line in server.lines), "\n".join(server.lines)


async def _join_raw(server: ServerProcess, group: str, topic: str) -> int:
    from streamtasks.protocol.consumer_group import ConsumerGroupHeartbeatRequest

    host, port = server.address.split(":")
    conn = await AsyncConnection.open(host, int(port))
    try:
        join = ConsumerGroupHeartbeatRequest(
            group_id=group,
            member_id="gone-after-restart",
            member_epoch=0,
            rebalance_timeout_ms=5_000,
            subscribed_topic_names=(topic,),
            topic_partitions=(),
        )
        body = await conn.call_raw(68, 1, codec.encode_heartbeat_request(join, 1))
    finally:
        await conn.close()
    return codec.decode_heartbeat_response(body, 1).member_epoch


def test_restart_on_a_log_whose_members_are_gone(kafka: Cluster) -> None:
    """A member in the log that never comes back is removed one session timeout after the
    restart (sessions restart from the load), and its group is empty."""
    topic = f"coord-gone-{uuid.uuid4().hex[:6]}"
    group = f"g-{topic}"
    kafka.create_topics({topic: 2})
    server = ServerProcess(kafka.bootstrap_servers).start()  # session timeout 6 s
    try:
        assert asyncio.run(_join_raw(server, group, topic)) > 0
        server.kill()
        server.start()
        loaded = asyncio.run(describe(server, group))
        deadline = time.monotonic() + 30
        left = loaded
        while time.monotonic() < deadline and left.members:
            time.sleep(0.5)
            left = asyncio.run(describe(server, group))
    finally:
        server.stop()
    assert [m.member_id for m in loaded.members] == ["gone-after-restart"]
    assert left.members == ()
    assert left.group_state == "Empty"
    assert left.group_epoch > loaded.group_epoch
