"""A static member that misses a join barrier, request by request on the real broker.

This is the broker behaviour behind ``MemberConfig.lose_on_missed_generation`` and behind the
simulator's model of the classic coordinator (``tests/sim/test_coordinator.py`` replays the
same sequence on the model): the barrier completes after the rebalance timeout without the
static member, which stays in the group; the generation goes up by exactly one; the member's
Heartbeat at its old generation is answered ILLEGAL_GENERATION; rejoining with the same
metadata while the group is stable returns the current generation at once (no rebalance),
rejoining with new metadata starts a rebalance whose generation is two above the member's last.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass

import pytest

from streamtasks.embedded import Cluster, EmbeddedBroker
from streamtasks.protocol import classic_group as cg
from streamtasks.protocol.errors import KafkaErrorCode as E
from streamtasks.runtime.connection import GroupCoordinatorClient
from tests.runtime.test_connection import first_send

pytestmark = pytest.mark.integration

REBALANCE_MS = 3_000
TANSU_SKIP = (
    "Tansu keeps an absent static leader when a join barrier gives up on it, so nobody assigns "
    "(docs/testing.md, 'a join barrier that gives up on the group's leader'); this pins Apache "
    "Kafka's coordinator"
)


def join(group: str, member_id: str, metadata: bytes, instance: str | None = None) -> cg.JoinGroupRequest:
    return cg.JoinGroupRequest(
        group_id=group,
        member_id=member_id,
        group_instance_id=instance,
        session_timeout_ms=20_000,
        rebalance_timeout_ms=REBALANCE_MS,
        protocol_type="consumer",
        protocols=(cg.ProtocolMetadata(name="range", metadata=metadata),),
        reason="test",
    )


def sync(
    group: str,
    generation: int,
    member_id: str,
    instance: str | None = None,
    given: dict[str, bytes] | None = None,
) -> cg.SyncGroupRequest:
    return cg.SyncGroupRequest(
        group_id=group,
        generation_id=generation,
        member_id=member_id,
        group_instance_id=instance,
        protocol_type="consumer",
        protocol_name="range",
        assignments=tuple(
            cg.SyncGroupAssignment(member_id=k, assignment=v) for k, v in (given or {}).items()
        ),
    )


def beat(group: str, generation: int, member_id: str, instance: str | None = None) -> cg.HeartbeatRequest:
    return cg.HeartbeatRequest(
        group_id=group, generation_id=generation, member_id=member_id, group_instance_id=instance
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Observed:
    first_generation: int
    #: The generation both members took part in, then the one completed without the static member.
    together: int
    without: int
    #: Members the new leader was shown for ``without`` (the static member is still one).
    leader_saw: tuple[str, ...]
    stale_heartbeat: E
    #: The static member rejoining with unchanged metadata while the group is stable.
    same_metadata_generation: int
    same_metadata_sync: E
    #: The static member rejoining with new metadata: a rebalance, then this generation.
    new_metadata_generation: int


async def missed_barrier(bootstrap: str) -> Observed:
    group = f"missed-{uuid.uuid4().hex[:8]}"
    a = GroupCoordinatorClient(bootstrap, group, client_id="static-a")
    b = GroupCoordinatorClient(bootstrap, group, client_id="dynamic-b")
    try:
        # A, static, alone: generation g0.
        alone = await first_send(a, join(group, cg.UNKNOWN_MEMBER_ID, b"a1", "sa"))
        assert alone.error is E.NONE, alone
        a_id = alone.member_id
        assert (await a.send(sync(group, alone.generation_id, a_id, "sa", {a_id: b"x"}))).error is E.NONE
        # B joins; A learns of the rebalance from its heartbeat and rejoins: generation g1.
        required = await b.send(join(group, cg.UNKNOWN_MEMBER_ID, b"b1"))
        assert required.error is E.MEMBER_ID_REQUIRED
        b_id = required.member_id
        b_join = asyncio.ensure_future(b.send(join(group, b_id, b"b1"), timeout_s=30))
        while (await a.send(beat(group, alone.generation_id, a_id, "sa"))).error is E.NONE:
            await asyncio.sleep(0.1)
        a_join = await a.send(join(group, a_id, b"a1", "sa"), timeout_s=30)
        together = a_join.generation_id
        assert (await b_join).generation_id == together
        leader, follower = (a, b) if a_join.leader == a_id else (b, a)
        ids = {a: (a_id, "sa"), b: (b_id, None)}
        f_sync = asyncio.ensure_future(follower.send(sync(group, together, *ids[follower]), timeout_s=30))
        given = {a_id: b"x", b_id: b"y"}
        assert (await leader.send(sync(group, together, *ids[leader], given))).error is E.NONE
        assert (await f_sync).error is E.NONE
        # B rejoins with new metadata; A says nothing until the barrier gave up on it.
        b_again = await b.send(join(group, b_id, b"b2"), timeout_s=30)
        assert b_again.error is E.NONE, b_again
        without = b_again.generation_id
        leader_saw = tuple(sorted(m.member_id for m in b_again.members))
        assert (await b.send(sync(group, without, b_id, None, given))).error is E.NONE
        stale = (await a.send(beat(group, together, a_id, "sa"))).error
        # A rejoins with the metadata the coordinator holds: current generation, no rebalance.
        same = await a.send(join(group, a_id, b"a1", "sa"), timeout_s=30)
        same_sync = (await a.send(sync(group, same.generation_id, a_id, "sa"))).error
        # A rejoins with new metadata: a rebalance; B learns of it from its heartbeat.
        a_new = asyncio.ensure_future(a.send(join(group, a_id, b"a2", "sa"), timeout_s=30))
        while (await b.send(beat(group, without, b_id))).error is E.NONE:
            await asyncio.sleep(0.1)
        b_last = await b.send(join(group, b_id, b"b2"), timeout_s=30)
        a_last = await a_new
        assert a_last.generation_id == b_last.generation_id
        return Observed(
            first_generation=alone.generation_id,
            together=together,
            without=without,
            leader_saw=leader_saw,
            stale_heartbeat=stale,
            same_metadata_generation=same.generation_id,
            same_metadata_sync=same_sync,
            new_metadata_generation=a_last.generation_id,
        )
    finally:
        await a.close()
        await b.close()


def test_a_static_member_that_misses_a_barrier_stays_and_is_fenced_by_generation(kafka: Cluster) -> None:
    if isinstance(kafka, EmbeddedBroker):
        pytest.skip(TANSU_SKIP)
    seen = asyncio.run(missed_barrier(kafka.bootstrap_servers))
    assert seen.first_generation == 1
    assert seen.without == seen.together + 1
    assert len(seen.leader_saw) == 2  # the static member stayed in the group
    assert seen.stale_heartbeat is E.ILLEGAL_GENERATION
    assert seen.same_metadata_generation == seen.without
    assert seen.same_metadata_sync is E.NONE
    assert seen.new_metadata_generation == seen.together + 2
