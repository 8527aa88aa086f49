"""Transitions out of STABLE: heartbeats, rejoin triggers (KIP-429 1a-1d, KIP-568), leaving."""

from __future__ import annotations

import pytest

from streamtasks.errors import ConfigError, LocalProtocolError
from streamtasks.membership.classic import (
    Action,
    ClassicMember,
    CommitOffsets,
    CoordinatorDiscovered,
    CoordinatorLost,
    EnforceRebalance,
    ErrorReported,
    FindCoordinator,
    Leave,
    MemberState,
    MetadataUpdated,
    RequestFailed,
    ResponseReceived,
    SendRequest,
    Subscribe,
)
from streamtasks.protocol.classic_group import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    LeaveGroupRequest,
    OffsetCommitResponse,
)
from streamtasks.protocol.consumer_protocol import decode_subscription
from tests.membership.classic.helpers import (
    E,
    commit_ok,
    config,
    cooperative,
    eager,
    join,
    join_ok,
    kinds,
    listeners,
    of,
    one,
    rejoin,
    request,
    stable,
    tps,
)


def heartbeat(member: ClassicMember, now: int) -> tuple[int, HeartbeatRequest]:
    return request(member.poll(now), HeartbeatRequest)


def answer(member: ClassicMember, rid: int, error: E, now: int) -> list[object]:
    return list(member.handle(ResponseReceived(request_id=rid, response=HeartbeatResponse(error=error)), now))


def test_stable_heartbeats_every_interval() -> None:
    member = cooperative(followup_heartbeat_ms=0)
    stable(member, tps("t0"), generation=5)
    assert member.next_deadline_ms() == 1_000
    assert member.poll(999) == []
    rid, req = heartbeat(member, 1_000)
    assert (req.generation_id, req.member_id) == (5, "m1")
    assert member.poll(2_500) == []  # one heartbeat in flight at a time
    answer(member, rid, E.NONE, 2_600)
    heartbeat(member, 2_600)


def test_cooperative_heartbeats_soon_after_a_rebalance_then_every_interval() -> None:
    """KIP-429's follow-up (a member revoked and rejoined) waits for every member's next
    heartbeat: the first one comes ``followup_heartbeat_ms`` after the rebalance."""
    member = cooperative()
    stable(member, tps("t0"), generation=5, now=0)
    assert member.next_deadline_ms() == 100
    assert member.poll(99) == []
    rid, _ = heartbeat(member, 100)
    answer(member, rid, E.NONE, 102)
    assert member.next_deadline_ms() == 1_100
    assert member.poll(1_099) == []
    heartbeat(member, 1_100)


def test_the_early_heartbeat_hears_of_the_follow_up() -> None:
    member = cooperative()
    stable(member, tps("t0 t1"), generation=5, now=0)
    rid, _ = heartbeat(member, 100)
    answer(member, rid, E.REBALANCE_IN_PROGRESS, 102)
    _, _, req = rejoin(member, 102)
    assert req.member_id == "m1"
    assert member.owned_partitions == frozenset(tps("t0 t1"))


def test_eager_heartbeats_at_the_interval_after_a_rebalance() -> None:
    member = eager()
    stable(member, tps("t0"), generation=5, now=0)
    assert member.next_deadline_ms() == 1_000


def test_followup_heartbeat_ms_must_not_be_negative() -> None:
    with pytest.raises(ConfigError, match="followup_heartbeat_ms"):
        config(followup_heartbeat_ms=-1)


def test_stable_to_joining_on_heartbeat_rebalance_in_progress_keeps_partitions() -> None:
    member = cooperative()
    stable(member, tps("t0 t1"))
    rid, _ = heartbeat(member, 1_000)
    assert answer(member, rid, E.REBALANCE_IN_PROGRESS, 1_001) == []
    actions, _, req = rejoin(member, 1_001)
    assert listeners(actions) == []  # 1c: cooperative keeps everything
    assert decode_subscription(req.protocols[0].metadata).owned_partitions == tps("t0 t1")
    assert req.reason == "the group is rebalancing"


@pytest.mark.parametrize("error", [E.UNKNOWN_MEMBER_ID, E.ILLEGAL_GENERATION])
def test_stable_to_unjoined_on_heartbeat_fencing_loses_everything(error: E) -> None:
    member = cooperative()
    stable(member, tps("t0 t1"))
    rid, _ = heartbeat(member, 1_000)
    actions = answer(member, rid, error, 1_001)
    assert listeners(actions) == [("LOST", tps("t0 t1"))]
    assert member.state is MemberState.UNJOINED
    assert member.generation == -1
    assert member.member_id == ("" if error is E.UNKNOWN_MEMBER_ID else "m1")
    _, _, req = rejoin(member, 1_001)
    sub = decode_subscription(req.protocols[0].metadata)
    assert (sub.owned_partitions, sub.generation_id) == ((), -1)


def test_stable_ignores_fencing_for_a_heartbeat_of_an_older_generation() -> None:
    member = cooperative()
    stable(member, tps("t0"))
    rid, _ = heartbeat(member, 1_000)
    member.enforce_rebalance()
    _, jid, _ = rejoin(member, 1_001)  # heartbeat still in flight is for generation 1
    join_ok(member, jid, generation=2, now=1_002)
    assert answer(member, rid, E.ILLEGAL_GENERATION, 1_003) == []
    assert member.state is MemberState.SYNCING


def test_stable_to_failed_on_heartbeat_fenced_instance_id() -> None:
    member = ClassicMember(config(group_instance_id="i1"))
    stable(member, tps("t0"))
    rid, _ = heartbeat(member, 1_000)
    actions = answer(member, rid, E.FENCED_INSTANCE_ID, 1_001)
    assert listeners(actions) == [("LOST", tps("t0"))]
    assert member.state is MemberState.FAILED
    with pytest.raises(LocalProtocolError):
        member.handle(Subscribe(topics=("t",)), 1_002)
    with pytest.raises(LocalProtocolError):
        member.enforce_rebalance()
    member.handle(Leave(), 1_003)
    assert member.state is MemberState.CLOSED


def test_stable_keeps_partitions_while_the_coordinator_is_rediscovered() -> None:
    member = cooperative()
    stable(member, tps("t0"))
    rid, _ = heartbeat(member, 1_000)
    answer(member, rid, E.NOT_COORDINATOR, 1_001)
    assert member.state is MemberState.STABLE
    assert member.owned_partitions == frozenset(tps("t0"))
    find = one(member.poll(1_101), FindCoordinator)
    member.handle(CoordinatorDiscovered(request_id=find.request_id), 1_200)
    heartbeat(member, 1_200)


def test_stable_forgets_the_coordinator_when_a_heartbeat_times_out() -> None:
    member = cooperative()
    stable(member, tps("t0"))
    heartbeat(member, 1_000)  # never answered; times out after request_timeout (5 s)
    actions = member.poll(6_000)
    assert of(actions, ErrorReported)
    assert not member.coordinator_known
    assert member.owned_partitions == frozenset(tps("t0"))


def test_stable_coordinator_lost_event_fails_requests_in_flight() -> None:
    member = cooperative()
    stable(member, tps("t0"))
    rid, _ = heartbeat(member, 1_000)
    member.handle(CoordinatorLost(reason="broker down"), 1_001)
    assert not member.coordinator_known
    assert answer(member, rid, E.NONE, 1_002) == []  # abandoned request: ignored


def test_stable_enforce_rebalance_is_non_blocking_and_rejoins_on_the_next_poll() -> None:
    member = cooperative()
    stable(member, tps("t0"))
    assert member.handle(EnforceRebalance(reason="standby ready"), 10) == []
    assert member.rejoin_needed
    assert member.next_deadline_ms() is not None
    actions, _, req = rejoin(member, 10)
    assert req.reason == "standby ready"
    assert listeners(actions) == []


def test_enforce_rebalance_is_a_no_op_while_a_rebalance_is_in_flight() -> None:
    member = cooperative()
    rid, _ = join(member)
    assert member.enforce_rebalance() is False
    _, sid, _ = join_ok(member, rid)
    assert member.enforce_rebalance() is False
    from tests.membership.classic.helpers import sync_ok

    sync_ok(member, sid, tps("t0"))
    assert not member.rejoin_needed  # the earlier call did not stick
    assert member.poll(1) == []


def test_enforce_rebalance_before_joining_returns_true() -> None:
    member = cooperative()
    assert member.enforce_rebalance() is True


def test_enforce_rebalance_works_for_static_members() -> None:
    member = ClassicMember(config(group_instance_id="i1"))
    stable(member, tps("t0"))
    assert member.enforce_rebalance() is True
    _, _, req = rejoin(member, 1)
    assert req.group_instance_id == "i1"
    assert req.member_id == "m1"


def test_stable_to_preparing_on_subscription_change_revokes_only_dropped_topics() -> None:
    member = cooperative(topics=("t", "u"))
    stable(member, tps("t0 u0 u1"))
    member.handle(Subscribe(topics=("t",)), 5)
    actions = member.poll(5)
    assert member.state is MemberState.PREPARING
    assert one(actions, CommitOffsets).partitions == tps("u0 u1")
    done = commit_ok(member, actions, 6)
    assert listeners(done) == [("REVOKED", tps("u0 u1"))]  # 1a
    _, req = request(done, JoinGroupRequest)
    sub = decode_subscription(req.protocols[0].metadata)
    assert (sub.topics, sub.owned_partitions) == (("t",), tps("t0"))


def test_stable_loses_partitions_that_metadata_says_are_gone() -> None:
    member = cooperative(topics=("t", "u"))
    stable(member, tps("t0 t1 u0"))
    actions = member.handle(MetadataUpdated(partitions_per_topic={"t": 1}), 5)
    assert listeners(actions) == [("LOST", tps("t1 u0"))]  # 1b
    assert member.owned_partitions == frozenset(tps("t0"))
    assert not member.rejoin_needed  # only the leader rejoins


def test_stable_to_leaving_to_closed_dynamic_member_sends_leave_group() -> None:
    member = cooperative()
    stable(member, tps("t0 t1"))
    actions = member.handle(Leave(reason="shutdown"), 5)
    assert member.state is MemberState.LEAVING
    assert kinds(actions) == ["CommitOffsets"]
    done = commit_ok(member, actions, 6)
    assert kinds(done) == ["REVOKED", "AssignmentChanged", "LeaveGroupRequest"]
    _, leave = request(done, LeaveGroupRequest)
    assert leave.member_id == "m1"
    assert member.state is MemberState.CLOSED
    assert member.protocol is None
    assert member.poll(100_000) == []
    assert member.next_deadline_ms() is None


def test_static_member_leaves_without_leave_group() -> None:
    member = ClassicMember(config(group_instance_id="i1"))
    stable(member, tps("t0"))
    done = commit_ok(member, member.handle(Leave(), 5), 6)
    assert kinds(done) == ["REVOKED", "AssignmentChanged"]
    assert member.state is MemberState.CLOSED


def test_leave_while_joining_with_nothing_owned_closes_at_once() -> None:
    member = cooperative()
    join(member)
    actions = member.handle(Leave(), 1)
    assert kinds(actions) == []  # no member id yet: nothing to tell the coordinator
    assert member.state is MemberState.CLOSED
    with pytest.raises(LocalProtocolError):
        member.handle(Leave(), 2)


def test_closed_to_unjoined_on_subscribe() -> None:
    member = cooperative()
    member.handle(Leave(), 0)
    member.handle(Subscribe(topics=("v",)), 1)
    assert member.state is MemberState.UNJOINED
    _, req = join(member, 2)
    assert decode_subscription(req.protocols[0].metadata).topics == ("v",)


def test_subscribe_to_nothing_is_refused() -> None:
    member = cooperative()
    with pytest.raises(LocalProtocolError):
        member.handle(Subscribe(topics=()), 0)


def test_a_member_configured_without_topics_starts_closed() -> None:
    member = cooperative(topics=())
    assert member.state is MemberState.CLOSED
    assert member.poll(0) == []


def test_eager_heartbeat_rebalance_in_progress_revokes_everything_before_rejoining() -> None:
    member = eager()
    stable(member, tps("t0"))
    rid, _ = heartbeat(member, 1_000)
    answer(member, rid, E.REBALANCE_IN_PROGRESS, 1_001)
    actions = member.poll(1_001)
    assert one(actions, CommitOffsets).partitions == tps("t0")


def test_request_failure_during_commit_retries_after_rediscovery() -> None:
    member = eager()
    stable(member, tps("t0"))
    member.enforce_rebalance()
    commit = one(member.poll(0), CommitOffsets)
    member.handle(RequestFailed(request_id=commit.request_id), 1)
    assert member.state is MemberState.PREPARING
    find = one(member.poll(101), FindCoordinator)
    member.handle(CoordinatorDiscovered(request_id=find.request_id), 102)
    again = one(member.poll(102), CommitOffsets)
    assert again.partitions == tps("t0")


def test_preparing_to_leaving_replaces_the_join_with_a_leave() -> None:
    member = eager()
    stable(member, tps("t0 t1"))
    member.enforce_rebalance()
    first = one(member.poll(0), CommitOffsets)
    actions = member.handle(Leave(), 1)
    assert member.state is MemberState.LEAVING
    second = one(actions, CommitOffsets)
    assert second.partitions == tps("t0 t1")
    assert (
        member.handle(
            ResponseReceived(request_id=first.request_id, response=OffsetCommitResponse(errors=())), 2
        )
        == []
    )  # the abandoned commit's answer is ignored
    done = commit_ok(member, actions, 3)
    assert kinds(done) == ["REVOKED", "AssignmentChanged", "LeaveGroupRequest"]


def test_commit_that_fails_for_good_is_reported_and_the_revocation_goes_on() -> None:
    member = eager()
    stable(member, tps("t0"))
    member.enforce_rebalance()
    commit = one(member.poll(0), CommitOffsets)
    response = OffsetCommitResponse(errors=((tps("t0")[0], E.OFFSET_METADATA_TOO_LARGE),))
    done = member.handle(ResponseReceived(request_id=commit.request_id, response=response), 1)
    assert kinds(done) == ["ErrorReported", "REVOKED", "AssignmentChanged", "JoinGroupRequest"]


def test_partitions_gone_during_the_commit_are_lost_not_revoked() -> None:
    member = eager(topics=("t", "u"))
    stable(member, tps("t0 u0"))
    member.enforce_rebalance()
    actions = member.poll(0)
    lost = member.handle(MetadataUpdated(partitions_per_topic={"t": 1}), 1)
    assert listeners(lost) == [("LOST", tps("u0"))]
    done = commit_ok(member, actions, 2)
    assert listeners(done) == [("REVOKED", tps("t0"))]


def test_session_timeout_without_successful_heartbeats_forgets_the_coordinator() -> None:
    member = cooperative()
    stable(member, tps("t0"))
    now = 1_000
    while now <= 10_000:
        for action in member.poll(now):
            if isinstance(action, SendRequest) and isinstance(action.request, HeartbeatRequest):
                answer(member, action.request_id, E.UNKNOWN_SERVER_ERROR, now)
        now += 100
    assert member.coordinator_known
    assert member.owned_partitions == frozenset(tps("t0"))
    lapsed = member.poll(10_001)
    assert not member.coordinator_known
    # the coordinator may have expired the member: its partitions are lost, not kept
    assert listeners(lapsed) == [("LOST", tps("t0"))]
    assert member.owned_partitions == frozenset()


def test_a_hung_coordinator_found_again_does_not_renew_the_session() -> None:
    """A coordinator that hangs (SIGSTOP) is looked up again and again, and found each time,
    but never answers a heartbeat; once a session timeout has passed since it last did, it
    (or the next one) may have expired the member and given its partitions away: they are
    lost at once (librdkafka's rule), and the member rejoins under its member id."""
    member = cooperative()
    stable(member, tps("t0 t1"))
    member_id = member.member_id
    rid, _ = heartbeat(member, 3_000)
    assert answer(member, rid, E.NONE, 3_050) == []
    member.handle(CoordinatorLost(reason="connection closed"), 4_000)
    now, lost = 4_000, []
    while not lost and now <= 20_000:
        now += 100
        actions = member.poll(now)
        lost = [a for a in listeners(actions) if a[0] == "LOST"]
        for action in actions:
            if isinstance(action, FindCoordinator):
                member.handle(CoordinatorDiscovered(request_id=action.request_id), now)
            elif isinstance(action, SendRequest) and isinstance(action.request, HeartbeatRequest):
                member.handle(RequestFailed(request_id=action.request_id), now + 50)
    assert lost == [("LOST", tps("t0 t1"))]
    assert 13_050 < now <= 13_150  # the last answer at 3,050 + the 10 s session timeout
    assert member.owned_partitions == frozenset()
    # it asks the coordinator first (test_readopt.py); a rebalance under way: it rejoins
    rid, probe = request(member.poll(now + 1_000), HeartbeatRequest)
    assert (probe.member_id, probe.generation_id) == (member_id, 1)
    response = ResponseReceived(request_id=rid, response=HeartbeatResponse(error=E.REBALANCE_IN_PROGRESS))
    _, req = request(member.handle(response, now + 1_050), JoinGroupRequest)
    assert req.member_id == member_id
    assert req.protocols  # and it owns nothing in the subscription it sends


def commit_fails(member: ClassicMember, actions: list[Action], error: E, now: int) -> list[Action]:
    commit = one(actions, CommitOffsets)
    errors = tuple((p, error) for p in commit.partitions)
    response = OffsetCommitResponse(errors=errors)
    return member.handle(ResponseReceived(request_id=commit.request_id, response=response), now)


def test_joining_to_leaving_to_closed_on_illegal_generation_still_sends_leave_group() -> None:
    """Leave while the JoinGroup is in flight: the commit under the old generation is refused,
    the partitions are lost, and the coordinator (which still knows the member id) is told."""
    member = cooperative()
    stable(member, tps("t0 t1"))
    member.enforce_rebalance()
    rejoin(member, 5)  # JoinGroup in flight
    actions = member.handle(Leave(), 6)
    assert member.state is MemberState.LEAVING
    done = commit_fails(member, actions, E.ILLEGAL_GENERATION, 7)
    assert kinds(done) == ["LOST", "AssignmentChanged", "LeaveGroupRequest"]
    _, leave = request(done, LeaveGroupRequest)
    assert leave.member_id == "m1"
    assert member.state is MemberState.CLOSED


def test_leaving_to_closed_on_unknown_member_id_sends_no_leave_group() -> None:
    member = cooperative()
    stable(member, tps("t0"))
    done = commit_fails(member, member.handle(Leave(), 5), E.UNKNOWN_MEMBER_ID, 6)
    assert kinds(done) == ["LOST", "AssignmentChanged"]
    assert member.state is MemberState.CLOSED


def test_static_member_leaving_to_closed_on_illegal_generation_sends_no_leave_group() -> None:
    member = ClassicMember(config(group_instance_id="i1"))
    stable(member, tps("t0"))
    done = commit_fails(member, member.handle(Leave(), 5), E.ILLEGAL_GENERATION, 6)
    assert kinds(done) == ["LOST", "AssignmentChanged"]
    assert member.state is MemberState.CLOSED


def test_leaving_after_a_long_join_commits_and_revokes_instead_of_losing() -> None:
    """Seen in the live loop with a 4 s session: a worker stopped while its JoinGroup waited out
    the rebalance gave its partitions up as lost at once (the session rule counted the join's
    wait as silence) instead of committing and revoking them."""
    member = cooperative()  # a 10 s session; the JoinGroup may wait 35 s
    stable(member, tps("t0 t1"))
    member.enforce_rebalance()
    rejoin(member, 100)
    actions = member.handle(Leave(), 20_000)
    actions += member.poll(20_100)
    assert listeners(actions) == []
    assert kinds(commit_ok(member, actions, 20_200)) == ["REVOKED", "AssignmentChanged", "LeaveGroupRequest"]
