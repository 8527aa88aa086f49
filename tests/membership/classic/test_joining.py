"""Transitions out of UNJOINED and JOINING (KIP-429 1d, 1e; coordinator errors)."""

from __future__ import annotations

import pytest

from assignors.partition.range import RangeAssignor
from assignors.partition.sticky import CooperativeStickyAssignor
from streamtasks.errors import LocalProtocolError
from streamtasks.membership.classic import (
    ClassicMember,
    CommitOffsets,
    CoordinatorDiscovered,
    ErrorReported,
    FindCoordinator,
    MemberState,
    RequestFailed,
    ResponseReceived,
    SendRequest,
)
from streamtasks.protocol.classic_group import JoinGroupRequest, JoinGroupResponse, SyncGroupRequest
from streamtasks.protocol.consumer_protocol import decode_subscription
from tests.membership.classic.helpers import (
    E,
    config,
    cooperative,
    join,
    join_ok,
    kinds,
    listeners,
    of,
    one,
    rejoin,
    request,
    stable,
    sync_ok,
    tps,
)


def test_unjoined_to_joining_finds_coordinator_first() -> None:
    member = cooperative()
    assert member.state is MemberState.UNJOINED
    actions = member.poll(0)
    assert [type(a) for a in actions] == [FindCoordinator]
    assert member.poll(0) == []  # lookup in flight: nothing else to do
    find = one(actions, FindCoordinator)
    member.handle(CoordinatorDiscovered(request_id=find.request_id), 5)
    rid, req = request(member.poll(5), JoinGroupRequest)
    assert member.state is MemberState.JOINING
    assert req.member_id == ""
    assert req.protocol_type == "consumer"
    assert [p.name for p in req.protocols] == ["cooperative-sticky"]
    sub = decode_subscription(req.protocols[0].metadata)
    assert sub.topics == ("t",)
    assert sub.owned_partitions == ()
    assert sub.generation_id == -1
    assert rid > find.request_id


def test_joining_offers_every_assignor_in_preference_order() -> None:
    member = ClassicMember(config(assignors=(CooperativeStickyAssignor(), RangeAssignor()), rack="r1"))
    _, req = join(member)
    assert [p.name for p in req.protocols] == ["cooperative-sticky", "range"]
    assert all(decode_subscription(p.metadata).rack_id == "r1" for p in req.protocols)


def test_joining_to_joining_on_member_id_required() -> None:
    member = cooperative()
    rid, _ = join(member)
    actions = member.handle(
        ResponseReceived(
            request_id=rid, response=JoinGroupResponse(error=E.MEMBER_ID_REQUIRED, member_id="m-7")
        ),
        1,
    )
    _, again = request(actions, JoinGroupRequest)  # 1e: at once, with the id
    assert again.member_id == "m-7"
    assert member.state is MemberState.JOINING
    assert member.member_id == "m-7"
    assert member.metrics(1)["failed-rebalance-total"] == 0


def test_joining_to_syncing_follower_sends_no_assignment() -> None:
    member = cooperative()
    rid, _ = join(member)
    _, _, sync = join_ok(member, rid, generation=4, member_id="m1", leader="m0")
    assert member.state is MemberState.SYNCING
    assert (sync.generation_id, sync.member_id, sync.assignments) == (4, "m1", ())
    assert sync.protocol_name == "cooperative-sticky"
    assert not member.is_leader
    assert member.generation == 4


@pytest.mark.parametrize("error", [E.UNKNOWN_MEMBER_ID, E.ILLEGAL_GENERATION])
def test_joining_to_unjoined_to_joining_on_fencing_errors(error: E) -> None:
    member = cooperative()
    rid, _ = join(member)
    actions = member.handle(
        ResponseReceived(
            request_id=rid, response=JoinGroupResponse(error=E.MEMBER_ID_REQUIRED, member_id="m1")
        ),
        0,
    )
    rid, _ = request(actions, JoinGroupRequest)
    actions = member.handle(ResponseReceived(request_id=rid, response=JoinGroupResponse(error=error)), 1)
    _, again = request(actions, JoinGroupRequest)  # rejoined at once
    assert again.member_id == ("" if error is E.UNKNOWN_MEMBER_ID else "m1")
    assert member.state is MemberState.JOINING
    assert member.metrics(1)["failed-rebalance-total"] == 1


def test_joining_on_rebalance_in_progress_sends_join_again() -> None:
    member = cooperative()
    rid, _ = join(member)
    actions = member.handle(
        ResponseReceived(request_id=rid, response=JoinGroupResponse(error=E.REBALANCE_IN_PROGRESS)), 0
    )
    request(actions, JoinGroupRequest)


@pytest.mark.parametrize("error", [E.NOT_COORDINATOR, E.COORDINATOR_NOT_AVAILABLE])
def test_joining_on_coordinator_error_rediscovers_then_retries(error: E) -> None:
    member = cooperative()
    rid, _ = join(member)
    actions = member.handle(ResponseReceived(request_id=rid, response=JoinGroupResponse(error=error)), 10)
    assert not member.coordinator_known
    assert of(actions, ErrorReported)
    assert member.poll(10) == []  # backoff
    assert member.next_deadline_ms() == 110
    find = one(member.poll(110), FindCoordinator)
    member.handle(CoordinatorDiscovered(request_id=find.request_id), 120)
    request(member.poll(120), JoinGroupRequest)
    assert member.state is MemberState.JOINING


def test_joining_on_load_in_progress_retries_after_backoff() -> None:
    member = cooperative()
    rid, _ = join(member)
    member.handle(
        ResponseReceived(request_id=rid, response=JoinGroupResponse(error=E.COORDINATOR_LOAD_IN_PROGRESS)), 0
    )
    assert member.coordinator_known
    assert member.poll(50) == []
    request(member.poll(100), JoinGroupRequest)


@pytest.mark.parametrize(
    "error", [E.FENCED_INSTANCE_ID, E.INCONSISTENT_GROUP_PROTOCOL, E.GROUP_AUTHORIZATION_FAILED]
)
def test_joining_to_failed_on_fatal_errors(error: E) -> None:
    member = cooperative()
    rid, _ = join(member)
    actions = member.handle(ResponseReceived(request_id=rid, response=JoinGroupResponse(error=error)), 0)
    report = one(actions, ErrorReported)
    assert report.fatal
    assert report.code is error
    assert member.state is MemberState.FAILED
    assert member.poll(10_000) == []
    assert member.next_deadline_ms() is None


def test_joining_unknown_error_is_reported_and_retried() -> None:
    member = cooperative()
    rid, _ = join(member)
    actions = member.handle(
        ResponseReceived(request_id=rid, response=JoinGroupResponse(error=E.UNKNOWN_SERVER_ERROR)), 0
    )
    assert not one(actions, ErrorReported).fatal
    request(member.poll(100), JoinGroupRequest)


def test_joining_times_out_without_answer() -> None:
    member = cooperative()
    join(member)
    deadline = member.next_deadline_ms()
    assert deadline == 30_000 + 5_000  # rebalance timeout + 5 s, as Kafka's JoinGroup
    actions = member.poll(deadline)
    assert of(actions, ErrorReported)
    assert not member.coordinator_known


def test_joining_request_failure_forgets_coordinator() -> None:
    member = cooperative()
    rid, _ = join(member)
    member.handle(RequestFailed(request_id=rid, error=E.NETWORK_EXCEPTION), 3)
    assert not member.coordinator_known
    one(member.poll(103), FindCoordinator)


def test_joining_response_from_coordinator_with_unknown_protocol_is_reported() -> None:
    member = cooperative()
    rid, _ = join(member)
    response = JoinGroupResponse(
        error=E.NONE, generation_id=1, protocol_name="nope", leader="x", member_id="m1"
    )
    actions = member.handle(ResponseReceived(request_id=rid, response=response), 0)
    assert of(actions, ErrorReported)
    assert member.state is MemberState.JOINING
    request(member.poll(100), JoinGroupRequest)


def test_responses_to_unissued_requests_are_a_driver_bug() -> None:
    member = cooperative()
    rid, _ = join(member)
    with pytest.raises(LocalProtocolError):
        member.handle(ResponseReceived(request_id=rid + 10, response=JoinGroupResponse(error=E.NONE)), 0)


def test_a_response_of_the_wrong_kind_is_a_driver_bug() -> None:
    from streamtasks.protocol.classic_group import HeartbeatResponse

    member = cooperative()
    rid, _ = join(member)
    with pytest.raises(LocalProtocolError):
        member.handle(ResponseReceived(request_id=rid, response=HeartbeatResponse(error=E.NONE)), 0)


def test_duplicate_responses_are_ignored() -> None:
    member = cooperative()
    rid, _ = join(member)
    join_ok(member, rid)
    again = member.handle(
        ResponseReceived(
            request_id=rid,
            response=JoinGroupResponse(
                error=E.NONE, generation_id=1, protocol_name="cooperative-sticky", leader="x"
            ),
        ),
        0,
    )
    assert again == []
    assert member.state is MemberState.SYNCING
    assert member.metrics(0)["stale-responses-total"] == 1


def test_sync_request_carries_static_instance_id() -> None:
    member = ClassicMember(config(group_instance_id="host-1"))
    rid, req = join(member)
    assert req.group_instance_id == "host-1"
    _, _, sync = join_ok(member, rid)
    assert sync.group_instance_id == "host-1"
    assert isinstance(sync, SyncGroupRequest)


def test_joining_to_syncing_keeps_partitions_across_a_generation_gap_when_the_rule_is_off() -> None:
    """``lose_on_missed_generation=False`` (what the embedded Tansu broker needs: it skips
    generation numbers for members that did take part): a generation gap changes nothing."""
    member = ClassicMember(
        config(group_instance_id="i1", session_timeout_ms=60_000, lose_on_missed_generation=False)
    )
    stable(member, tps("t0 t1"), generation=2)
    member.enforce_rebalance()
    _, rid, _ = rejoin(member, 50_000)
    actions, _, _ = join_ok(member, rid, generation=4, now=50_010)
    assert listeners(actions) == []
    assert member.owned_partitions == frozenset(tps("t0 t1"))


def test_joining_to_syncing_loses_partitions_when_a_generation_was_missed() -> None:
    """KIP-429/KIP-341, on by default: a static member paused past the rebalance timeout
    rejoins; its JoinGroup answer is two generations on (Apache Kafka's coordinator completed one
    without it, tests/runtime/test_missed_generation.py), so what it owns may have moved: lost,
    never committed."""
    member = ClassicMember(config(group_instance_id="i1", session_timeout_ms=60_000))
    stable(member, tps("t0 t1"), generation=2)
    member.enforce_rebalance()
    _, rid, _ = rejoin(member, 50_000)  # resumed: within its session, past a rebalance
    actions, sid, _ = join_ok(member, rid, generation=4, now=50_010)
    assert listeners(actions) == [("LOST", tps("t0 t1"))]
    assert kinds(actions)[-1] == "SyncGroupRequest"
    assert member.state is MemberState.SYNCING
    assert member.owned_partitions == frozenset()
    assert one(actions, ErrorReported).fatal is False
    done = sync_ok(member, sid, tps("t0"), now=50_020)
    assert not of(done, CommitOffsets)  # nothing owned: nothing revoked, no stale commit
    assert listeners(done) == [("ASSIGNED", tps("t0"))]


def test_lost_after_a_missed_generation_but_claimed_and_not_assigned_rejoins_at_once() -> None:
    """Simulator seed 675166650 (cooperative): the JoinGroup that the leader answers claimed t0
    and t1 (sent before the gap was known); the member then lost them. The leader keeps t1 for
    another member and waits for this one to revoke it and rejoin: with nothing left to revoke
    it must still rejoin, or t1 stays unowned in a stable group."""
    member = ClassicMember(config(group_instance_id="i1", session_timeout_ms=60_000))
    stable(member, tps("t0 t1"), generation=2)
    member.enforce_rebalance()
    _, rid, _ = rejoin(member, 50_000)
    actions, sid, _ = join_ok(member, rid, generation=4, now=50_010)
    assert listeners(actions) == [("LOST", tps("t0 t1"))]
    done = sync_ok(member, sid, tps("t0"), now=50_020)  # t1 withheld for its new owner
    assert listeners(done) == [("ASSIGNED", tps("t0"))]
    assert member.owned_partitions == frozenset(tps("t0"))
    _, join_request = request(done, JoinGroupRequest)  # the follow-up the leader waits for
    assert join_request.reason == "partitions claimed in JoinGroup were lost: follow-up rebalance"
    assert member.state is MemberState.JOINING


def test_lost_after_a_missed_generation_and_every_claim_assigned_back_stays() -> None:
    member = ClassicMember(config(group_instance_id="i1", session_timeout_ms=60_000))
    stable(member, tps("t0 t1"), generation=2)
    member.enforce_rebalance()
    _, rid, _ = rejoin(member, 50_000)
    _, sid, _ = join_ok(member, rid, generation=4, now=50_010)
    done = sync_ok(member, sid, tps("t0 t1 t2"), now=50_020)
    assert not of(done, SendRequest)
    assert member.state is MemberState.STABLE
    assert not member.rejoin_needed


def test_joining_to_syncing_keeps_partitions_in_the_next_generation() -> None:
    member = cooperative()
    stable(member, tps("t0 t1"), generation=2)
    member.enforce_rebalance()
    _, rid, _ = rejoin(member, 5)
    actions, _, _ = join_ok(member, rid, generation=3, now=6)
    assert listeners(actions) == []
    assert member.owned_partitions == frozenset(tps("t0 t1"))
