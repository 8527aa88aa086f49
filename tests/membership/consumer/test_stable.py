"""From STABLE: reconciling a new assignment, fencing, leaving, the poll timer, static members."""

from __future__ import annotations

from streamtasks.membership.classic import CommitOffsets, InvokeListener, Leave, ListenerKind
from streamtasks.membership.consumer import (
    ApplicationPolled,
    MemberState,
    PollTimerExpired,
    ResponseReceived,
    SendRequest,
)
from streamtasks.protocol.classic_group import OffsetCommitResponse
from streamtasks.protocol.consumer_group import ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse
from streamtasks.protocol.errors import KafkaErrorCode
from tests.ids import tps
from tests.membership.consumer.helpers import Cluster

ALL = tps("foo-0", "foo-1", "foo-2", "foo-3")


def stable_pair() -> Cluster:
    c = Cluster()
    c.add("a")
    c.run(2_000)
    c.add("b")
    c.run(3_000)
    assert {n.member.state for n in c.nodes.values()} == {MemberState.STABLE}
    return c


def test_stable_to_reconciling_commits_then_revokes_then_acknowledges() -> None:
    c = Cluster()
    a = c.add("a")
    c.run(2_000)
    assert c.owned("a") == ALL
    a.actions.clear()
    c.add("b")
    c.run(3_000)
    kinds = [
        type(x).__name__ if not isinstance(x, InvokeListener) else x.kind.name
        for x in a.actions
        if isinstance(x, CommitOffsets | InvokeListener)
    ]
    assert kinds == ["CommitOffsets", "REVOKED", "ASSIGNED"]
    commit = next(x for x in a.actions if isinstance(x, CommitOffsets))
    assert commit.generation_id == 1  # the member epoch it still holds while revoking
    assert frozenset(commit.partitions) == ALL - c.owned("a")
    assert a.member.state is MemberState.STABLE
    assert a.member.member_epoch == c.group().group_epoch == 2


def test_revocation_waits_for_the_commit() -> None:
    c = Cluster()
    a = c.add("a")
    c.run(2_000)
    c.add("b")
    a.hold_commits = True  # the commit stays unanswered
    c.run(500)
    assert a.member.state is MemberState.RECONCILING
    assert c.owned("a") == ALL
    assert c.owned("b") == frozenset()  # nothing is handed over before a revoked
    c.release("a")
    c.run(2_000)
    c.assert_exclusive()
    assert c.owned("a") | c.owned("b") == ALL
    assert c.owned("b")


def test_a_commit_answered_stale_member_epoch_is_sent_again_before_revoking() -> None:
    c = Cluster()
    a = c.add("a")
    c.run(2_000)
    c.add("b")
    a.hold_commits = True
    c.run(500)
    [(rid, held)] = a.held
    a.held, a.hold_commits = [], False
    stale = OffsetCommitResponse(
        errors=tuple((tp, KafkaErrorCode.STALE_MEMBER_EPOCH) for tp, _ in held.errors)
    )
    c.handle("a", ResponseReceived(request_id=rid, response=stale))
    assert c.owned("a") == ALL  # nothing revoked on the stale answer
    c.run(2_000)
    first, second = a.commits
    assert second.partitions == first.partitions
    assert second.generation_id == a.member.member_epoch - 1  # the epoch it held while revoking
    assert not any("revoking anyway" in e.reason for e in a.errors)
    c.assert_exclusive()
    assert c.owned("a") | c.owned("b") == ALL
    assert c.owned("b")


def test_revocation_goes_ahead_when_the_commit_times_out() -> None:
    c = Cluster()
    a = c.add("a", rebalance_timeout_ms=2_000)
    c.run(2_000)
    c.add("b")
    a.hold_commits = True
    c.run(2_500)  # past half the rebalance timeout, before the coordinator's revocation timer
    assert any("timed out" in e.reason for e in a.errors)
    assert (ListenerKind.REVOKED, tuple(sorted(ALL - c.owned("a")))) in a.listener
    assert ListenerKind.LOST not in [kind for kind, _ in a.listener]
    assert c.group().member("a") is not None


def test_stable_to_fenced_to_joining() -> None:
    c = stable_pair()
    a = c.nodes["a"]
    owned = c.owned("a")
    rid = a.member._k.requests.next_id + 1
    # the next heartbeat is answered FENCED_MEMBER_EPOCH
    actions = a.member.poll(c.now + 1_000)
    send = next(x for x in actions if isinstance(x, SendRequest))
    assert send.request_id == rid
    fenced = ConsumerGroupHeartbeatResponse(
        error=KafkaErrorCode.FENCED_MEMBER_EPOCH, member_epoch=0, heartbeat_interval_ms=0
    )
    c.now += 1_000
    c.handle("a", ResponseReceived(request_id=rid, response=fenced))
    assert a.member.state is MemberState.FENCED
    assert (ListenerKind.LOST, tuple(sorted(owned))) in a.listener
    assert c.owned("a") == frozenset()
    a.hold = True
    c.poll("a")
    assert a.member.state is MemberState.JOINING
    rejoin = a.sent[-1]
    assert isinstance(rejoin, ConsumerGroupHeartbeatRequest)
    assert (rejoin.member_epoch, rejoin.member_id) == (0, "a")


def test_unknown_member_id_fences() -> None:
    c = stable_pair()
    a = c.nodes["a"]
    c.coordinator.apply(
        c.coordinator.heartbeat(
            ConsumerGroupHeartbeatRequest(group_id="g", member_id="a", member_epoch=-1), c.now
        )
    )  # the coordinator forgot it (as after a session timeout)
    c.run(2_000)
    assert any(e.code is KafkaErrorCode.UNKNOWN_MEMBER_ID for e in a.errors)
    assert a.member.state is MemberState.STABLE  # rejoined with the same id
    c.assert_exclusive()
    assert c.owned("a") | c.owned("b") == ALL


def test_no_heartbeat_answer_for_a_session_fences() -> None:
    c = stable_pair()
    a = c.nodes["a"]
    a.hold = True
    c.run(10_200)
    assert any("session timeout" in e.reason for e in a.errors)
    assert c.owned("a") == frozenset()
    assert any(kind is ListenerKind.LOST for kind, _ in a.listener)


def test_unreleased_instance_id_is_fatal() -> None:
    c = Cluster()
    a = c.add("a", group_instance_id="i")
    c.run(2_000)
    x = c.add("x", group_instance_id="i")
    c.run(1_000)
    assert x.member.state is MemberState.FATAL
    assert any(e.fatal and e.code is KafkaErrorCode.UNRELEASED_INSTANCE_ID for e in x.errors)
    assert a.member.state is MemberState.STABLE


def test_stable_to_prepare_leaving_to_leaving_to_unsubscribed() -> None:
    c = stable_pair()
    a = c.nodes["a"]
    owned = c.owned("a")
    a.hold_commits = True
    c.handle("a", Leave())
    assert a.member.state is MemberState.PREPARE_LEAVING
    c.release("a")
    assert (ListenerKind.REVOKED, tuple(sorted(owned))) in a.listener
    leave = a.sent[-1]
    assert isinstance(leave, ConsumerGroupHeartbeatRequest)
    assert leave.member_epoch == -1
    assert a.member.state is MemberState.UNSUBSCRIBED
    assert c.group().member("a") is None
    c.run(3_000)
    assert c.owned("b") == ALL


def _stale(commit_response: OffsetCommitResponse) -> OffsetCommitResponse:
    return OffsetCommitResponse(
        errors=tuple((tp, KafkaErrorCode.STALE_MEMBER_EPOCH) for tp, _ in commit_response.errors)
    )


def test_a_leaving_member_takes_the_epoch_of_a_heartbeat_in_flight_for_its_commit() -> None:
    c = stable_pair()
    a = c.nodes["a"]
    a.hold = True
    c.run(1_500)  # a heartbeat of a's is in flight, held
    [(hb_rid, heartbeat)] = a.held
    epoch = a.member.member_epoch
    c.add("c")
    c.run(200)  # the group moves on: a's next heartbeat answer will carry a newer epoch
    a.held = []
    c.handle("a", Leave())
    assert a.member.state is MemberState.PREPARE_LEAVING
    [(commit_rid, answer)] = a.held
    assert a.commits[-1].generation_id == epoch
    a.held, a.hold = [], False
    c.answer("a", hb_rid, heartbeat)  # arrives while preparing to leave
    assert a.member.state is MemberState.PREPARE_LEAVING
    c.handle("a", ResponseReceived(request_id=commit_rid, response=_stale(answer)))
    c.poll("a")
    first, second = a.commits[-2:]
    assert second.generation_id > first.generation_id == epoch
    assert a.member.state is MemberState.UNSUBSCRIBED
    assert not any("revoking anyway" in e.reason for e in a.errors)


def test_a_leaving_member_with_no_newer_epoch_coming_revokes_at_once_on_a_stale_commit() -> None:
    c = stable_pair()
    a = c.nodes["a"]
    a.hold_commits = True
    commits = len(a.commits)
    c.handle("a", Leave())
    [(commit_rid, answer)] = a.held
    a.held, a.hold_commits = [], False
    c.handle("a", ResponseReceived(request_id=commit_rid, response=_stale(answer)))
    assert len(a.commits) == commits + 1
    assert any("STALE_MEMBER_EPOCH" in e.reason for e in a.errors)
    assert a.member.state is MemberState.UNSUBSCRIBED


def test_static_member_leaves_with_minus_two_and_its_successor_takes_over() -> None:
    c = Cluster()
    a = c.add("a", group_instance_id="i-a")
    c.add("b")
    c.run(3_000)
    owned = c.owned("a")
    epoch = a.member.member_epoch
    c.handle("a", Leave())
    assert a.sent[-1].member_epoch == -2
    assert a.member.state is MemberState.UNSUBSCRIBED
    c.run(2_000)
    assert c.owned("b") != ALL  # nobody takes a static member's partitions while it is away
    a2 = c.add("a2", group_instance_id="i-a")
    c.run(2_000)
    assert c.owned("a2") == owned
    assert a2.member.member_epoch == epoch
    assert c.group().member("a") is None


def test_poll_timer_expired_to_stale_to_joining() -> None:
    c = stable_pair()
    a = c.nodes["a"]
    owned = c.owned("a")
    c.handle("a", PollTimerExpired())
    assert a.member.state is MemberState.STALE
    assert (ListenerKind.LOST, tuple(sorted(owned))) in a.listener
    assert a.sent[-1].member_epoch == -1
    c.run(3_000)
    assert c.owned("b") == ALL
    c.handle("a", ApplicationPolled())
    assert a.member.state is MemberState.JOINING
    c.run(3_000)
    assert a.member.state is MemberState.STABLE
    c.assert_exclusive()


def test_enforce_rebalance_with_a_server_assignor_is_a_noop() -> None:
    c = stable_pair()
    a = c.nodes["a"]
    epoch = c.group().group_epoch
    assert a.member.enforce_rebalance("why", c.now) is False
    c.run(2_000)
    assert c.group().group_epoch == epoch
