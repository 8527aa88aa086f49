"""A static leader's new process on the real broker: what KIP-814 tells it and what it can ask.

The simulator found (seed 705380203, docs/simulation.md) that a cooperative leader which withheld
partitions and was restarted before it revoked them left them unowned: its new process rejoins
the Stable group with the same ``group.instance.id``, Apache Kafka's coordinator answers with the
current generation, ``SkipAssignment`` and the stored assignment, no rebalance, and nothing in that
answer says that partitions were withheld. This test sends that sequence request by request and
pins what the classic member's check relies on: DescribeGroups answers every member's current
assignment while the group is Stable, so the new leader can tell a withheld partition (assigned to
nobody: follow-up needed) from one the last generation handed out fresh (no rebalance).
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass

import pytest

from streamtasks.embedded import Cluster
from streamtasks.membership.classic import phases as P
from streamtasks.membership.classic.leader import decode_members
from streamtasks.protocol import classic_group as cg
from streamtasks.protocol.consumer_protocol import (
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
    encode_assignment,
    encode_subscription,
)
from streamtasks.protocol.errors import KafkaErrorCode as E
from streamtasks.runtime.connection import GroupCoordinatorClient
from tests.runtime.test_connection import first_send
from topology.ids import TopicPartition

pytestmark = pytest.mark.integration

TOPIC = "t"
PARTITIONS = tuple(TopicPartition(TOPIC, p) for p in range(4))
PROTOCOL = "cooperative-sticky"


def subscription(owned: tuple[TopicPartition, ...] = (), generation: int = -1) -> bytes:
    return encode_subscription(
        ConsumerProtocolSubscription(
            topics=(TOPIC,), user_data=None, owned_partitions=owned, generation_id=generation
        )
    )


def assignment(*partitions: TopicPartition) -> bytes:
    return encode_assignment(ConsumerProtocolAssignment(assigned_partitions=partitions, user_data=None))


def join(group: str, member_id: str, metadata: bytes, instance: str) -> cg.JoinGroupRequest:
    return cg.JoinGroupRequest(
        group_id=group,
        member_id=member_id,
        group_instance_id=instance,
        session_timeout_ms=30_000,
        rebalance_timeout_ms=5_000,
        protocol_type="consumer",
        protocols=(cg.ProtocolMetadata(name=PROTOCOL, metadata=metadata),),
        reason="test",
    )


def sync(
    group: str, generation: int, member_id: str, instance: str, given: dict[str, bytes] | None = None
) -> cg.SyncGroupRequest:
    return cg.SyncGroupRequest(
        group_id=group,
        generation_id=generation,
        member_id=member_id,
        group_instance_id=instance,
        protocol_type="consumer",
        protocol_name=PROTOCOL,
        assignments=tuple(
            cg.SyncGroupAssignment(member_id=k, assignment=v) for k, v in (given or {}).items()
        ),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Restart:
    generation_before: int
    rejoin: cg.JoinGroupResponse
    own: bytes
    described: cg.DescribeGroupResponse
    unclaimed: frozenset[TopicPartition]


async def restart_leader(bootstrap: str, given_to_b: tuple[TopicPartition, ...]) -> Restart:
    """A (static, leader) and B (static) form generation g: A keeps t-0 and t-1, B gets
    ``given_to_b`` (the rest is withheld, as if A still had to revoke it). A's process is
    replaced: a new connection joins with A's instance id, claiming nothing."""
    group = f"skip-{uuid.uuid4().hex[:8]}"
    a = GroupCoordinatorClient(bootstrap, group, client_id="a")
    b = GroupCoordinatorClient(bootstrap, group, client_id="b")
    a2 = GroupCoordinatorClient(bootstrap, group, client_id="a-restarted")
    try:
        alone = await first_send(a, join(group, cg.UNKNOWN_MEMBER_ID, subscription(), "ia"))
        assert alone.error is E.NONE, alone
        a_id = alone.member_id
        await a.send(sync(group, alone.generation_id, a_id, "ia", {a_id: assignment(*PARTITIONS)}))
        b_joining = asyncio.ensure_future(
            b.send(join(group, cg.UNKNOWN_MEMBER_ID, subscription(), "ib"), timeout_s=30)
        )
        # A hears of the rebalance from its heartbeat and rejoins claiming all four.
        beat = cg.HeartbeatRequest(
            group_id=group, generation_id=alone.generation_id, member_id=a_id, group_instance_id="ia"
        )
        while (await a.send(beat)).error is E.NONE:
            await asyncio.sleep(0.05)
        claim = subscription(PARTITIONS, alone.generation_id)
        a_join = await a.send(join(group, a_id, claim, "ia"), timeout_s=30)
        b_join = await b_joining
        assert b_join.error is E.NONE, b_join
        assert b_join.generation_id == a_join.generation_id
        generation = a_join.generation_id
        assert a_join.leader == a_id, "A joined first and stays the leader"
        given = {a_id: assignment(*PARTITIONS[:2]), b_join.member_id: assignment(*given_to_b)}
        assert (await a.send(sync(group, generation, a_id, "ia", given))).error is E.NONE
        assert (await b.send(sync(group, generation, b_join.member_id, "ib"))).error is E.NONE
        # A's process dies before revoking; its new process joins with the same instance id.
        rejoin = await a2.send(join(group, cg.UNKNOWN_MEMBER_ID, subscription(), "ia"), timeout_s=30)
        own = await a2.send(sync(group, rejoin.generation_id, rejoin.member_id, "ia"))
        assert own.error is E.NONE, own
        described = await a2.send(cg.DescribeGroupRequest(group_id=group))
        decoded = decode_members(rejoin.members, assignor=None, generation_marker=True)
        return Restart(
            generation_before=generation,
            rejoin=rejoin,
            own=own.assignment,
            described=described,
            unclaimed=P.unclaimed_partitions(decoded, {TOPIC: len(PARTITIONS)}),
        )
    finally:
        for client in (a, b, a2):
            await client.close()


def test_a_restarted_static_leader_can_tell_withheld_partitions_from_fresh_ones(kafka: Cluster) -> None:
    withheld = asyncio.run(restart_leader(kafka.bootstrap_servers, given_to_b=()))
    rejoin = withheld.rejoin
    assert rejoin.error is E.NONE
    assert rejoin.skip_assignment  # KIP-814: it leads, must not assign
    assert rejoin.leader == rejoin.member_id
    assert rejoin.generation_id == withheld.generation_before  # no rebalance
    assert withheld.own == assignment(*PARTITIONS[:2])  # the stored assignment
    # Nobody claims t-2, t-3 (the new process claims nothing, B claimed nothing when it joined).
    assert withheld.unclaimed == frozenset(PARTITIONS)
    assert withheld.described.group_state == "Stable"
    assert len(withheld.described.members) == 2
    candidates = withheld.unclaimed - set(PARTITIONS[:2])
    assert P.unassigned_partitions(candidates, withheld.described) == frozenset(PARTITIONS[2:])

    fresh = asyncio.run(restart_leader(kafka.bootstrap_servers, given_to_b=PARTITIONS[2:]))
    candidates = fresh.unclaimed - set(PARTITIONS[:2])
    assert candidates == frozenset(PARTITIONS[2:])  # unclaimed as well: the claims cannot tell
    assert P.unassigned_partitions(candidates, fresh.described) == frozenset()  # DescribeGroups can
