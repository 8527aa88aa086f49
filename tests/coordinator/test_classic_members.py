"""Classic-protocol members of a consumer group: JoinGroup / SyncGroup / Heartbeat / LeaveGroup
translated as Apache Kafka's coordinator does for a mixed group, with joins parked until the
member can be given its next epoch. Every flow checks, after every request, that no partition
is owned by two clients (what each client believes it owns)."""

from __future__ import annotations

from dataclasses import replace

from streamtasks.coordinator import CoordinatorConfig, TimerKey, TimerKind
from streamtasks.coordinator.classic import LeaveGroupMember, LeaveGroupsRequest
from streamtasks.protocol.classic_group import (
    HeartbeatRequest,
    ProtocolMetadata,
    SyncGroupRequest,
)
from streamtasks.protocol.consumer_group import ClientAssignor, ConsumerGroupHeartbeatRequest
from streamtasks.protocol.consumer_protocol import decode_assignment
from streamtasks.protocol.errors import KafkaErrorCode
from tests.coordinator.classic_support import ClassicHarness
from tests.coordinator.support import GROUP, assert_exclusive, image, tps

ALL_FOO = [("foo", 0), ("foo", 1), ("foo", 2)]


def test_member_id_required_then_join_sync_heartbeat() -> None:
    h = ClassicHarness()
    a = h.add("a")
    first = h.apply(h.coordinator.join_group(h.join_request(a), 0, new_member_id="a-given", api_version=9))
    assert first is not None
    assert first.error is KafkaErrorCode.MEMBER_ID_REQUIRED
    assert first.member_id == "a-given"
    assert h.group is None  # nothing written for it
    h.cjoin("a")
    assert h.owned_by("a") == ALL_FOO
    member = h.group.member(a.member_id)
    assert member.classic is not None
    assert member.classic.session_timeout_ms == 10_000
    assert member.classic.protocol_name == "cooperative-sticky"
    assert member.subscribed_topic_names == ("foo",)
    assert h.group.current(a.member_id).member_epoch == a.generation == h.group.group_epoch
    assert h.chb("a").error is KafkaErrorCode.NONE


def test_old_join_version_gets_a_member_id_at_once() -> None:
    h = ClassicHarness()
    a = h.add("a")
    response = h.apply(h.coordinator.join_group(h.join_request(a), 0, new_member_id="m-3", api_version=3))
    assert response is not None
    assert response.error is KafkaErrorCode.NONE
    assert response.member_id == "m-3"
    assert response.protocol_type == "consumer"
    assert response.protocol_name == "cooperative-sticky"
    assert response.leader == ""  # nobody computes an assignment: the coordinator does
    assert response.members == ()


def _two_members_share(*, cooperative: bool) -> ClassicHarness:
    h = ClassicHarness()
    h.add("a", cooperative=cooperative)
    h.add("b", cooperative=cooperative)
    h.cjoin("a")
    assert h.owned_by("a") == ALL_FOO
    assert h.cjoin("b") is None  # its partitions are a's: parked
    assert h.classic["b"].parked
    h.check_owners()
    h.settle_all()
    return h


def test_cooperative_members_share_without_double_ownership() -> None:
    h = _two_members_share(cooperative=True)
    owned_a, owned_b = h.owned_by("a"), h.owned_by("b")
    assert sorted(owned_a + owned_b) == ALL_FOO
    assert owned_a
    assert owned_b
    assert h.group.state.value == "Stable"
    # a kept what it was not asked to give up: cooperative, it never revoked everything
    assert all(p in ALL_FOO for p in owned_a)
    # MEMBER_ID_REQUIRED, first join, rejoin to learn the revocation, rejoin after it
    assert h.classic["a"].joins == 4


def test_eager_members_share_without_double_ownership() -> None:
    h = _two_members_share(cooperative=False)
    assert sorted(h.owned_by("a") + h.owned_by("b")) == ALL_FOO
    assert h.owned_by("b")
    assert h.group.state.value == "Stable"
    assert h.classic["a"].joins == 3  # MEMBER_ID_REQUIRED, first join; eager: revoked all, rejoined once


def test_parked_join_is_answered_in_the_write_that_frees_its_partitions() -> None:
    h = ClassicHarness()
    h.add("a")
    h.add("b")
    h.cjoin("a")
    h.cjoin("b")
    assert h.chb("a").error is KafkaErrorCode.REBALANCE_IN_PROGRESS
    h.cjoin("a")  # learns the revocation, revokes (SyncGroup), must rejoin
    assert h.classic["b"].parked
    before = len(h.classic["b"].history)
    h.cjoin("a")  # the rejoin that releases: b's join is answered in this write
    assert not h.classic["b"].parked
    assert len(h.classic["b"].history) == before + 2  # its JoinGroup and SyncGroup answers
    assert h.owned_by("b")
    h.check_owners()


def test_mixed_group_partition_moves_to_a_kip848_member_and_back() -> None:
    h = ClassicHarness()
    h.add("a")
    h.cjoin("a")
    h.join("m1")
    h.settle_all()
    assert h.owned_by("a")
    assert h.members["m1"].owned
    assert len(h.owned_by("a")) + len(h.members["m1"].owned) == 3
    moved = tps(foo=[]).union(h.members["m1"].owned)
    h.heartbeat("m1", member_epoch=-1)  # the KIP-848 member leaves
    del h.members["m1"]
    h.settle_all()
    assert h.owned_by("a") == ALL_FOO  # what moved came back
    assert moved
    assert h.group.state.value == "Stable"


def test_classic_member_leaves_to_a_kip848_member() -> None:
    h = ClassicHarness()
    h.add("a", cooperative=False)
    h.cjoin("a")
    h.join("m1")
    h.settle_all()
    h.cleave("a")
    h.settle_all()
    assert h.members["m1"].owned == tps(foo=[0, 1, 2])


def test_group_of_classic_members_only_stays_a_consumer_group() -> None:
    h = ClassicHarness()
    h.add("a")
    h.join("m1")
    h.cjoin("a")
    h.settle_all()
    h.heartbeat("m1", member_epoch=-1)
    del h.members["m1"]
    h.settle_all()
    assert h.coordinator.group(GROUP) is not None
    assert h.owned_by("a") == ALL_FOO


def test_kip848_client_side_assignment_is_off_while_a_classic_member_is_in() -> None:
    client = (ClientAssignor(name="st", minimum_version=0, maximum_version=1, metadata_version=0),)
    h = ClassicHarness()
    h.join("m1", client_assignors=client)
    assert h.group.client_request is not None
    h.add("a")
    h.cjoin("a")  # the server-side assignor computes the target at once
    assert h.group.client_request is None
    assert h.group.assignment_epoch == h.group.group_epoch
    h.settle_all()
    assert sorted(h.owned_by("a")) != []
    assert h.group.state.value == "Stable"


def test_join_parked_until_the_target_is_computed() -> None:
    """With batching, a join bumps the epoch but the target waits for the interval: the join is
    parked until it is computed (and the member can have its partitions)."""
    h = ClassicHarness(config=CoordinatorConfig(assignment_interval_ms=1_000))
    h.add("a")
    h.add("b")
    h.cjoin("a")
    assert h.cjoin("b") is None
    assert h.group.group_epoch > h.group.assignment_epoch
    h.advance(1_000)  # the interval ends: the target is computed
    assert h.group.group_epoch == h.group.assignment_epoch
    h.settle_all()
    assert sorted(h.owned_by("a") + h.owned_by("b")) == ALL_FOO
    assert h.owned_by("b")


def test_parked_join_answered_at_its_rebalance_timeout() -> None:
    h = ClassicHarness()
    h.join("m1")
    h.settle()
    assert h.members["m1"].owned == tps(foo=[0, 1, 2])
    h.add("b")
    h.cjoin("b", rebalance_timeout_ms=20_000)
    assert h.classic["b"].parked
    # m1 heartbeats but never acknowledges a revocation (it keeps reporting all three)
    for _ in range(3):
        h.advance(5_000)
        h.heartbeat("m1", topic_partitions=tps(foo=[0, 1, 2]).to_wire())
        h.check_owners()
    h.advance(5_000)  # 20 s: b's join is answered with what b may have now: nothing of m1's
    assert not h.classic["b"].parked
    assert h.owned_by("b") == []
    h.check_owners()


def test_static_classic_member_restarts_and_keeps_its_partitions() -> None:
    h = ClassicHarness()
    h.add("s", instance_id="i-s")
    h.add("b")
    h.cjoin("s")
    h.cjoin("b")
    h.settle_all()
    old_id = h.classic["s"].member_id
    kept = h.owned_by("s")
    assert kept
    epoch = h.group.group_epoch
    # the process restarts: a new member id, nothing owned, the same instance id
    s = h.classic["s"]
    s.member_id, s.owned, s.generation = "", frozenset(), -1
    h.cjoin("s")
    assert s.member_id != old_id
    assert h.group.member(old_id) is None
    assert h.group.static_member("i-s") == s.member_id
    assert h.owned_by("s") == kept
    assert h.group.group_epoch == epoch  # nothing moved
    # the old instance is fenced
    stale = h.apply(
        h.coordinator.classic_heartbeat(
            HeartbeatRequest(group_id=GROUP, generation_id=epoch, member_id=old_id, group_instance_id="i-s"),
            h.now,
        )
    )
    assert stale.error is KafkaErrorCode.FENCED_INSTANCE_ID


def test_static_classic_member_replaced_by_a_kip848_member() -> None:
    """Online migration of a static member: the consumer-protocol member with the same
    instance id replaces the classic one at once (no epoch -2 leave needed)."""
    h = ClassicHarness()
    h.add("s", instance_id="i-s")
    h.cjoin("s")
    old_id = h.classic["s"].member_id
    generation = h.classic["s"].generation
    del h.classic["s"]  # the process stops without leaving (static)
    response = h.join("m-s", instance_id="i-s")
    assert response.error == 0
    assert response.member_epoch == generation  # it takes the classic member's place and epoch
    assert h.group.member(old_id) is None
    assert h.group.member("m-s").classic is None
    h.settle()
    assert h.members["m-s"].owned == tps(foo=[0, 1, 2])


def test_malformed_subscription_is_an_error_code() -> None:
    h = ClassicHarness()
    a = h.add("a", member_id="known")
    for metadata in (b"", b"\x00", b"\x00\x03\x00\x00\x00\x05", b"\xff\xff"):
        request = h.join_request(a, protocols=(ProtocolMetadata(name="range", metadata=metadata),))
        result = h.coordinator.join_group(request, 0, new_member_id="x", api_version=9)
        assert result.response is not None
        assert result.response.error is KafkaErrorCode.INCONSISTENT_GROUP_PROTOCOL
        assert result.records == ()


def test_protocol_and_session_checks() -> None:
    h = ClassicHarness()
    a = h.add("a", member_id="a1")
    b = h.add("b", member_id="b1", cooperative=False)

    def error(request: object) -> KafkaErrorCode:
        result = h.apply(h.coordinator.join_group(request, h.now, new_member_id="n", api_version=9))  # type: ignore[arg-type]
        assert result is not None
        return result.error

    assert (
        error(replace(h.join_request(a), protocol_type="connect"))
        is KafkaErrorCode.INCONSISTENT_GROUP_PROTOCOL
    )
    assert error(replace(h.join_request(a), protocols=())) is KafkaErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert (
        error(replace(h.join_request(a), session_timeout_ms=1_000)) is KafkaErrorCode.INVALID_SESSION_TIMEOUT
    )
    assert error(replace(h.join_request(a), group_id="")) is KafkaErrorCode.INVALID_GROUP_ID
    h.cjoin("a")
    # b offers only "range", which a (the only classic member) does not: refused
    assert error(h.join_request(b)) is KafkaErrorCode.INCONSISTENT_GROUP_PROTOCOL
    both = (
        ProtocolMetadata(name="range", metadata=h.subscription(b)),
        ProtocolMetadata(name="cooperative-sticky", metadata=h.subscription(b)),
    )
    # offering one protocol a offers too, b is accepted (parked: a owns everything)
    accepted = h.apply(
        h.coordinator.join_group(replace(h.join_request(b), protocols=both), h.now, new_member_id="n")
    )
    assert accepted is None
    assert h.group.member("b1").classic.protocol_name == "range"  # its first is what it uses


def test_heartbeat_and_sync_errors() -> None:
    h = ClassicHarness()
    a = h.add("a")
    h.cjoin("a")
    h.join("m1")
    h.settle_all()

    def hb(**changes: object) -> KafkaErrorCode:
        request = HeartbeatRequest(
            group_id=GROUP, generation_id=a.generation, member_id=a.member_id, group_instance_id=None
        )
        return h.apply(h.coordinator.classic_heartbeat(replace(request, **changes), h.now)).error  # type: ignore[arg-type]

    assert hb() is KafkaErrorCode.NONE
    assert hb(generation_id=a.generation - 1) is KafkaErrorCode.ILLEGAL_GENERATION
    assert hb(member_id="nobody") is KafkaErrorCode.UNKNOWN_MEMBER_ID
    assert hb(member_id="m1", generation_id=h.members["m1"].epoch) is KafkaErrorCode.UNKNOWN_MEMBER_ID
    assert hb(group_id="other") is KafkaErrorCode.UNKNOWN_MEMBER_ID
    assert hb(group_instance_id="i-none") is KafkaErrorCode.UNKNOWN_MEMBER_ID
    # a classic member id is unknown to ConsumerGroupHeartbeat
    kip848 = h.apply(
        h.coordinator.heartbeat(
            ConsumerGroupHeartbeatRequest(group_id=GROUP, member_id=a.member_id, member_epoch=a.generation),
            h.now,
        )
    )
    assert kip848.error == KafkaErrorCode.UNKNOWN_MEMBER_ID

    sync = SyncGroupRequest(
        group_id=GROUP,
        generation_id=a.generation,
        member_id=a.member_id,
        group_instance_id=None,
        protocol_type="consumer",
        protocol_name="cooperative-sticky",
    )

    def sy(**changes: object) -> KafkaErrorCode:
        return h.apply(h.coordinator.sync_group(replace(sync, **changes), h.now)).error  # type: ignore[arg-type]

    assert sy() is KafkaErrorCode.NONE
    assert sy(generation_id=99) is KafkaErrorCode.ILLEGAL_GENERATION
    assert sy(protocol_name="range") is KafkaErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert sy(protocol_type="connect") is KafkaErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert sy(member_id="nobody") is KafkaErrorCode.UNKNOWN_MEMBER_ID
    h.join("m2")  # the group moves on: a must rejoin
    assert sy() is KafkaErrorCode.REBALANCE_IN_PROGRESS
    assert hb() is KafkaErrorCode.REBALANCE_IN_PROGRESS


def test_sync_group_assignment_bytes() -> None:
    h = ClassicHarness({"foo": 2, "bar": 1})
    a = h.add("a", topics=("foo", "bar"))
    h.cjoin("a")
    sync = h.csync("a")
    decoded = decode_assignment(sync.assignment)
    assert decoded.version == 3
    assert decoded.user_data == b""
    assert sorted(decoded.assigned_partitions) == sorted(a.owned)
    assert len(a.owned) == 3


def test_session_expiry_removes_a_silent_classic_member() -> None:
    h = ClassicHarness()
    h.add("a")
    h.add("b")
    h.cjoin("a")
    h.cjoin("b")
    h.settle_all()
    gone = h.classic["a"].member_id
    for _ in range(3):  # b heartbeats, a is silent; a's session is 10 s
        h.advance(4_000)
        h.step("b")
    assert h.group.member(gone) is None
    del h.classic["a"]
    h.settle_all()
    assert h.owned_by("b") == ALL_FOO


def test_member_told_to_rejoin_that_never_does_is_removed() -> None:
    h = ClassicHarness()
    h.add("a")
    h.cjoin("a")
    h.join("m1")
    a = h.classic["a"]
    for _ in range(7):  # heartbeats (REBALANCE_IN_PROGRESS every time) but never rejoins
        h.advance(5_000)
        h.apply(
            h.coordinator.classic_heartbeat(
                HeartbeatRequest(
                    group_id=GROUP, generation_id=a.generation, member_id=a.member_id, group_instance_id=None
                ),
                h.now,
            )
        )
        h.heartbeat("m1")
    assert h.group.member(a.member_id) is None  # the join timer (30 s) fenced it
    del h.classic["a"]
    h.settle()
    assert h.members["m1"].owned == tps(foo=[0, 1, 2])


def test_member_that_never_syncs_is_removed() -> None:
    h = ClassicHarness()
    a = h.add("a", member_id="a1")
    response = h.apply(h.coordinator.join_group(h.join_request(a), 0, new_member_id="n", api_version=9))
    assert response is not None
    assert response.error is KafkaErrorCode.NONE
    assert h.coordinator.timer_deadline(TimerKey(TimerKind.SYNC, GROUP, "a1")) == 30_000
    h.advance(30_000)
    assert h.group.member("a1") is None


def test_leave_group_batch_and_static() -> None:
    h = ClassicHarness()
    h.add("a")
    h.add("s", instance_id="i-s")
    h.add("t", instance_id="i-t")
    for name in ("a", "s", "t"):
        h.cjoin(name)
    h.join("m1")
    h.settle_all()
    epoch = h.group.group_epoch
    request = LeaveGroupsRequest(
        group_id=GROUP,
        members=(
            LeaveGroupMember(member_id=h.classic["a"].member_id),
            LeaveGroupMember(member_id="", instance_id="i-s"),  # administrative removal
            LeaveGroupMember(member_id="wrong", instance_id="i-t"),
            LeaveGroupMember(member_id="m1"),  # a consumer-protocol member: not by LeaveGroup
            LeaveGroupMember(member_id="nobody"),
        ),
    )
    response = h.apply(h.coordinator.leave_group(request, h.now))
    assert response.error is KafkaErrorCode.NONE
    assert [m.error for m in response.members] == [
        KafkaErrorCode.NONE,
        KafkaErrorCode.NONE,
        KafkaErrorCode.FENCED_INSTANCE_ID,
        KafkaErrorCode.UNKNOWN_MEMBER_ID,
        KafkaErrorCode.UNKNOWN_MEMBER_ID,
    ]
    assert response.members[1].member_id == h.classic["s"].member_id
    assert h.group.group_epoch == epoch + 1
    assert sorted(h.group.members) == sorted(["m1", h.classic["t"].member_id])
    missing = h.apply(h.coordinator.leave_group(replace(request, group_id="none"), h.now))
    assert missing.error is KafkaErrorCode.UNKNOWN_MEMBER_ID


def test_leave_answers_a_parked_join_unknown_member() -> None:
    h = ClassicHarness()
    h.add("a")
    h.add("b", instance_id="i-b")
    h.cjoin("a")
    assert h.cjoin("b") is None
    b = h.classic["b"]
    result = h.coordinator.leave_group(
        LeaveGroupsRequest(group_id=GROUP, members=(LeaveGroupMember(member_id="", instance_id="i-b"),)),
        h.now,
    )
    answers = [op for op in result.joins if getattr(op, "member_id", None) == b.member_id]
    assert len(answers) == 1
    assert answers[0].response.error is KafkaErrorCode.UNKNOWN_MEMBER_ID  # type: ignore[union-attr]
    h.apply(result)
    assert h.coordinator.parked_joins(GROUP) == {}


def test_writes_do_not_mutate_until_applied() -> None:
    h = ClassicHarness()
    h.add("a")
    h.add("b")
    h.cjoin("a")
    before = h.coordinator.snapshot()
    b = h.classic["b"]
    b.member_id = "b1"
    result = h.coordinator.join_group(h.join_request(b), h.now, new_member_id="x", api_version=9)
    assert result.response is None
    assert h.coordinator.snapshot() == before
    assert h.coordinator.parked_joins(GROUP) == {}
    h.apply(result)
    assert set(h.coordinator.parked_joins(GROUP)) == {"b1"}
    assert_exclusive(h.coordinator)


def test_parked_join_reconciled_by_a_metadata_change() -> None:
    """The topic grows: the metadata write reconciles the parked member with the new target
    (it may take the new partitions nobody owns; it still waits for the one a owns)."""
    h = ClassicHarness()
    h.add("a")
    h.add("b")
    h.cjoin("a")
    assert h.cjoin("b") is None
    b = h.classic["b"]
    h.apply(h.coordinator.on_metadata_image(image({"foo": 6}), h.now))
    current = h.group.current(b.member_id)
    assert current.member_epoch == h.group.group_epoch == 3
    assert current.assigned == tps(foo=[4, 5])  # 3 is a's new target, 2 is still a's
    assert b.parked
    h.settle_all()
    assert h.owned_by("b") == [("foo", 2), ("foo", 4), ("foo", 5)]
    assert h.owned_by("a") == [("foo", 0), ("foo", 1), ("foo", 3)]
