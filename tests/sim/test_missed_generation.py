"""The coordinator model against Apache Kafka 4.4.0 for a static member that misses a barrier.

``tests/runtime/test_missed_generation.py`` sends this sequence to the real broker; here the
model answers the same requests and must give the same answers (measured on 2026-11-23:
generations 1, 2, 3 with both members shown to the new leader, ILLEGAL_GENERATION, 3 again
without a rebalance, then 4).
"""

from __future__ import annotations

from streamtasks.protocol.classic_group import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    SyncGroupResponse,
)
from streamtasks.protocol.errors import KafkaErrorCode as E
from streamtasks.sim.coordinator import ClassicGroupCoordinator
from streamtasks.sim.group_model import GroupState
from tests.sim.test_coordinator import NO_DELAY, G, dynamic_join, join, join_response, only, sync

REBALANCE = 3_000


def rejoin(member_id: str, metadata: bytes, instance: str | None = None) -> JoinGroupRequest:
    protocols = (("range", metadata),)
    return join(member_id, instance=instance, protocols=protocols, session=20_000, rebalance=REBALANCE)


def beat(member_id: str, generation: int, instance: str | None = None) -> HeartbeatRequest:
    return HeartbeatRequest(
        group_id=G, generation_id=generation, member_id=member_id, group_instance_id=instance
    )


def heartbeat_error(c: ClassicGroupCoordinator, conn: str, request: HeartbeatRequest, now: int) -> E:
    response = only(c.handle(conn, 9, request, now), conn).response
    assert isinstance(response, HeartbeatResponse)
    return response.error


def test_a_static_member_that_misses_a_barrier_stays_and_is_fenced_by_generation() -> None:
    c = ClassicGroupCoordinator(G, NO_DELAY)
    c.handle("a", 1, rejoin("", b"a1", "sa"), 0)
    alone = join_response(c.poll(100), "a")
    a = alone.member_id
    assert alone.generation_id == 1  # Kafka's first generation (Tansu's is 0)
    c.handle("a", 2, sync(a, 1, {a: b"x"}, instance="sa"), 100)
    # B joins; A hears of the rebalance from its heartbeat and rejoins: generation 2.
    b, replies = dynamic_join(c, "b", 200, protocols=(("range", b"b1"),), session=20_000, rebalance=REBALANCE)
    assert replies == []
    assert heartbeat_error(c, "a", beat(a, 1, "sa"), 300) is E.REBALANCE_IN_PROGRESS
    replies = c.handle("a", 3, rejoin(a, b"a1", "sa"), 300)
    assert {join_response(replies, conn).generation_id for conn in ("a", "b")} == {2}
    c.handle("b", 3, sync(b, 2), 300)
    c.handle("a", 4, sync(a, 2, {a: b"x", b: b"y"}, instance="sa"), 300)
    assert c.state is GroupState.STABLE
    # B rejoins with new metadata; A stays silent: the barrier gives up on A after the
    # rebalance timeout, keeps it (static) and completes generation 3 with B leading.
    assert c.handle("b", 4, rejoin(b, b"b2"), 400) == []
    assert c.poll(400 + REBALANCE - 1) == []
    without = join_response(c.poll(400 + REBALANCE), "b")
    assert without.generation_id == 3
    assert without.leader == b
    assert sorted(m.member_id for m in without.members) == sorted([a, b])
    c.handle("b", 5, sync(b, 3, {a: b"x", b: b"y"}), 3_500)
    # A's heartbeat at its generation is fenced; the member id is still good.
    assert heartbeat_error(c, "a", beat(a, 2, "sa"), 3_600) is E.ILLEGAL_GENERATION
    # Rejoining with the metadata the coordinator holds: the current generation, no rebalance.
    same = join_response(c.handle("a", 5, rejoin(a, b"a1", "sa"), 3_700), "a")
    assert same.generation_id == 3
    assert c.state is GroupState.STABLE
    synced = only(c.handle("a", 6, sync(a, 3, instance="sa"), 3_700), "a").response
    assert isinstance(synced, SyncGroupResponse)
    assert synced.error is E.NONE
    # Rejoining with new metadata: a rebalance, and A's next generation is two above its last.
    assert c.handle("a", 7, rejoin(a, b"a2", "sa"), 3_800) == []
    assert heartbeat_error(c, "b", beat(b, 3), 3_900) is E.REBALANCE_IN_PROGRESS
    replies = c.handle("b", 6, rejoin(b, b"b2"), 3_900)
    assert {join_response(replies, conn).generation_id for conn in ("a", "b")} == {4}
