"""A member whose session lapsed asks the coordinator with a Heartbeat under its generation
before rejoining (:mod:`streamtasks.membership.classic.readopt`): NONE takes the generation's
assignment back without a rebalance, REBALANCE_IN_PROGRESS / UNKNOWN_MEMBER_ID /
ILLEGAL_GENERATION rejoin (partitions lost), coordinator errors ask the next coordinator."""

from __future__ import annotations

import pytest

from streamtasks.membership.classic import (
    Action,
    AssignmentChanged,
    ClassicMember,
    CoordinatorDiscovered,
    CoordinatorLost,
    FindCoordinator,
    MemberState,
    RequestFailed,
    ResponseReceived,
    SendRequest,
    Subscribe,
)
from streamtasks.membership.classic.readopt import lapsed
from streamtasks.membership.classic.records import Membership, Ownership
from streamtasks.protocol.classic_group import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    SyncGroupResponse,
)
from streamtasks.protocol.consumer_protocol import (
    ConsumerProtocolAssignment,
    decode_subscription,
    encode_assignment,
)
from streamtasks.protocol.errors import KafkaErrorCode as E
from tests.membership.classic.helpers import (
    cooperative,
    eager,
    join,
    join_ok,
    listeners,
    of,
    one,
    request,
    stable,
    tps,
)


def lapse(member: ClassicMember) -> int:
    """A stable member's coordinator dies; the next is found but never answers, until the
    session rule gives the partitions up (at 13,050: the last answer + the 10 s session)."""
    rid, _ = request(member.poll(3_000), HeartbeatRequest)
    member.handle(ResponseReceived(request_id=rid, response=HeartbeatResponse(error=E.NONE)), 3_050)
    member.handle(CoordinatorLost(reason="connection closed"), 4_000)
    now, lost = 4_000, False
    while not lost:
        now += 100
        assert now <= 20_000
        actions = member.poll(now)
        lost = any(kind == "LOST" for kind, _ in listeners(actions))
        for action in actions:
            if isinstance(action, FindCoordinator):
                member.handle(CoordinatorDiscovered(request_id=action.request_id), now)
            elif isinstance(action, SendRequest) and isinstance(action.request, HeartbeatRequest):
                member.handle(RequestFailed(request_id=action.request_id), now + 50)
    assert member.owned_partitions == frozenset()
    return now


def found(member: ClassicMember, now: int) -> list[Action]:
    """The coordinator is looked up and found; what the member sends then."""
    find = one(member.poll(now), FindCoordinator)
    assert member.handle(CoordinatorDiscovered(request_id=find.request_id), now) == []
    return member.poll(now)


def answered(member: ClassicMember, rid: int, error: E, now: int) -> list[Action]:
    return member.handle(ResponseReceived(request_id=rid, response=HeartbeatResponse(error=error)), now)


@pytest.mark.parametrize("make", [cooperative, eager])
def test_answered_none_the_lapsed_assignment_is_taken_back_without_a_rebalance(make: object) -> None:
    member = make()  # type: ignore[operator]
    stable(member, tps("t0 t1"))
    member_id, now = member.member_id, lapse(member)
    rid, probe = request(member.poll(now + 500), HeartbeatRequest)
    assert (probe.member_id, probe.generation_id) == (member_id, 1)
    assert member.state is MemberState.UNJOINED
    actions = answered(member, rid, E.NONE, now + 600)
    assert not [a for a in actions if isinstance(a, SendRequest)]  # no JoinGroup: no rebalance
    assert listeners(actions) == [("ASSIGNED", tps("t0 t1"))]
    change = one(actions, AssignmentChanged)
    assert (change.owned, change.added, change.generation) == (tps("t0 t1"), tps("t0 t1"), 1)
    assert (member.state, member.generation, member.member_id) == (MemberState.STABLE, 1, member_id)
    assert member.owned_partitions == frozenset(tps("t0 t1"))
    metrics = member.metrics(now + 600)
    assert metrics["lapsed-assignments-taken-back-total"] == 1.0
    assert metrics["rebalance-total"] == 1.0  # the first join's only
    # and it heartbeats on under that generation
    _, beat = request(member.poll(now + 600 + 3_000), HeartbeatRequest)
    assert beat.generation_id == 1


def test_a_rebalance_in_progress_rejoins_owning_nothing() -> None:
    member = cooperative()
    stable(member, tps("t0 t1"))
    member_id, now = member.member_id, lapse(member)
    rid, _ = request(member.poll(now + 500), HeartbeatRequest)
    actions = answered(member, rid, E.REBALANCE_IN_PROGRESS, now + 600)
    _, join = request(actions, JoinGroupRequest)
    assert join.member_id == member_id
    assert decode_subscription(join.protocols[0].metadata).owned_partitions == ()
    assert member.state is MemberState.JOINING
    assert member.owned_partitions == frozenset()
    assert member.metrics(now + 600)["lapsed-assignments-taken-back-total"] == 0.0


@pytest.mark.parametrize(("error", "keeps_id"), [(E.UNKNOWN_MEMBER_ID, False), (E.ILLEGAL_GENERATION, True)])
def test_a_member_the_coordinator_fenced_resets_and_joins(error: E, keeps_id: bool) -> None:
    member = cooperative()
    stable(member, tps("t0"))
    member_id, now = member.member_id, lapse(member)
    rid, _ = request(member.poll(now + 500), HeartbeatRequest)
    _, join = request(answered(member, rid, error, now + 600), JoinGroupRequest)
    assert join.member_id == (member_id if keeps_id else "")
    assert member.generation == -1
    assert member.owned_partitions == frozenset()


def test_a_fenced_static_instance_fails() -> None:
    member = cooperative(group_instance_id="i1")
    stable(member, tps("t0"))
    now = lapse(member)
    rid, probe = request(member.poll(now + 500), HeartbeatRequest)
    assert probe.group_instance_id == "i1"
    answered(member, rid, E.FENCED_INSTANCE_ID, now + 600)
    assert member.state is MemberState.FAILED


@pytest.mark.parametrize("error", [E.NOT_COORDINATOR, E.COORDINATOR_NOT_AVAILABLE])
def test_a_coordinator_error_asks_the_next_coordinator(error: E) -> None:
    member = cooperative()
    stable(member, tps("t0"))
    now = lapse(member)
    rid, _ = request(member.poll(now + 500), HeartbeatRequest)
    assert not [a for a in answered(member, rid, error, now + 600) if isinstance(a, SendRequest)]
    assert not member.coordinator_known
    rid, probe = request(found(member, now + 700), HeartbeatRequest)
    assert probe.generation_id == 1
    answered(member, rid, E.NONE, now + 800)
    assert member.owned_partitions == frozenset(tps("t0"))


def test_a_failed_probe_is_asked_again_and_the_member_does_not_spin_while_it_waits() -> None:
    member = cooperative()
    stable(member, tps("t0"))
    now = lapse(member)
    rid, _ = request(member.poll(now + 500), HeartbeatRequest)
    deadline = member.next_deadline_ms()
    assert deadline is not None
    assert deadline > now + 500  # the probe in flight: nothing due now
    assert member.poll(now + 501) == []
    member.handle(RequestFailed(request_id=rid), now + 600)
    request(found(member, now + 700), HeartbeatRequest)


def test_a_subscription_change_while_lapsed_joins_without_asking() -> None:
    member = cooperative()
    stable(member, tps("t0"))
    now = lapse(member)
    member.handle(Subscribe(topics=("t", "u")), now + 100)
    request(member.poll(now + 500), JoinGroupRequest)


def test_only_a_stable_member_owning_its_generation_s_assignment_takes_it_back() -> None:
    m = Membership(member_id="m1", generation=3)
    owns = Ownership(owned=frozenset(tps("t0")), owned_generation=3, user_data=b"x")
    kept = lapsed(MemberState.STABLE, m, owns)
    assert kept is not None
    assert (kept.assignment, kept.user_data) == (frozenset(tps("t0")), b"x")
    for state in (MemberState.PREPARING, MemberState.REVOKING, MemberState.LEAVING, MemberState.SYNCING):
        assert lapsed(state, m, owns) is None
    assert lapsed(MemberState.STABLE, m, Ownership(owned=frozenset(tps("t0")), owned_generation=2)) is None
    assert lapsed(MemberState.STABLE, Membership(generation=3), owns) is None


def test_the_assignment_s_user_data_comes_back_with_it() -> None:
    """The App reads its tasks from the assignment's user data: the loss drops it, the
    assignment taken back carries it again."""
    member = cooperative()
    rid, _ = join(member)
    _, sid, _ = join_ok(member, rid)
    data = encode_assignment(ConsumerProtocolAssignment(assigned_partitions=tps("t0"), user_data=b"tasks"))
    response = SyncGroupResponse(
        error=E.NONE, protocol_type="consumer", protocol_name=member.protocol_name, assignment=data
    )
    member.handle(ResponseReceived(request_id=sid, response=response), 0)
    assert member.assignment_user_data == b"tasks"
    now = lapse(member)
    assert member.assignment_user_data == b""
    rid, _ = request(member.poll(now + 500), HeartbeatRequest)
    change = one(answered(member, rid, E.NONE, now + 600), AssignmentChanged)
    assert (change.owned, change.user_data) == (tps("t0"), b"tasks")


def test_a_silent_coordinator_is_looked_up_again_with_its_connection_dropped() -> None:
    """A hung coordinator answers no heartbeat: when the session rule gives the partitions up,
    the lookup that follows says the coordinator fell silent (``FindCoordinator.silent``: the
    driver drops its connection, failing the application's commit waiting there, and asks the
    other bootstrap servers first), so the lapsed member's question goes to the coordinator
    found next, not to the hung one. A lookup after an answer that says the coordinator moved
    is an ordinary one (the request timeout outlasts the session, as in the drills)."""
    member = cooperative(request_timeout_ms=30_000)
    stable(member, tps("t0 t1"))
    now, finds = 0, list[FindCoordinator]()
    while not finds:
        now += 100
        assert now <= 30_000
        actions = member.poll(now)  # its heartbeats are sent and never answered
        finds = of(actions, FindCoordinator)
    assert member.owned_partitions == frozenset()  # the lapse came first
    assert [f.silent for f in finds] == [True]
    member.handle(CoordinatorDiscovered(request_id=finds[0].request_id), now)
    rid, probe = request(member.poll(now), HeartbeatRequest)
    assert probe.generation_id == 1  # the question, to the coordinator found next
    answered(member, rid, E.NOT_COORDINATOR, now + 50)
    assert [f.silent for f in of(member.poll(now + 1_000), FindCoordinator)] == [False]
