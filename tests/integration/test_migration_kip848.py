"""Online migration of one group between the classic protocol and KIP-848 (issue 14, item 6) on
Apache Kafka's coordinator (``group.consumer.migration.policy``: ``bidirectional``, its default).

A group of classic cooperative members (two streamtasks consumers with ``cooperative_sticky``
and librdkafka with ``cooperative-sticky``) consumes under a steady producer. Every member is
bounced once onto ``group_protocol="consumer"`` (upgrade), then once back (downgrade):

- the first KIP-848 member's heartbeat converts the classic group into a consumer group; the
  classic members stay in it, served through the broker's translation (JoinGroup/SyncGroup/
  Heartbeat answered from the member's KIP-848 state, REBALANCE_IN_PROGRESS on a heartbeat when
  its assignment must change);
- the group turns back into a classic group when its last KIP-848 member leaves and the others
  all speak the classic protocol.

Checked after every bounce: what the coordinator says the group is (ConsumerGroupDescribe for a
consumer group with each member's type, DescribeGroups for a classic one); from every member's
callbacks no partition is owned twice at any moment; every offset the broker acknowledged is
consumed (per (partition, offset)).
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiokafka.admin import AIOKafkaAdminClient

from streamtasks.embedded import Cluster, EmbeddedBroker
from streamtasks.protocol.consumer_group import (
    CONSUMER_GROUP_DESCRIBE_API_KEY,
    CONSUMER_GROUP_HEARTBEAT_API_KEY,
    ConsumerGroupDescribeRequest,
    ConsumerGroupHeartbeatRequest,
)
from streamtasks.protocol.consumer_group_codec import decode_describe_response, encode_describe_request
from streamtasks.protocol.errors import KafkaErrorCode
from streamtasks.runtime.connection import GroupCoordinatorClient
from streamtasks.runtime.consumer_driver import send_consumer_group_request
from tests.integration.harness import (
    Audit,
    JavaPeer,
    JavaPeerMissing,
    LiveGroup,
    java_peer,
    stable,
    start_worker,
    stop_worker,
    wait_until,
)
from tests.integration.test_consumer_kip848 import KIP848, TANSU_SKIP

pytestmark = pytest.mark.integration

PARTITIONS = 6
WAIT_S = 90
#: ConsumerGroupDescribe v1 member types (KIP-1099).
CLASSIC, CONSUMER = 0, 1
JAVA_COOPERATIVE_STICKY = "org.apache.kafka.clients.consumer.CooperativeStickyAssignor"
#: Member names by client id (librdkafka's default client id is "rdkafka").
NAMES = {"rdkafka": "confluent"}


@dataclass(frozen=True, slots=True)
class GroupView:
    """What the coordinator says the group is after a step of the bounce."""

    step: str
    #: "consumer" (ConsumerGroupDescribe answers) or "classic" (DescribeGroups answers).
    kind: str
    state: str
    #: client id -> member type (consumer groups) or the classic group's protocol per member.
    members: tuple[tuple[str, str], ...]


@pytest.fixture(scope="module")
def kip848(kafka: Cluster) -> Cluster:
    if isinstance(kafka, EmbeddedBroker):
        pytest.skip(TANSU_SKIP)
    if CONSUMER_GROUP_HEARTBEAT_API_KEY not in kafka.api_versions():
        pytest.skip("the cluster does not serve ConsumerGroupHeartbeat (API 68)")
    return kafka


@pytest.fixture(scope="module")
def peer(kip848: Cluster) -> JavaPeer:
    """The compiled Java peer, or a skip saying what is missing."""
    try:
        return java_peer()
    except JavaPeerMissing as exc:
        pytest.skip(f"the Java consumer peer cannot run here: {exc}")


async def view_group(bootstrap: str, group: str, step: str) -> GroupView:
    """ConsumerGroupDescribe; a classic group is not found there, so DescribeGroups describes it."""
    client = GroupCoordinatorClient(bootstrap, group)
    try:
        body = encode_describe_request(ConsumerGroupDescribeRequest(group_ids=(group,)), 1)
        raw = await client.send_raw(CONSUMER_GROUP_DESCRIBE_API_KEY, 1, body, timeout_s=10)
    finally:
        await client.close()
    (found,) = decode_describe_response(raw, 1).groups
    if found.error is KafkaErrorCode.NONE:
        types = {CLASSIC: "classic", CONSUMER: "consumer"}
        members = sorted(
            (NAMES.get(m.client_id, m.client_id), types.get(m.member_type, str(m.member_type)))
            for m in found.members
        )
        return GroupView(step, "consumer", found.group_state, tuple(members))
    assert found.error is KafkaErrorCode.GROUP_ID_NOT_FOUND, found
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        (response,) = await admin.describe_consumer_groups([group])
    finally:
        await admin.close()
    (described,) = response.groups
    error_code, group_id, state, protocol_type, protocol, members = described[:6]
    assert (error_code, group_id, protocol_type) == (0, group, "consumer"), described
    # each member: (member_id, client_id, client_host, metadata, assignment) in DescribeGroups v0-v3
    names = sorted(NAMES.get(m[1], m[1]) for m in members)
    return GroupView(step, "classic", state, tuple((n, protocol) for n in names))


async def migrate(
    kafka: Cluster,
    log_dir: Path,
    order: tuple[str, ...],
    peer: JavaPeer | None = None,
    classic_assignor: str = "cooperative_sticky",
) -> tuple[Audit, list[GroupView]]:
    g = LiveGroup.create(
        kafka, f"migration-{uuid.uuid4().hex[:6]}", PARTITIONS, record_ids="offset", log_dir=log_dir,
        java_peer=peer,
    )  # fmt: skip
    audit, bootstrap, group, partitions = g.audit, g.bootstrap, g.group, g.partitions
    views: list[GroupView] = []

    def make(name: str, protocol: str) -> Any:
        if name.startswith("st"):
            settings: dict[str, Any] = KIP848 if protocol == "consumer" else {"assignors": [classic_assignor]}
            return g.streamtasks(name, client_id=name, **settings)
        if name == "java":
            props = (
                {"group.protocol": "consumer"}
                if protocol == "consumer"
                else {"group.protocol": "classic", "partition.assignment.strategy": JAVA_COOPERATIVE_STICKY}
            )
            return g.java(name, props)
        return g.confluent(name, group_protocol=protocol)

    async def bounce(name: str, protocol: str) -> None:
        await stop_worker(workers.pop(name))
        audit.gone(name)
        await wait_until(stable(audit, partitions, set(workers)), WAIT_S, f"the group without {name}")
        workers[name] = make(name, protocol)
        await start_worker(workers[name])
        await wait_until(stable(audit, partitions, set(workers)), WAIT_S, f"{name} back on {protocol}")
        views.append(await view_group(bootstrap, group, f"{name} -> {protocol}"))

    producer = g.producer()
    await producer.start()
    producing = True
    workers: dict[str, Any] = {}
    try:
        for name in order:
            workers[name] = make(name, "classic")
            await start_worker(workers[name])
            await wait_until(stable(audit, partitions, set(workers)), WAIT_S, f"{name} to get partitions")
        views.append(await view_group(bootstrap, group, "classic"))
        for name in order:
            await bounce(name, "consumer")
        for name in order:
            await bounce(name, "classic")
        await producer.stop()
        producing = False
        await wait_until(lambda: not audit.records.lost(), WAIT_S, "every record consumed")
        for name in list(workers):
            await stop_worker(workers.pop(name))
    finally:
        for w in workers.values():
            with contextlib.suppress(Exception):
                await stop_worker(w)
        if producing:
            await producer.stop()
        (log_dir / "timeline.txt").write_text(audit.timeline())
        (log_dir / "views.txt").write_text("".join(f"{v}\n" for v in views))
        print(f"the callbacks' timeline and the group after each step: {log_dir}")
    return audit, views


def expected_views(
    order: tuple[str, ...], classic_protocol: str = "cooperative-sticky"
) -> list[tuple[str, str, tuple[tuple[str, str], ...]]]:
    """(step, group kind, member types) after each bounce of ``order`` up and then down."""
    names = sorted(order)
    all_classic = tuple((n, classic_protocol) for n in names)
    out = [("classic", "classic", all_classic)]
    protocols = dict.fromkeys(order, "classic")
    for target in ("consumer", "classic"):
        for name in order:
            protocols[name] = target
            if "consumer" in protocols.values():
                out.append((f"{name} -> {target}", "consumer", tuple((n, protocols[n]) for n in names)))
            else:  # the last KIP-848 member left: the group is classic again
                out.append((f"{name} -> {target}", "classic", all_classic))
    return out


def test_expected_views_convert_at_the_first_upgrade_and_the_last_downgrade() -> None:
    views = expected_views(("a", "b"))
    assert [(step, kind) for step, kind, _ in views] == [
        ("classic", "classic"),
        ("a -> consumer", "consumer"),
        ("b -> consumer", "consumer"),
        ("a -> classic", "consumer"),
        ("b -> classic", "classic"),
    ]
    assert views[1][2] == (("a", "consumer"), ("b", "classic"))


def test_upgrade_and_downgrade_with_every_member_bounced_once(kip848: Cluster, tmp_path: Path) -> None:
    # librdkafka is bounced first: a librdkafka (cooperative-sticky) leader of the last classic
    # generation copies each member's subscription user data into its assignment, and Apache Kafka
    # refuses to convert a group whose assignments carry user data (GROUP_ID_NOT_FOUND, "an
    # unsupported custom assignor is in use") until a generation led by another client.
    # streamtasks leaders write no assignment user data (docs/testing.md).
    order = ("confluent", "st1", "st2")
    audit, views = asyncio.run(migrate(kip848, tmp_path, order))
    check(audit, views, order)


def test_upgrade_and_downgrade_with_the_java_consumer(
    kip848: Cluster, peer: JavaPeer, tmp_path: Path
) -> None:
    """The same with the Java ``KafkaConsumer`` (``CooperativeStickyAssignor`` on the classic
    protocol, ``group.protocol=consumer`` after its bounce) in the group."""
    order = ("confluent", "java", "st1")
    audit, views = asyncio.run(migrate(kip848, tmp_path, order, peer))
    check(audit, views, order)


def test_eager_streamtasks_members_migrate_too(kip848: Cluster, tmp_path: Path) -> None:
    """Apache Kafka has no check for eager classic members: streamtasks members with ``range``
    (EAGER) are served inside the consumer group the same way; an eager member gives up all
    its partitions before each rejoin, so the translation never sees them owned twice."""
    order = ("st1", "st2", "st3")
    audit, views = asyncio.run(migrate(kip848, tmp_path, order, classic_assignor="range"))
    check(audit, views, order, "range")


def check(
    audit: Audit, views: list[GroupView], order: tuple[str, ...], classic_protocol: str = "cooperative-sticky"
) -> None:
    assert [(v.step, v.kind, v.members) for v in views] == expected_views(order, classic_protocol)
    report = audit.ledger.report(0)
    assert report.violations == (), audit.timeline()
    assert audit.records.lost() == []
    assert audit.records.produced_count > 0


async def librdkafka_led_upgrade(kafka: Cluster) -> tuple[list[Any], Audit]:
    """librdkafka leads a classic group (it joined first) with a streamtasks member beside it; a
    KIP-848 join is answered, then librdkafka leaves (streamtasks leads the next generation) and
    the same join is answered again. Returns both answers and the audit."""
    g = LiveGroup.create(kafka, f"migration-rdkafka-leads-{uuid.uuid4().hex[:6]}", 3)
    audit, bootstrap, group, topic, partitions = g.audit, g.bootstrap, g.group, g.topic, g.partitions
    workers: dict[str, Any] = {
        "confluent": g.confluent("confluent"),
        "st1": g.streamtasks("st1", assignors=["cooperative_sticky"]),
    }
    join = ConsumerGroupHeartbeatRequest(
        group_id=group,
        member_id=uuid.uuid4().hex,
        member_epoch=0,
        rebalance_timeout_ms=10_000,
        subscribed_topic_names=(topic,),
        topic_partitions=(),
    )
    answers: list[Any] = []
    client = GroupCoordinatorClient(bootstrap, group)
    try:
        started: set[str] = set()
        for name, worker in workers.items():  # librdkafka first: it leads every generation it is in
            await start_worker(worker)
            started.add(name)
            await wait_until(stable(audit, partitions, started), WAIT_S, f"{name} to get partitions")
        answers.append(await send_consumer_group_request(client, join, timeout_s=10))
        await stop_worker(workers.pop("confluent"))
        audit.gone("confluent")
        await wait_until(stable(audit, partitions, {"st1"}), WAIT_S, "st1 alone")
        answers.append(await send_consumer_group_request(client, join, timeout_s=10))
        leave = ConsumerGroupHeartbeatRequest(group_id=group, member_id=join.member_id, member_epoch=-1)
        await send_consumer_group_request(client, leave, timeout_s=10)
    finally:
        await client.close()
        for w in workers.values():
            with contextlib.suppress(Exception):
                await stop_worker(w)
    return answers, audit


def test_a_librdkafka_led_classic_generation_blocks_the_upgrade(kip848: Cluster) -> None:
    """Apache Kafka refuses to convert a classic group whose assignments carry user data;
    librdkafka's leader copies each member's subscription user data into its assignment, so the
    first KIP-848 member is refused until a generation led by another client (docs/testing.md)."""
    (refused, accepted), audit = asyncio.run(librdkafka_led_upgrade(kip848))
    assert refused.error is KafkaErrorCode.GROUP_ID_NOT_FOUND
    assert "unsupported custom assignor" in (refused.error_message or "")
    assert accepted.error is KafkaErrorCode.NONE, accepted
    assert accepted.member_epoch > 0
    assert audit.ledger.report(0).violations == (), audit.timeline()
