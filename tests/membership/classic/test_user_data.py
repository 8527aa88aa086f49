"""Assignment user data: the leader encodes what the assignor returns for each member, and the
member hands the user data of the applied assignment to its driver in AssignmentChanged."""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from assignors.partition.types import (
    GroupAssignment,
    GroupSubscription,
    RebalanceProtocol,
)
from streamtasks.membership.classic import (
    Action,
    AssignmentChanged,
    ClassicMember,
    MemberState,
    ResponseReceived,
)
from streamtasks.membership.classic.leader import lead
from streamtasks.protocol.classic_group import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupMember,
    SyncGroupResponse,
)
from streamtasks.protocol.consumer_protocol import (
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
    decode_assignment,
    encode_assignment,
    encode_subscription,
)
from streamtasks.protocol.errors import KafkaErrorCode
from tests.membership.classic.helpers import (
    commit_ok,
    cooperative,
    eager,
    join,
    join_ok,
    kinds,
    of,
    one,
    rejoin,
    request,
    tps,
)
from topology.ids import TopicPartition


def sync_with(
    member: ClassicMember,
    rid: int,
    partitions: Iterable[TopicPartition],
    user_data: bytes | None,
    now: int = 0,
) -> list[Action]:
    data = encode_assignment(
        ConsumerProtocolAssignment(assigned_partitions=tuple(partitions), user_data=user_data)
    )
    response = SyncGroupResponse(
        error=KafkaErrorCode.NONE,
        protocol_type="consumer",
        protocol_name=member.protocol_name,
        assignment=data,
    )
    return list(member.handle(ResponseReceived(request_id=rid, response=response), now))


def stable_with(member: ClassicMember, partitions: str, user_data: bytes, generation: int = 1) -> None:
    rid, _ = join(member)
    _, sid, _ = join_ok(member, rid, generation=generation)
    sync_with(member, sid, tps(partitions), user_data)


def test_synced_assignment_user_data_is_in_assignment_changed() -> None:
    member = cooperative()
    rid, _ = join(member)
    _, sid, _ = join_ok(member, rid, generation=2)
    actions = sync_with(member, sid, tps("t0"), b"tasks of gen 2")
    change = one(actions, AssignmentChanged)
    assert (change.owned, change.user_data) == (tps("t0"), b"tasks of gen 2")
    assert member.assignment_user_data == b"tasks of gen 2"


def test_an_assignment_without_user_data_gives_empty_bytes() -> None:
    member = cooperative()
    rid, _ = join(member)
    _, sid, _ = join_ok(member, rid)
    assert one(sync_with(member, sid, tps("t0"), None), AssignmentChanged).user_data == b""
    assert member.assignment_user_data == b""


def test_generation_only_change_carries_the_new_user_data() -> None:
    member = cooperative()
    stable_with(member, "t0 t1", b"old")
    member.enforce_rebalance("test")
    _, rid, _ = rejoin(member, 1)
    _, sid, _ = join_ok(member, rid, generation=2, now=2)
    change = one(sync_with(member, sid, tps("t0 t1"), b"new", now=3), AssignmentChanged)
    assert (change.generation, change.added, change.removed) == (2, (), ())
    assert change.user_data == b"new"


def test_revoke_gate_applies_the_user_data_of_the_sync_that_started_it() -> None:
    member = cooperative()
    stable_with(member, "t0 t1", b"old")
    member.enforce_rebalance("test")
    _, rid, _ = rejoin(member, 1)
    _, sid, _ = join_ok(member, rid, generation=2, now=2)
    actions = sync_with(member, sid, tps("t1"), b"after revoking t0", now=3)
    assert member.state is MemberState.REVOKING
    assert of(actions, AssignmentChanged) == []
    assert member.assignment_user_data == b"old"  # not applied before the commit
    done = commit_ok(member, actions, now=4)
    change = one(done, AssignmentChanged)
    assert (change.owned, change.removed, change.user_data) == (tps("t1"), tps("t0"), b"after revoking t0")


def test_revocation_before_rejoining_keeps_the_current_user_data() -> None:
    member = eager()
    stable_with(member, "t0", b"current")
    member.enforce_rebalance("test")
    done = commit_ok(member, member.poll(1), now=2)
    assert kinds(done)[:2] == ["REVOKED", "AssignmentChanged"]
    change = one(done, AssignmentChanged)
    assert (change.owned, change.user_data) == ((), b"current")


def test_lost_partitions_leave_no_user_data() -> None:
    member = cooperative()
    stable_with(member, "t0", b"current")
    rid, _ = request(member.poll(1_000), HeartbeatRequest)
    response = HeartbeatResponse(error=KafkaErrorCode.UNKNOWN_MEMBER_ID)
    actions = member.handle(ResponseReceived(request_id=rid, response=response), 1_001)
    change = one(actions, AssignmentChanged)
    assert (change.owned, change.user_data) == ((), b"")
    assert member.assignment_user_data == b""


# -- the leader ------------------------------------------------------------------------------------


class _Labelling:
    """Gives every partition to the first member and labels every other member but one."""

    name: ClassVar[str] = "labelling"
    version: ClassVar[int] = 0

    def supported_protocols(self) -> tuple[RebalanceProtocol, ...]:
        return (RebalanceProtocol.COOPERATIVE,)

    def assign(self, group: GroupSubscription) -> GroupAssignment:
        first, *rest = sorted(group.members)
        parts = tuple(TopicPartition("t", p) for p in range(group.partitions_per_topic["t"]))
        return GroupAssignment(
            members={first: parts, **{m: () for m in rest}},
            user_data={m: f"for {m}".encode() for m in (first, *rest[:-1])},
        )


def _jm(member_id: str) -> JoinGroupMember:
    sub = encode_subscription(ConsumerProtocolSubscription(topics=("t",), user_data=None))
    return JoinGroupMember(member_id=member_id, group_instance_id=None, metadata=sub)


def test_leader_encodes_each_members_user_data_and_none_where_the_assignor_gave_none() -> None:
    result = lead([_jm("a"), _jm("b"), _jm("c")], assignor=_Labelling(), partitions_per_topic={"t": 2})
    decoded = {a.member_id: decode_assignment(a.assignment) for a in result.assignments}
    assert {m: d.user_data for m, d in decoded.items()} == {"a": b"for a", "b": b"for b", "c": None}
    assert decoded["a"].assigned_partitions == tps("t0 t1")
