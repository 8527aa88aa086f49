"""streamtasks consumers on KIP-848 consumer groups (``group_protocol="consumer"``, issue 14,
item 1) on Apache Kafka: the broker's own coordinator and server-side assignors.

Each test checks ownership from every member's callbacks (no partition owned twice at any
moment) and, where records flow, that every offset the broker acknowledged was consumed.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from typing import Any

import pytest

from streamtasks.embedded import Cluster, EmbeddedBroker
from streamtasks.protocol import classic_group as cg
from streamtasks.protocol.consumer_group import (
    CONSUMER_GROUP_DESCRIBE_API_KEY,
    CONSUMER_GROUP_HEARTBEAT_API_KEY,
    ConsumerGroupDescribeRequest,
    ConsumerGroupHeartbeatRequest,
    DescribedGroup,
    DescribedMember,
)
from streamtasks.protocol.consumer_group_codec import decode_describe_response, encode_describe_request
from streamtasks.protocol.errors import KafkaErrorCode
from streamtasks.runtime.connection import ConnectionLost, GroupCoordinatorClient
from streamtasks.runtime.consumer import CommitFailedError, Consumer
from streamtasks.runtime.consumer_driver import ConsumerGroupDriver, send_consumer_group_request
from tests.integration.harness import Audit, SteadyProducer, StreamtasksWorker, stable, wait_until
from topology import TopicPartition

pytestmark = pytest.mark.integration

#: Why these tests skip on Tansu (docs/testing.md).
TANSU_SKIP = (
    "Tansu does not serve ConsumerGroupHeartbeat (API 68): KIP-848 consumer groups need "
    "Apache Kafka 4.x; run with STREAMTASKS_BROKER=kafka"
)
#: The broker's group.consumer.session.timeout.ms in the embedded Apache Kafka (kafka_broker.py).
BROKER_SESSION_S = 10
WAIT_S = 60
KIP848: dict[str, Any] = {
    "group_protocol": "consumer",
    "auto_offset_reset": "earliest",
    "enable_auto_commit": False,
    "rebalance_timeout_ms": 10_000,
}


@pytest.fixture(scope="module")
def kip848(kafka: Cluster) -> Cluster:
    """The test cluster, or a skip where it has no KIP-848 coordinator."""
    if isinstance(kafka, EmbeddedBroker):
        pytest.skip(TANSU_SKIP)
    if CONSUMER_GROUP_HEARTBEAT_API_KEY not in kafka.api_versions():
        pytest.skip("the cluster does not serve ConsumerGroupHeartbeat (API 68)")
    return kafka


def _topic(kafka: Cluster, prefix: str, partitions: int) -> tuple[str, set[TopicPartition]]:
    topic = f"{prefix}-{uuid.uuid4().hex[:6]}"
    kafka.create_topics({topic: partitions})
    return topic, {TopicPartition(topic, p) for p in range(partitions)}


def _worker(name: str, audit: Audit, topic: str, kafka: Cluster, **settings: Any) -> StreamtasksWorker:
    return StreamtasksWorker(
        name,
        audit,
        topic,
        record_ids="offset",
        bootstrap_servers=kafka.bootstrap_servers,
        group_id=f"g-{topic}",
        **{**KIP848, **settings},
    )


def _check(audit: Audit) -> None:
    assert audit.ledger.report(0).violations == (), audit.timeline()
    assert audit.records.lost() == []
    assert audit.records.produced_count > 0


async def _stop_all(workers: dict[str, StreamtasksWorker]) -> None:
    for w in workers.values():
        with contextlib.suppress(Exception):
            await w.stop()


async def describe_group(bootstrap: str, group: str) -> DescribedGroup:
    """The group as its coordinator describes it (ConsumerGroupDescribe v1)."""
    client = GroupCoordinatorClient(bootstrap, group)
    try:
        body = encode_describe_request(ConsumerGroupDescribeRequest(group_ids=(group,)), 1)
        raw = await client.send_raw(CONSUMER_GROUP_DESCRIBE_API_KEY, 1, body, timeout_s=10)
    finally:
        await client.close()
    (found,) = decode_describe_response(raw, 1).groups
    assert found.error is KafkaErrorCode.NONE, found
    return found


async def describe(bootstrap: str, group: str) -> list[DescribedMember]:
    """The group's members as its coordinator describes them."""
    return list((await describe_group(bootstrap, group)).members)


# -- join, share, leave and rejoin --------------------------------------------------------------


async def rolling_bounce(kafka: Cluster, assignor: str) -> Audit:
    topic, partitions = _topic(kafka, f"kip848-{assignor}", 6)
    audit = Audit(partitions)
    producer = SteadyProducer(kafka.bootstrap_servers, topic, audit, partitions=6, record_ids="offset")
    await producer.start()
    workers: dict[str, StreamtasksWorker] = {}
    try:
        for name in ("w1", "w2", "w3"):  # join one at a time: each join moves partitions
            workers[name] = _worker(name, audit, topic, kafka, group_remote_assignor=assignor)
            await workers[name].start()
            await wait_until(stable(audit, partitions, set(workers)), WAIT_S, f"{name} to get partitions")
        first = workers["w1"].consumer
        assert first is not None
        assert first.generation > 0  # a member epoch from the coordinator
        described = await describe_group(kafka.bootstrap_servers, f"g-{topic}")
        assert described.assignor_name == assignor  # the coordinator ran the one asked for
        assert {m.member_type for m in described.members} == {1}
        for name in list(workers):  # leave (epoch -1) and rejoin as a new member (epoch 0)
            await workers.pop(name).stop()
            audit.gone(name)
            await wait_until(stable(audit, partitions, set(workers)), WAIT_S, f"the group without {name}")
            workers[name] = _worker(name, audit, topic, kafka, group_remote_assignor=assignor)
            await workers[name].start()
            await wait_until(stable(audit, partitions, set(workers)), WAIT_S, f"{name} back")
        await producer.stop()
        await wait_until(lambda: not audit.records.lost(), WAIT_S, "every acknowledged offset consumed")
    finally:
        await _stop_all(workers)
    return audit


@pytest.mark.parametrize("assignor", ["uniform", "range"])
def test_members_join_share_leave_and_rejoin(kip848: Cluster, assignor: str) -> None:
    _check(asyncio.run(rolling_bounce(kip848, assignor)))


async def resume_from_commits(kafka: Cluster) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
    """One member consumes and commits (OffsetCommit v9, member epoch) and leaves; the next
    member of the group starts where the commits say."""
    topic, partitions = _topic(kafka, "kip848-commit", 3)
    audit = Audit(partitions)
    producer = SteadyProducer(kafka.bootstrap_servers, topic, audit, partitions=3, record_ids="offset")
    await producer.start()
    await asyncio.sleep(1)
    await producer.stop()
    first = _worker("first", audit, topic, kafka)
    await first.start()
    await wait_until(lambda: not audit.records.lost(), WAIT_S, "every acknowledged offset consumed")
    assert first.consumer is not None
    consumed = dict(first.consumer.positions())
    await first.stop()
    settings: dict[str, Any] = {
        **KIP848,
        "bootstrap_servers": kafka.bootstrap_servers,
        "group_id": f"g-{topic}",
    }
    async with Consumer([topic], **settings) as second:
        await wait_until(lambda: second.assignment() == partitions, WAIT_S, "the second member's assignment")
        await wait_until(lambda: set(second.positions()) == partitions, WAIT_S, "its committed offsets")
        return consumed, dict(second.positions())


def test_commits_carry_the_member_epoch_and_the_next_member_resumes_from_them(kip848: Cluster) -> None:
    consumed, resumed = asyncio.run(resume_from_commits(kip848))
    assert sum(consumed.values()) > 0
    assert resumed == consumed


# -- static membership ------------------------------------------------------------------------


async def static_restart(kafka: Cluster) -> tuple[Audit, set[TopicPartition], set[TopicPartition], list[Any]]:
    topic, partitions = _topic(kafka, "kip848-static", 6)
    audit = Audit(partitions)
    producer = SteadyProducer(kafka.bootstrap_servers, topic, audit, partitions=6, record_ids="offset")
    await producer.start()
    workers = {n: _worker(n, audit, topic, kafka, group_instance_id=n) for n in ("a", "b")}
    try:
        for w in workers.values():
            await w.start()
        await wait_until(stable(audit, partitions, set(workers)), WAIT_S, "two static members")
        before = set(audit.snapshot()["a"])
        others = len([h for h in audit.history if h[1] == "b"])
        await workers.pop("a").stop()  # static leave: epoch -2, the assignment waits for "a"
        audit.gone("a")
        workers["a"] = _worker("a", audit, topic, kafka, group_instance_id="a")
        await workers["a"].start()  # a new member id, the same instance id
        await wait_until(stable(audit, partitions, set(workers)), WAIT_S, "a back")
        after = set(audit.snapshot()["a"])
        b_callbacks = [h for h in audit.history if h[1] == "b"][others:]
        await producer.stop()
        await wait_until(lambda: not audit.records.lost(), WAIT_S, "every acknowledged offset consumed")
    finally:
        await _stop_all(workers)
    return audit, before, after, b_callbacks


def test_static_member_restart_keeps_its_assignment(kip848: Cluster) -> None:
    audit, before, after, b_callbacks = asyncio.run(static_restart(kip848))
    _check(audit)
    assert after == before
    assert b_callbacks == []  # the other member saw no rebalance at all


# -- enforce_rebalance ------------------------------------------------------------------------


async def enforce(kafka: Cluster) -> tuple[bool, frozenset[TopicPartition], frozenset[TopicPartition], int]:
    topic, partitions = _topic(kafka, "kip848-enforce", 4)
    audit = Audit(partitions)
    workers = {n: _worker(n, audit, topic, kafka) for n in ("a", "b")}
    try:
        for w in workers.values():
            await w.start()
        await wait_until(stable(audit, partitions, set(workers)), WAIT_S, "two members")
        consumer = workers["a"].consumer
        assert consumer is not None
        seen = len(audit.history)
        owned = consumer.assignment()
        took = consumer.enforce_rebalance("asked by the test")
        await asyncio.sleep(3)  # six heartbeat intervals of the embedded broker
        return took, owned, consumer.assignment(), len(audit.history) - seen
    finally:
        await _stop_all(workers)


def test_enforce_rebalance_under_a_server_assignor_asks_for_nothing(kip848: Cluster) -> None:
    """Apache Kafka's consumer makes ``enforceRebalance`` a no-op under the consumer protocol:
    the coordinator's assignor has no member input to re-read. So does streamtasks (the
    client-side path changes the assignor ``Reason`` instead; docs/membership.md)."""
    took, owned, after, callbacks = asyncio.run(enforce(kip848))
    assert took is False
    assert after == owned
    assert callbacks == 0


# -- commit fencing ---------------------------------------------------------------------------


async def wire_commits(kafka: Cluster) -> dict[str, KafkaErrorCode]:
    """OffsetCommit v9 from a live member with its epoch, a later epoch, and an unknown member id."""
    topic, partitions = _topic(kafka, "kip848-fence", 2)
    settings: dict[str, Any] = {
        **KIP848,
        "bootstrap_servers": kafka.bootstrap_servers,
        "group_id": f"g-{topic}",
    }
    client = GroupCoordinatorClient(kafka.bootstrap_servers, f"g-{topic}")
    out: dict[str, KafkaErrorCode] = {}
    try:
        async with Consumer([topic], **settings) as member:
            await wait_until(lambda: member.assignment() == partitions, WAIT_S, "the assignment")

            async def commit(label: str, member_id: str, epoch: int) -> None:
                request = cg.OffsetCommitRequest(
                    group_id=f"g-{topic}",
                    generation_id=epoch,
                    member_id=member_id,
                    group_instance_id=None,
                    offsets=(cg.CommittedOffset(partition=TopicPartition(topic, 0), offset=0),),
                )
                response = await send_consumer_group_request(client, request, timeout_s=10)
                out[label] = response.errors[0][1]

            await commit("current epoch", member.member_id, member.generation)
            await commit("later epoch", member.member_id, member.generation + 1)
            await commit("unknown member", "not-a-member", member.generation)
    finally:
        await client.close()
    return out


def test_commits_are_fenced_by_member_id_and_epoch(kip848: Cluster) -> None:
    answers = asyncio.run(wire_commits(kip848))
    assert answers == {
        "current epoch": KafkaErrorCode.NONE,
        "later epoch": KafkaErrorCode.STALE_MEMBER_EPOCH,
        "unknown member": KafkaErrorCode.UNKNOWN_MEMBER_ID,
    }


async def frozen_member(kafka: Cluster) -> tuple[Audit, str, set[TopicPartition]]:
    """A member stops heartbeating (its driver is stopped, as in a process that hangs); once
    the broker's session timeout removed it and the other member owns everything, its commit
    is rejected."""
    topic, partitions = _topic(kafka, "kip848-frozen", 4)
    audit = Audit(partitions)
    workers = {n: _worker(n, audit, topic, kafka) for n in ("frozen", "live")}
    try:
        for w in workers.values():
            await w.start()
        await wait_until(stable(audit, partitions, set(workers)), WAIT_S, "two members")
        frozen = workers.pop("frozen")
        consumer = frozen.consumer
        assert consumer is not None
        assert consumer._driver_task is not None
        held = set(consumer.assignment())
        frozen._stopping = True
        consumer._driver_task.cancel()  # no heartbeat, no leave: only the session timeout tells
        audit.gone("frozen")
        await wait_until(
            stable(audit, partitions, {"live"}), BROKER_SESSION_S + WAIT_S, "the live member to own all"
        )
        error = ""
        try:
            await consumer.commit({tp: 0 for tp in held})
        except CommitFailedError as exc:
            error = str(exc)
        await frozen.stop()
        return audit, error, held
    finally:
        await _stop_all(workers)


def test_a_member_removed_by_the_session_timeout_cannot_commit(kip848: Cluster) -> None:
    audit, error, held = asyncio.run(frozen_member(kip848))
    assert held
    assert "UNKNOWN_MEMBER_ID" in error
    assert audit.ledger.report(0).violations == (), audit.timeline()


# -- cut off from the coordinator: partitions lost before anyone else gets them ---------------------


async def cut_off(
    kafka: Cluster,
) -> tuple[Audit, list[tuple[TopicPartition, ...]], frozenset[TopicPartition]]:
    """The heartbeats of one member stop getting through (its fetches still do), as in a network
    partition between it and the coordinator. When no heartbeat it sent within the broker's
    session timeout (10 s, read at start; its own 6 s only a fallback) was answered, it gives
    its partitions up as lost; the broker hands them to the other member only at that timeout
    counted from when it processed the last heartbeat, later, so no partition is owned twice.
    When the heartbeats get through again it rejoins at epoch 0."""
    topic, partitions = _topic(kafka, "kip848-cut", 4)
    audit = Audit(partitions)
    producer = SteadyProducer(kafka.bootstrap_servers, topic, audit, partitions=4, record_ids="offset")
    await producer.start()
    member_side = {"session_timeout_ms": 6_000, "heartbeat_interval_ms": 500, "request_timeout_ms": 2_000}
    workers = {n: _worker(n, audit, topic, kafka, **member_side) for n in ("cut", "other")}
    lost: list[tuple[TopicPartition, ...]] = []
    try:
        for w in workers.values():
            await w.start()
        await wait_until(stable(audit, partitions, set(workers)), WAIT_S, "two members")
        cut = workers["cut"]
        consumer = cut.consumer
        assert consumer is not None
        driver = consumer._driver
        assert isinstance(driver, ConsumerGroupDriver)
        reported_lost = cut.on_partitions_lost

        def on_lost(tps: tuple[TopicPartition, ...]) -> None:
            lost.append(tps)
            reported_lost(tps)

        cut.on_partitions_lost = on_lost  # type: ignore[method-assign]
        through = driver.request
        blocked = asyncio.Event()
        blocked.set()

        async def request(request: Any, timeout_ms: int) -> Any:
            if blocked.is_set() and isinstance(request, ConsumerGroupHeartbeatRequest):
                await asyncio.sleep(timeout_ms / 1000)
                raise ConnectionLost("heartbeat cut off by the test")
            return await through(request, timeout_ms)

        driver.request = request  # type: ignore[method-assign]
        await wait_until(lambda: bool(lost), WAIT_S, "the cut-off member to give its partitions up")
        await wait_until(stable(audit, partitions, {"other"}), WAIT_S, "the other member to own all")
        blocked.clear()
        await wait_until(stable(audit, partitions, set(workers)), WAIT_S, "the cut-off member back")
        await producer.stop()
        await wait_until(lambda: not audit.records.lost(), WAIT_S, "every acknowledged offset consumed")
        return audit, lost, consumer.assignment()
    finally:
        await _stop_all(workers)


def test_a_member_cut_off_from_the_coordinator_loses_its_partitions_before_they_move(kip848: Cluster) -> None:
    audit, lost, back = asyncio.run(cut_off(kip848))
    _check(audit)
    assert lost
    assert lost[0]  # what it owned, given up as lost (no commit, no revocation)
    assert back  # rejoined at epoch 0 with partitions
