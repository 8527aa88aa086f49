"""A member whose session lapsed asks the coordinator under its epoch before rejoining at 0
(:mod:`streamtasks.membership.consumer.lapse`): a vouching answer gives it back what the answer
assigns, ``FENCED_MEMBER_EPOCH`` / ``UNKNOWN_MEMBER_ID`` make it rejoin at epoch 0 as before."""

from __future__ import annotations

from streamtasks.membership.classic import FindCoordinator, ListenerKind
from streamtasks.membership.consumer import MemberState, ResponseReceived, SendRequest
from streamtasks.protocol.consumer_group import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    HeartbeatAssignment,
    TopicIdPartitions,
)
from streamtasks.protocol.errors import KafkaErrorCode
from tests.membership.consumer.helpers import Cluster, Node, topic_id
from tests.membership.consumer.test_coordinator_restart import SESSION_MS, heartbeats, stable_pair


def lapsed(node: Node) -> bool:
    return any("session timeout" in e.reason for e in node.errors)


def held_question(c: Cluster, node: Node) -> tuple[int, ConsumerGroupHeartbeatRequest]:
    """Hold the member's requests past its session: it gives its partitions up and asks; the
    question, held."""
    node.hold = True
    c.run(SESSION_MS + 500)
    assert lapsed(node)
    assert node.member.owned_partitions == frozenset()
    rid, request = node.held[-1]
    assert isinstance(request, ConsumerGroupHeartbeatRequest)
    node.held.clear()
    node.hold = False
    return rid, request


def test_the_coordinator_that_loads_the_group_vouches_and_the_partitions_come_back() -> None:
    """The coordinator dies for longer than the session: the members give their partitions up,
    then ask the one that loads the group under their epochs, which vouches (sessions restart
    on load): the same partitions at the same epochs, no rebalance."""
    c = stable_pair()
    before = {n: (c.owned(n), c.nodes[n].member.member_epoch) for n in c.nodes}
    group_epoch = c.group().group_epoch
    c.kill()
    c.run(SESSION_MS + 1_000)
    for name, n in c.nodes.items():
        assert lapsed(n)
        assert c.owned(name) == frozenset()
        assert (ListenerKind.LOST, tuple(sorted(before[name][0]))) in n.listener
        assert n.member.lapsed_epoch == before[name][1]
        n.sent.clear()
        n.listener.clear()
    c.restart()
    c.run(2_000)
    for name, n in c.nodes.items():
        first = heartbeats(n)[0]
        assert (first.member_id, first.member_epoch) == (name, before[name][1])  # not 0
        assert first.topic_partitions == ()  # full, owning nothing
        assert n.listener == [(ListenerKind.ASSIGNED, tuple(sorted(before[name][0])))]
        assert n.member.lapsed_taken_back == 1
        assert n.member.lapsed_epoch == 0
        assert n.member.state is MemberState.STABLE
    assert {n: (c.owned(n), c.nodes[n].member.member_epoch) for n in c.nodes} == before
    assert c.group().group_epoch == group_epoch
    c.assert_exclusive()


def test_a_vouching_answer_gives_back_only_what_it_assigns() -> None:
    """The answer assigns part of what the member owned at E (the rest is pending revocation
    on the coordinator's side, or moved on): only that part is taken back, at the answer's epoch."""
    c = stable_pair()
    a = c.nodes["a"]
    epoch, owned = a.member.member_epoch, sorted(c.owned("a"))
    assert len(owned) == 2
    rid, question = held_question(c, a)
    assert (question.member_epoch, question.topic_partitions) == (epoch, ())
    a.listener.clear()
    keep = owned[0]
    answer = ConsumerGroupHeartbeatResponse(
        error=KafkaErrorCode.NONE,
        member_epoch=epoch + 1,
        heartbeat_interval_ms=1_000,
        assignment=HeartbeatAssignment(
            topic_partitions=(TopicIdPartitions(topic_id=topic_id(keep.topic), partitions=(keep.partition,)),)
        ),
    )
    a.hold = True
    c.handle("a", ResponseReceived(request_id=rid, response=answer))
    assert c.owned("a") == frozenset({keep})
    assert a.listener == [(ListenerKind.ASSIGNED, (keep,))]
    assert a.member.member_epoch == epoch + 1
    assert a.member.lapsed_taken_back == 1


def test_fenced_member_epoch_makes_it_rejoin_at_epoch_0() -> None:
    c = stable_pair()
    a = c.nodes["a"]
    rid, question = held_question(c, a)
    assert question.member_epoch > 0
    fenced = ConsumerGroupHeartbeatResponse(
        error=KafkaErrorCode.FENCED_MEMBER_EPOCH, member_epoch=0, heartbeat_interval_ms=0
    )
    a.hold = True
    a.listener.clear()
    c.handle("a", ResponseReceived(request_id=rid, response=fenced))
    assert a.member.state is MemberState.FENCED
    assert (a.member.lapsed_epoch, a.member.lapsed_taken_back) == (0, 0)
    assert a.listener == []  # nothing was owned, nothing taken
    c.poll("a")
    rejoin = a.sent[-1]
    assert isinstance(rejoin, ConsumerGroupHeartbeatRequest)
    assert (rejoin.member_id, rejoin.member_epoch) == ("a", 0)


def test_a_member_the_coordinator_expired_is_answered_unknown_and_rejoins() -> None:
    """The coordinator expired the member before the question came (its timer ran): the
    question is answered UNKNOWN_MEMBER_ID, the member rejoins at epoch 0 and the group
    settles with every partition owned once."""
    c = stable_pair()
    a = c.nodes["a"]
    rid, question = held_question(c, a)
    c.run(1_000)  # the coordinator's expiry of a has run by now
    assert c.group().member("a") is None
    c.answer("a", rid, question)
    assert any(e.code is KafkaErrorCode.UNKNOWN_MEMBER_ID for e in a.errors)
    assert a.member.lapsed_taken_back == 0
    c.run(4_000)
    assert any(r.member_epoch == 0 for r in heartbeats(a))
    assert a.member.state is MemberState.STABLE
    c.assert_exclusive()
    assert len(c.owned("a") | c.owned("b")) == 4


def test_a_silent_coordinator_is_looked_up_again_before_the_question() -> None:
    """The coordinator hangs (nothing answered): at the lapse the member looks it up again,
    saying it fell silent (``FindCoordinator.silent``: the driver drops the connection to it,
    failing the application's commit waiting there, and asks the other bootstrap servers
    first), and sends its question only to the coordinator that lookup finds: before, the
    question went to the hung broker and waited there until its request timeout."""
    c = stable_pair()
    node = next(iter(c.nodes.values()))
    node.actions.clear()
    node.hold = True
    c.run(SESSION_MS + 500)
    assert lapsed(node)
    finds = [(i, a) for i, a in enumerate(node.actions) if isinstance(a, FindCoordinator)]
    assert [a.silent for _, a in finds][-1:] == [True]  # (earlier: a request's own timeout)
    question = [
        i
        for i, a in enumerate(node.actions)
        if isinstance(a, SendRequest)
        and a.request.member_epoch == node.member.lapsed_epoch
        and isinstance(a.request, ConsumerGroupHeartbeatRequest)
        and a.request.topic_partitions == ()
    ]
    assert question
    assert question[0] > finds[-1][0]
