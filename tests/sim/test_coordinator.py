"""The classic group coordinator model, driven request by request (no member machine)."""

from __future__ import annotations

from streamtasks.protocol.classic_group import (
    CommittedOffset,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    OffsetCommitRequest,
    OffsetCommitResponse,
    ProtocolMetadata,
    SyncGroupAssignment,
    SyncGroupRequest,
    SyncGroupResponse,
)
from streamtasks.protocol.errors import KafkaErrorCode as E
from streamtasks.sim.coordinator import ClassicGroupCoordinator, CoordinatorConfig, Reply
from streamtasks.sim.group_model import GroupState
from topology.ids import TopicPartition

G = "g"
NO_DELAY = CoordinatorConfig(initial_rebalance_delay_ms=100)


def join(
    member_id: str = "",
    *,
    instance: str | None = None,
    protocols: tuple[tuple[str, bytes], ...] = (("range", b"m"),),
    session: int = 10_000,
    rebalance: int = 20_000,
) -> JoinGroupRequest:
    return JoinGroupRequest(
        group_id=G,
        member_id=member_id,
        group_instance_id=instance,
        session_timeout_ms=session,
        rebalance_timeout_ms=rebalance,
        protocol_type="consumer",
        protocols=tuple(ProtocolMetadata(name=n, metadata=m) for n, m in protocols),
    )


def sync(
    member_id: str, generation: int, assignments: dict[str, bytes] | None = None, instance: str | None = None
) -> SyncGroupRequest:
    return SyncGroupRequest(
        group_id=G,
        generation_id=generation,
        member_id=member_id,
        group_instance_id=instance,
        protocol_type="consumer",
        protocol_name=None,
        assignments=tuple(
            SyncGroupAssignment(member_id=k, assignment=v) for k, v in (assignments or {}).items()
        ),
    )


def only(replies: list[Reply], conn: str) -> Reply:
    mine = [r for r in replies if r.conn == conn]
    assert len(mine) == 1, replies
    return mine[0]


def join_response(replies: list[Reply], conn: str) -> JoinGroupResponse:
    response = only(replies, conn).response
    assert isinstance(response, JoinGroupResponse)
    return response


def dynamic_join(c: ClassicGroupCoordinator, conn: str, now: int, **kw: object) -> tuple[str, list[Reply]]:
    """MEMBER_ID_REQUIRED round trip, then the real join; returns (member id, replies)."""
    first = join_response(c.handle(conn, 1, join(**kw), now), conn)  # type: ignore[arg-type]
    assert first.error is E.MEMBER_ID_REQUIRED
    assert first.member_id
    return first.member_id, c.handle(conn, 2, join(first.member_id, **kw), now)  # type: ignore[arg-type]


def stable_pair(c: ClassicGroupCoordinator) -> tuple[str, str]:
    a, _ = dynamic_join(c, "a", 0)
    b, replies = dynamic_join(c, "b", 0)
    assert replies == []
    assert c.poll(100) == []  # b joined during the initial delay: it is extended once
    replies = c.poll(200)
    assert {r.conn for r in replies} == {"a", "b"}
    ra = join_response(replies, "a")
    assert ra.generation_id == 1
    assert ra.leader == a
    assert [m.member_id for m in ra.members] == [a, b]
    assert join_response(replies, "b").members == ()
    c.handle("b", 3, sync(b, 1), 110)
    replies = c.handle("a", 3, sync(a, 1, {a: b"A", b: b"B"}), 110)
    assert {r.conn: r.response for r in replies} == {
        "a": SyncGroupResponse(
            error=E.NONE, protocol_type="consumer", protocol_name="range", assignment=b"A"
        ),
        "b": SyncGroupResponse(
            error=E.NONE, protocol_type="consumer", protocol_name="range", assignment=b"B"
        ),
    }
    assert c.state is GroupState.STABLE
    return a, b


def test_first_dynamic_join_requires_member_id() -> None:
    c = ClassicGroupCoordinator(G, NO_DELAY)
    response = join_response(c.handle("a", 1, join(), 0), "a")
    assert response.error is E.MEMBER_ID_REQUIRED
    assert response.member_id.startswith("a-")
    assert c.member_ids() == frozenset()


def test_pending_member_expires_after_session_timeout() -> None:
    c = ClassicGroupCoordinator(G, NO_DELAY)
    member_id = join_response(c.handle("a", 1, join(session=10_000), 0), "a").member_id
    c.poll(10_000)
    response = join_response(c.handle("a", 2, join(member_id), 10_001), "a")
    assert response.error is E.UNKNOWN_MEMBER_ID


def test_join_barrier_bumps_generation_and_answers_leader_with_members() -> None:
    c = ClassicGroupCoordinator(G, NO_DELAY)
    stable_pair(c)
    assert c.generation == 1


def test_initial_rebalance_delay_collects_late_joiners() -> None:
    c = ClassicGroupCoordinator(G, CoordinatorConfig(initial_rebalance_delay_ms=3_000))
    dynamic_join(c, "a", 0)
    assert c.poll(2_000) == []
    _, replies = dynamic_join(c, "b", 2_000)
    assert replies == []
    assert c.poll(3_000) == []  # a new member extended the delay
    replies = c.poll(6_000)
    assert {r.conn for r in replies} == {"a", "b"}


def test_heartbeat_during_rebalance_answers_rebalance_in_progress() -> None:
    c = ClassicGroupCoordinator(G, NO_DELAY)
    a, b = stable_pair(c)
    c.handle("a", 4, join(a), 100)  # the leader rejoins: a rebalance starts
    assert c.state is GroupState.PREPARING_REBALANCE
    replies = c.handle(
        "b", 4, HeartbeatRequest(group_id=G, generation_id=1, member_id=b, group_instance_id=None), 100
    )
    assert only(replies, "b").response == HeartbeatResponse(error=E.REBALANCE_IN_PROGRESS)


def test_rebalance_timeout_removes_members_that_did_not_rejoin() -> None:
    c = ClassicGroupCoordinator(G, NO_DELAY)
    a, b = stable_pair(c)
    assert c.handle("a", 4, join(a), 100) == []
    replies = c.poll(100 + 20_000)
    response = join_response(replies, "a")
    assert response.generation_id == 2
    assert [m.member_id for m in response.members] == [a]
    assert c.member_ids() == frozenset({a})
    late = c.handle(
        "b", 5, HeartbeatRequest(group_id=G, generation_id=1, member_id=b, group_instance_id=None), 20_200
    )
    assert only(late, "b").response == HeartbeatResponse(error=E.UNKNOWN_MEMBER_ID)


def test_session_expiry_removes_member_and_triggers_rebalance() -> None:
    c = ClassicGroupCoordinator(G, NO_DELAY)
    a, _ = stable_pair(c)
    hb = HeartbeatRequest(group_id=G, generation_id=1, member_id=a, group_instance_id=None)
    for t in range(3_000, 12_000, 3_000):
        c.handle("a", t, hb, t)
    c.poll(10_210)  # b last heard of at 210 (its SyncGroup)
    assert c.member_ids() == frozenset({a})
    assert c.state is GroupState.PREPARING_REBALANCE
    assert only(c.handle("a", 99, hb, 10_220), "a").response == HeartbeatResponse(
        error=E.REBALANCE_IN_PROGRESS
    )


def test_protocol_vote_picks_the_common_protocol_most_preferred() -> None:
    c = ClassicGroupCoordinator(G, NO_DELAY)
    both = (("cooperative_sticky", b"x"), ("range", b"y"))
    dynamic_join(c, "a", 0, protocols=both)
    dynamic_join(c, "b", 0, protocols=(("range", b"z"),))
    replies = c.poll(100) + c.poll(200)
    assert join_response(replies, "a").protocol_name == "range"
    leader_view = join_response(replies, "a").members
    assert [m.metadata for m in leader_view] == [b"y", b"z"]


def test_incompatible_protocols_are_rejected() -> None:
    c = ClassicGroupCoordinator(G, NO_DELAY)
    stable_pair(c)
    response = join_response(c.handle("z", 1, join(protocols=(("sticky", b""),)), 50), "z")
    assert response.error is E.INCONSISTENT_GROUP_PROTOCOL


def test_static_member_replacement_fences_old_instance_and_skips_assignment_for_leader() -> None:
    c = ClassicGroupCoordinator(G, NO_DELAY)
    assert c.handle("s1", 1, join(instance="i"), 0) == []  # static: no MEMBER_ID_REQUIRED
    first = join_response(c.poll(100), "s1")
    assert first.error is E.NONE
    old = first.member_id
    c.handle("s1", 2, sync(old, 1, {old: b"P"}, instance="i"), 100)
    assert c.state is GroupState.STABLE
    # a new process with the same instance id
    response = join_response(c.handle("s2", 1, join(instance="i"), 100), "s2")
    assert response.error is E.NONE
    assert response.member_id != old
    assert response.skip_assignment is True
    assert response.leader == response.member_id
    assert response.generation_id == 1  # no rebalance
    assert [m.group_instance_id for m in response.members] == ["i"]
    got = only(c.handle("s2", 2, sync(response.member_id, 1, instance="i"), 100), "s2").response
    assert isinstance(got, SyncGroupResponse)
    assert got.assignment == b"P"
    stale = HeartbeatRequest(group_id=G, generation_id=1, member_id=old, group_instance_id="i")
    assert only(c.handle("s1", 3, stale, 100), "s1").response == HeartbeatResponse(error=E.FENCED_INSTANCE_ID)


def test_static_leader_without_kip814_is_not_told_it_leads() -> None:
    c = ClassicGroupCoordinator(
        G, CoordinatorConfig(initial_rebalance_delay_ms=100, supports_skip_assignment=False)
    )
    c.handle("s1", 1, join(instance="i"), 0)
    old = join_response(c.poll(100), "s1").member_id
    c.handle("s1", 2, sync(old, 1, {old: b"P"}, instance="i"), 100)
    response = join_response(c.handle("s2", 1, join(instance="i"), 100), "s2")
    assert response.skip_assignment is False
    assert response.leader == old
    assert response.members == ()


def test_offset_commit_is_validated_against_generation_and_member() -> None:
    c = ClassicGroupCoordinator(G, NO_DELAY)
    a, _ = stable_pair(c)
    tp = TopicPartition("t", 0)

    def commit(member: str, generation: int) -> E:
        req = OffsetCommitRequest(
            group_id=G,
            generation_id=generation,
            member_id=member,
            group_instance_id=None,
            offsets=(CommittedOffset(partition=tp, offset=7),),
        )
        response = only(c.handle("x", 1, req, 50), "x").response
        assert isinstance(response, OffsetCommitResponse)
        return response.errors[0][1]

    assert commit(a, 1) is E.NONE
    assert c.offsets[tp].offset == 7
    assert commit(a, 0) is E.ILLEGAL_GENERATION
    assert commit("nobody", 1) is E.UNKNOWN_MEMBER_ID
    c.handle("a", 4, join(a), 60)  # leader rejoins → PreparingRebalance: commits still allowed
    assert commit(a, 1) is E.NONE
    c.poll(60 + 20_000)  # join completes without b; CompletingRebalance
    assert commit(a, 2) is E.REBALANCE_IN_PROGRESS


def test_pending_sync_expiry_removes_members_that_never_synced() -> None:
    c = ClassicGroupCoordinator(G, NO_DELAY)
    a, _ = dynamic_join(c, "a", 0, session=30_000)
    b, _ = dynamic_join(c, "b", 0, session=30_000)
    c.poll(100)
    c.poll(200)
    c.handle("a", 3, sync(a, 1, {a: b"A", b: b"B"}), 210)  # b never syncs
    c.poll(20_200)
    assert c.member_ids() == frozenset({a})
    assert c.state is GroupState.PREPARING_REBALANCE


def test_leave_group_triggers_rebalance() -> None:
    c = ClassicGroupCoordinator(G, NO_DELAY)
    a, b = stable_pair(c)
    c.handle("b", 9, LeaveGroupRequest(group_id=G, member_id=b), 100)
    assert c.member_ids() == frozenset({a})
    assert c.state is GroupState.PREPARING_REBALANCE


def test_fail_over_reloads_last_stable_generation() -> None:
    c = ClassicGroupCoordinator(G, NO_DELAY)
    a, b = stable_pair(c)
    c.handle("a", 4, join(a), 100)
    c.handle("b", 4, join(b), 100)  # generation 2 completes, not yet synced
    assert c.generation == 2
    c.fail_over(200, 1_000)
    hb = HeartbeatRequest(group_id=G, generation_id=2, member_id=a, group_instance_id=None)
    assert only(c.handle("a", 5, hb, 500), "a").response == HeartbeatResponse(error=E.NOT_COORDINATOR)
    assert only(c.handle("a", 6, hb, 1_300), "a").response == HeartbeatResponse(error=E.ILLEGAL_GENERATION)
    assert c.generation == 1
    assert c.state is GroupState.STABLE
