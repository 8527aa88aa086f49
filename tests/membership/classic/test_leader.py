"""The leader role: assignment (KIP-429 2a-2f), stale claims (KIP-341), SkipAssignment and
metadata monitoring (KIP-814)."""

from __future__ import annotations

from assignors.partition.range import RangeAssignor
from assignors.partition.sticky import CooperativeStickyAssignor, StickyAssignor
from streamtasks.membership.classic import (
    ClassicMember,
    ErrorReported,
    MemberState,
    MetadataUpdated,
    RequestFailed,
    ResponseReceived,
    SendRequest,
)
from streamtasks.membership.classic.leader import decode_members, lead, legacy_trust_claims
from streamtasks.protocol.classic_group import (
    DescribedMember,
    DescribeGroupRequest,
    DescribeGroupResponse,
    JoinGroupMember,
    JoinGroupRequest,
)
from streamtasks.protocol.consumer_protocol import (
    ConsumerProtocolSubscription,
    decode_assignment,
    encode_subscription,
)
from streamtasks.protocol.sticky import StickyUserData, decode_sticky_userdata, encode_sticky_userdata
from tests.membership.classic.helpers import (
    E,
    assignment_bytes,
    config,
    join,
    join_ok,
    of,
    one,
    rejoin,
    request,
    stable,
    sync_ok,
    tps,
)


def sub(topics: tuple[str, ...] = ("t",), owned: str = "", generation: int = -1, **kw: object) -> bytes:
    return encode_subscription(
        ConsumerProtocolSubscription(
            topics=topics,
            user_data=kw.pop("user_data", None),
            owned_partitions=tps(owned),
            generation_id=generation,
        ),
        **kw,
    )


def jm(member_id: str, metadata: bytes, instance: str | None = None) -> JoinGroupMember:
    return JoinGroupMember(member_id=member_id, group_instance_id=instance, metadata=metadata)


def assigned(sync_assignments: object) -> dict[str, tuple[object, ...]]:
    return {a.member_id: decode_assignment(a.assignment).assigned_partitions for a in sync_assignments}


def test_leader_decodes_assigns_and_encodes_for_every_member() -> None:
    member = ClassicMember(config())
    member.handle(MetadataUpdated(partitions_per_topic={"t": 4}), 0)
    rid, req = join(member)
    members = (jm("m1", req.protocols[0].metadata), jm("m2", sub()))
    _, _, sync = join_ok(member, rid, member_id="m1", leader="m1", members=members)
    assert member.is_leader
    got = assigned(sync.assignments)
    assert sorted(got) == ["m1", "m2"]
    assert sorted(got["m1"] + got["m2"]) == list(tps("t0 t1 t2 t3"))
    assert len(got["m1"]) == len(got["m2"]) == 2
    assert member.group_topics == ("t",)


def test_leader_withholds_partitions_that_change_owner_cooperative() -> None:
    result = lead(
        (jm("a", sub(owned="t0 t1 t2 t3", generation=3)), jm("b", sub())),
        assignor=CooperativeStickyAssignor(),
        partitions_per_topic={"t": 4},
    )
    assert len(result.assignment["a"]) == 2  # keeps two, revokes two
    assert result.assignment["b"] == ()  # nothing yet: the two are still owned by a
    assert result.followup_needed


def test_leader_ignores_claims_of_an_older_generation_kip341() -> None:
    # b owns t0 in generation 5; a stale member claims it from generation 2
    members = (jm("a", sub(owned="t0", generation=2)), jm("b", sub(owned="t0 t1", generation=5)))
    result = lead(members, assignor=CooperativeStickyAssignor(), partitions_per_topic={"t": 2})
    # b's claim wins: b keeps t0 and gives up t1, which a gets once b revoked it (withheld now)
    assert dict(result.assignment) == {"a": (), "b": tps("t0")}
    assert result.followup_needed
    decoded = decode_members(members, assignor=CooperativeStickyAssignor(), generation_marker=True)
    assert decoded.subscriptions["a"].generation == 2


def test_leader_ignores_claims_under_a_forged_generation_below_minus_one() -> None:
    # A peer's subscription says generation -7 (no member can own partitions under it): the
    # round goes on, its claims are dropped and reported, everyone gets a balanced assignment.
    members = (jm("a", sub(owned="t0 t1", generation=-7)), jm("b", sub(owned="t2 t3", generation=4)))
    result = lead(members, assignor=CooperativeStickyAssignor(), partitions_per_topic={"t": 4})
    assert any("generation -7" in p for p in result.problems)
    assert result.assignment["b"] == tps("t2 t3")
    assert result.assignment["a"] == tps("t0 t1")


def test_leader_without_the_marker_cannot_tell_stale_claims_kip341() -> None:
    members = (jm("a", sub(owned="t0", generation=2)), jm("b", sub(owned="t0 t1", generation=5)))
    decoded = decode_members(members, assignor=CooperativeStickyAssignor(), generation_marker=False)
    assert {s.generation for s in decoded.subscriptions.values()} == {-1}
    with_marker = lead(members, assignor=CooperativeStickyAssignor(), partitions_per_topic={"t": 2})
    without = lead(
        members, assignor=CooperativeStickyAssignor(), partitions_per_topic={"t": 2}, generation_marker=False
    )
    assert dict(with_marker.assignment) == {"a": (), "b": tps("t0")}
    # without it the two claims on t0 tie and are both void: b is told to give t0 up too
    assert dict(without.assignment) == {"a": (), "b": tps("t1")}


def test_leader_reads_sticky_claims_from_userdata_for_the_eager_sticky_assignor() -> None:
    ud = encode_sticky_userdata(StickyUserData(partitions=tps("t0 t1"), generation=4))
    members = (jm("a", sub(user_data=ud)), jm("b", sub()))
    decoded = decode_members(members, assignor=StickyAssignor(), generation_marker=True)
    assert decoded.subscriptions["a"].owned_partitions == tps("t0 t1")
    assert decoded.subscriptions["a"].generation == 4
    result = lead(members, assignor=StickyAssignor(), partitions_per_topic={"t": 4})
    assert set(tps("t0 t1")) & set(result.assignment["a"])  # sticky keeps some


def _sticky_member(member_id: str, owned: str, generation: int | None) -> JoinGroupMember:
    if generation is None:  # no marker: sticky userdata v0
        ud = encode_sticky_userdata(StickyUserData(partitions=tps(owned)), version=0)
    else:
        ud = encode_sticky_userdata(StickyUserData(partitions=tps(owned), generation=generation))
    return jm(member_id, sub(user_data=ud))


def test_leader_with_the_marker_ignores_a_stale_sticky_claim_kip341() -> None:
    # b was paused and missed generation 3; c got t3 in generation 3 and b still reports it
    members = (
        _sticky_member("a", "t0", 3),
        _sticky_member("b", "t2 t3", 2),
        _sticky_member("c", "t1 t3", 3),
    )
    result = lead(members, assignor=StickyAssignor(), partitions_per_topic={"t": 4})
    flat = [p for parts in result.assignment.values() for p in parts]
    assert sorted(flat) == list(tps("t0 t1 t2 t3"))  # every partition exactly once
    assert set(tps("t3")) <= set(result.assignment["c"])


def test_leader_without_the_marker_trusts_every_sticky_claim_legacy_kafka_7026() -> None:
    # the same group without the marker: the legacy pre-KIP-341 leader keeps t3 with both
    members = (
        _sticky_member("a", "t0", None),
        _sticky_member("b", "t2 t3", None),
        _sticky_member("c", "t1 t3", None),
    )
    result = lead(members, assignor=StickyAssignor(), partitions_per_topic={"t": 4}, generation_marker=False)
    holders = [m for m, parts in result.assignment.items() if tps("t3")[0] in parts]
    assert holders == ["b", "c"]  # the duplicate KIP-341 fixed
    flat = [p for parts in result.assignment.values() for p in parts]
    assert sorted(set(flat)) == list(tps("t0 t1 t2 t3"))
    assert len(flat) == 5  # only the contested partition is duplicated
    # cooperative_sticky without the marker keeps the tie rule: no duplicate
    coop = lead(
        (jm("b", sub(owned="t2 t3")), jm("c", sub(owned="t1 t3"))),
        assignor=CooperativeStickyAssignor(),
        partitions_per_topic={"t": 4},
        generation_marker=False,
    )
    coop_flat = [p for parts in coop.assignment.values() for p in parts]
    assert len(coop_flat) == len(set(coop_flat))


def test_legacy_trust_claims_adds_contested_claims_only() -> None:
    from assignors.partition.types import GroupSubscription, Subscription

    group = GroupSubscription(
        members={
            "a": Subscription(topics=("t",), owned_partitions=tps("t0 t1 t9")),  # t9 does not exist
            "b": Subscription(topics=("t",), owned_partitions=tps("t1 t9")),
            "c": Subscription(topics=("u",), owned_partitions=tps("t1")),  # not subscribed to t
        },
        partitions_per_topic={"t": 3},
    )
    parts = {"a": tps("t0"), "b": tps("t2"), "c": tps("t1")}  # the assignor gave contested t1 to c
    assert legacy_trust_claims(parts, group) == {"a": tps("t0 t1"), "b": tps("t1 t2"), "c": ()}


def test_member_offers_sticky_userdata_with_its_generation() -> None:
    member = ClassicMember(config(assignors=(StickyAssignor(),)))
    stable(member, tps("t0 t1"), generation=7)
    member.enforce_rebalance()
    from tests.membership.classic.helpers import commit_ok

    done = commit_ok(member, member.poll(0))
    from streamtasks.protocol.classic_group import JoinGroupRequest
    from streamtasks.protocol.consumer_protocol import decode_subscription
    from tests.membership.classic.helpers import request

    _, req = request(done, JoinGroupRequest)
    sub_ = decode_subscription(req.protocols[0].metadata)
    assert sub_.owned_partitions == ()  # eager: revoked before joining
    data = decode_sticky_userdata(sub_.user_data or b"")
    assert (data.partitions, data.generation) == (tps("t0 t1"), 7)


def test_member_without_marker_sends_no_generation() -> None:
    member = ClassicMember(config(generation_marker=False))
    stable(member, tps("t0"), generation=7)
    member.enforce_rebalance()
    from streamtasks.protocol.consumer_protocol import decode_subscription

    _, _, req = rejoin(member, 0)
    assert decode_subscription(req.protocols[0].metadata).generation_id == -1


def test_leader_survives_an_undecodable_subscription() -> None:
    member = ClassicMember(config())
    member.handle(MetadataUpdated(partitions_per_topic={"t": 2}), 0)
    rid, req = join(member)
    members = (jm("m1", req.protocols[0].metadata), jm("m2", b"\xff\xff\x00"))
    actions, _, sync = join_ok(member, rid, member_id="m1", leader="m1", members=members)
    assert of(actions, ErrorReported)
    got = assigned(sync.assignments)
    assert got["m2"] == ()
    assert got["m1"] == tps("t0 t1")


def test_leader_reports_topics_without_metadata_and_assigns_the_rest() -> None:
    result = lead(
        (jm("a", sub(topics=("t", "u"))),),
        assignor=CooperativeStickyAssignor(),
        partitions_per_topic={"t": 1},
    )
    assert result.assignment["a"] == tps("t0")
    assert any("u" in p for p in result.problems)


def test_leader_keeps_claims_when_the_assignor_fails() -> None:
    class Broken:
        name = "broken"
        version = 0

        def supported_protocols(self) -> tuple[object, ...]:
            from assignors.partition.types import RebalanceProtocol

            return (RebalanceProtocol.COOPERATIVE,)

        def assign(self, group: object) -> object:
            return "not an assignment"

    result = lead(
        (jm("a", sub(owned="t0", generation=1)), jm("b", sub())),
        assignor=Broken(),
        partitions_per_topic={"t": 2},
    )
    assert result.assignment == {"a": tps("t0"), "b": ()}
    assert result.followup_needed
    assert result.problems


def test_leader_with_mixed_protocol_group_respects_cooperative_claims() -> None:
    # upgrade path: the leader still offers "cooperative_sticky, range" (EAGER), a bounced member
    # only "cooperative_sticky" (COOPERATIVE) and owns t0..t3 -- nothing it owns may move yet
    leader = ClassicMember(config(assignors=(CooperativeStickyAssignor(), RangeAssignor())))
    leader.handle(MetadataUpdated(partitions_per_topic={"t": 4}), 0)
    rid, req = join(leader)
    members = (jm("m1", req.protocols[0].metadata), jm("m2", sub(owned="t0 t1 t2 t3", generation=2)))
    _, _, sync = join_ok(leader, rid, member_id="m1", leader="m1", members=members, generation=3)
    got = assigned(sync.assignments)
    assert got["m1"] == ()
    assert len(got["m2"]) == 2


def test_static_leader_skip_assignment_kip814() -> None:
    member = ClassicMember(config(group_instance_id="i1"))
    member.handle(MetadataUpdated(partitions_per_topic={"t": 2, "u": 3}), 0)
    rid, req = join(member)
    members = (jm("m1", req.protocols[0].metadata, "i1"), jm("m2", sub(topics=("u",)), "i2"))
    _, sid, sync = join_ok(member, rid, member_id="m1", leader="m1", members=members, skip_assignment=True)
    assert sync.assignments == ()  # no assignment computed
    assert member.is_leader
    assert member.group_topics == ("t", "u")  # monitors every member's topics
    sync_ok(member, sid, tps("t0 t1"))  # still collects its own assignment
    assert member.state is MemberState.STABLE
    assert member.owned_partitions == frozenset(tps("t0 t1"))
    assert not member.rejoin_needed
    member.handle(MetadataUpdated(partitions_per_topic={"t": 2, "u": 4}), 5)  # u grew
    assert member.rejoin_needed


def restarted_static_leader(others: tuple[JoinGroupMember, ...], **kw: object) -> tuple[ClassicMember, int]:
    """A static leader's new process rejoining a Stable group: KIP-814 SkipAssignment."""
    member = ClassicMember(config(group_instance_id="i1", **kw))  # type: ignore[arg-type]
    member.handle(MetadataUpdated(partitions_per_topic={"t": 4}), 0)
    rid, req = join(member)
    members = (jm("m1", req.protocols[0].metadata, "i1"), *others)
    _, sid, _ = join_ok(member, rid, member_id="m1", leader="m1", members=members, skip_assignment=True)
    return member, sid


def described(
    rid: int, members: dict[str, str], state: str = "Stable", error: E = E.NONE
) -> ResponseReceived:
    return ResponseReceived(
        request_id=rid,
        response=DescribeGroupResponse(
            error=error,
            group_state=state,
            protocol_type="consumer",
            protocol_name="cooperative-sticky",
            members=tuple(
                DescribedMember(member_id=m, assignment=assignment_bytes(tps(spec)))
                for m, spec in members.items()
            ),
        ),
    )


def joins(actions: list[object]) -> list[JoinGroupRequest]:
    return [a.request for a in of(actions, SendRequest) if isinstance(a.request, JoinGroupRequest)]


def test_restarted_static_leader_starts_the_followup_its_old_process_owed() -> None:
    """Simulator seed 705380203 (cooperative): the old leader process withheld t2 and t3 from
    m2 and crashed while revoking them; its restart (same instance id, the group Stable) gets
    the old assignment with SkipAssignment and no memory of the withholding. Nobody claims t2
    and t3 and they are not its own: it asks the coordinator for every member's assignment,
    and as nobody has them either it rejoins at once."""
    member, sid = restarted_static_leader((jm("m2", sub(), "i2"),))
    actions = sync_ok(member, sid, tps("t0 t1"), now=10)
    assert member.state is MemberState.STABLE
    rid, describe = request(actions, DescribeGroupRequest)
    assert describe.group_id == "g"
    assert member.handle(described(rid, {"m1": "t0 t1", "m2": ""}), 20) == []
    _, _, req = rejoin(member, 20)
    assert req.reason == "leader withheld partitions and no follow-up rebalance started"


def test_restarted_static_leader_needs_no_followup_when_every_partition_is_assigned() -> None:
    """The usual case: t2 and t3 went to m2 fresh in the last generation (m2 joined claiming
    nothing). DescribeGroups shows them assigned: no rebalance (KIP-814's point)."""
    member, sid = restarted_static_leader((jm("m2", sub(), "i2"),))
    rid, _ = request(sync_ok(member, sid, tps("t0 t1"), now=10), DescribeGroupRequest)
    member.handle(described(rid, {"m1": "t0 t1", "m2": "t2 t3"}), 20)
    assert joins(member.poll(10 + 3 * member.config.heartbeat_interval_ms)) == []
    assert member.state is MemberState.STABLE


def test_restarted_static_leader_keeps_the_followup_when_the_describe_cannot_tell() -> None:
    for answer in (
        lambda rid: described(rid, {}, error=E.COORDINATOR_LOAD_IN_PROGRESS),
        lambda rid: described(rid, {"m1": "", "m2": ""}, state="PreparingRebalance"),
        lambda rid: RequestFailed(request_id=rid, error=E.REQUEST_TIMED_OUT),
    ):
        member, sid = restarted_static_leader((jm("m2", sub(), "i2"),))
        rid, _ = request(sync_ok(member, sid, tps("t0 t1"), now=10), DescribeGroupRequest)
        member.handle(answer(rid), 20)
        early = member.poll(10 + member.config.heartbeat_interval_ms - 1)
        assert joins(early) == []
        assert len(joins(member.poll(10 + member.config.heartbeat_interval_ms))) == 1


def test_restarted_static_leader_reports_a_malformed_assignment_and_keeps_the_followup() -> None:
    member, sid = restarted_static_leader((jm("m2", sub(), "i2"),))
    rid, _ = request(sync_ok(member, sid, tps("t0 t1"), now=10), DescribeGroupRequest)
    bad = DescribeGroupResponse(
        error=E.NONE,
        group_state="Stable",
        members=(DescribedMember(member_id="m2", assignment=b"\x00\x03\xff"),),
    )
    actions = member.handle(ResponseReceived(request_id=rid, response=bad), 20)
    assert "malformed assignment" in one(actions, ErrorReported).reason
    assert len(joins(member.poll(10 + member.config.heartbeat_interval_ms))) == 1


def test_restarted_static_leader_rejoins_nothing_when_every_partition_is_claimed() -> None:
    member, sid = restarted_static_leader((jm("m2", sub(owned="t2 t3", generation=1), "i2"),))
    assert not of(sync_ok(member, sid, tps("t0 t1"), now=10), SendRequest)  # nothing to ask
    actions = member.poll(10 + 3 * member.config.heartbeat_interval_ms)
    assert not [a for a in of(actions, SendRequest) if isinstance(a.request, JoinGroupRequest)]
    assert member.state is MemberState.STABLE


def test_restarted_static_eager_leader_never_starts_a_followup() -> None:
    """An EAGER member claims nothing and withholds nothing of its own: no check."""
    member, sid = restarted_static_leader((jm("m2", sub(), "i2"),), assignors=(RangeAssignor(),))
    sync_ok(member, sid, tps("t0 t1"), now=10)
    actions = member.poll(10 + 3 * member.config.heartbeat_interval_ms)
    assert not [a for a in of(actions, SendRequest) if isinstance(a.request, JoinGroupRequest)]


def test_follower_does_not_rejoin_on_partition_count_change() -> None:
    member = ClassicMember(config())
    member.handle(MetadataUpdated(partitions_per_topic={"t": 2}), 0)
    stable(member, tps("t0"))
    member.handle(MetadataUpdated(partitions_per_topic={"t": 3}), 1)
    assert not member.rejoin_needed


def test_leader_rejoins_when_metadata_changed_while_it_was_syncing() -> None:
    member = ClassicMember(config())
    member.handle(MetadataUpdated(partitions_per_topic={"t": 2}), 0)
    rid, req = join(member)
    _, sid, _ = join_ok(
        member, rid, member_id="m1", leader="m1", members=(jm("m1", req.protocols[0].metadata),)
    )
    member.handle(MetadataUpdated(partitions_per_topic={"t": 3}), 1)
    sync_ok(member, sid, tps("t0 t1"), now=2)
    assert member.rejoin_needed


def test_static_leader_learns_unknown_counts_after_skip_assignment_without_rejoining() -> None:
    member = ClassicMember(config(group_instance_id="i1"))  # restarted: no metadata yet
    rid, req = join(member)
    members = (jm("m1", req.protocols[0].metadata, "i1"),)
    _, sid, _ = join_ok(member, rid, member_id="m1", leader="m1", members=members, skip_assignment=True)
    sync_ok(member, sid, tps("t0"))
    member.handle(MetadataUpdated(partitions_per_topic={"t": 2}), 5)  # first sight: learnt
    assert not member.rejoin_needed
    member.handle(MetadataUpdated(partitions_per_topic={"t": 3}), 6)  # a real change
    assert member.rejoin_needed


def test_leader_rejoins_when_a_topic_it_could_not_assign_gets_metadata() -> None:
    member = ClassicMember(config())
    rid, req = join(member)
    _, sid, _ = join_ok(
        member, rid, member_id="m1", leader="m1", members=(jm("m1", req.protocols[0].metadata),)
    )
    sync_ok(member, sid, ())
    member.handle(MetadataUpdated(partitions_per_topic={"t": 2}), 5)
    assert member.rejoin_needed


def withholding_leader(now: int = 0) -> tuple[ClassicMember, int]:
    """A leader (m1) whose assignment withholds t2 and t3 from it: m2 still claims them."""
    member = ClassicMember(config())
    member.handle(MetadataUpdated(partitions_per_topic={"t": 4}), now)
    rid, req = join(member, now)
    members = (jm("m1", req.protocols[0].metadata), jm("m2", sub(owned="t0 t1 t2 t3", generation=3)))
    _, sid, sync = join_ok(member, rid, generation=4, member_id="m1", leader="m1", members=members, now=now)
    assert assigned(sync.assignments)["m1"] == ()  # withheld until m2 revoked them
    return member, sid


def test_stable_to_joining_leader_forces_the_followup_after_a_heartbeat_interval() -> None:
    member, sid = withholding_leader()
    sync_ok(member, sid, (), now=10)
    assert member.state is MemberState.STABLE
    assert not member.rejoin_needed
    interval = member.config.heartbeat_interval_ms
    early = member.poll(10 + interval - 1)
    assert not [a for a in of(early, SendRequest) if isinstance(a.request, JoinGroupRequest)]
    assert member.state is MemberState.STABLE  # a heartbeat went out, no JoinGroup yet
    _, _, req = rejoin(member, 10 + interval)  # no follow-up started by m2: the leader rejoins
    assert member.state is MemberState.JOINING
    assert req.reason == "leader withheld partitions and no follow-up rebalance started"


def test_stable_leader_does_not_force_a_followup_when_a_rebalance_started() -> None:
    member, sid = withholding_leader()
    sync_ok(member, sid, (), now=10)
    member.enforce_rebalance("something else")  # any rejoin is the follow-up
    _, rid, _ = rejoin(member, 20)
    _, sid, _ = join_ok(member, rid, generation=5, member_id="m1", leader="other", now=30)
    sync_ok(member, sid, tps("t2 t3"), now=40)
    actions = member.poll(40 + 2 * member.config.heartbeat_interval_ms)
    assert not [a for a in of(actions, SendRequest) if isinstance(a.request, JoinGroupRequest)]
    assert member.state is MemberState.STABLE


def test_stable_leader_forces_at_most_one_followup_in_a_row() -> None:
    member, sid = withholding_leader()
    sync_ok(member, sid, (), now=10)
    _, rid, req = rejoin(member, 10 + member.config.heartbeat_interval_ms)
    # m2 (say a dead static member) still claims t2 and t3: withheld again
    members = (jm("m1", req.protocols[0].metadata), jm("m2", sub(owned="t0 t1 t2 t3", generation=3)))
    _, sid, _ = join_ok(member, rid, generation=5, member_id="m1", leader="m1", members=members, now=2_000)
    sync_ok(member, sid, (), now=2_010)
    actions = member.poll(2_010 + 2 * member.config.heartbeat_interval_ms)
    assert not [a for a in of(actions, SendRequest) if isinstance(a.request, JoinGroupRequest)]
    assert member.state is MemberState.STABLE
    assert not member.rejoin_needed  # its session timeout decides, no rebalance storm
