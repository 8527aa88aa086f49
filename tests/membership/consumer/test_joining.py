"""Joining, reconciling, acknowledging: the way into the group, against the real coordinator."""

from __future__ import annotations

from streamtasks.membership.classic import ListenerKind, Subscribe
from streamtasks.membership.consumer import MemberState, SendRequest
from streamtasks.protocol.consumer_group import ConsumerGroupHeartbeatRequest
from tests.ids import tps
from tests.membership.consumer.helpers import Cluster


def heartbeats(node: object) -> list[ConsumerGroupHeartbeatRequest]:
    return [r for r in node.sent if isinstance(r, ConsumerGroupHeartbeatRequest)]  # type: ignore[attr-defined]


def test_unsubscribed_to_joining() -> None:
    c = Cluster()
    a = c.add("a", topics=())
    assert a.member.state is MemberState.UNSUBSCRIBED
    c.handle("a", Subscribe(topics=("foo",)))
    assert a.member.state is MemberState.JOINING
    c.tick()
    c.tick()
    join = heartbeats(a)[0]
    assert (join.member_epoch, join.member_id, join.subscribed_topic_names) == (0, "a", ("foo",))
    assert join.rebalance_timeout_ms == 15_000
    assert join.topic_partitions == ()


def test_joining_to_reconciling() -> None:
    c = Cluster()
    a = c.add("a")
    c.tick()
    states = []
    a.member.handle  # noqa: B018 (the state after the join answer)
    c.tick()
    states.append(a.member.state)
    assert a.member.member_epoch == 1
    assert a.listener == [(ListenerKind.ASSIGNED, tuple(sorted(tps("foo-0", "foo-1", "foo-2", "foo-3"))))]
    # RECONCILING is passed through within the answer (nothing to revoke); the ack is due
    assert states == [MemberState.ACKNOWLEDGING]


def test_reconciling_to_acknowledging_sends_owned_at_once() -> None:
    c = Cluster()
    a = c.add("a")
    c.tick()
    c.tick()
    actions = a.member.poll(c.now)
    sends = [x for x in actions if isinstance(x, SendRequest)]
    assert len(sends) == 1
    ack = sends[0].request
    assert isinstance(ack, ConsumerGroupHeartbeatRequest)
    assert ack.member_epoch == 1
    assert ack.topic_partitions is not None
    assert ack.topic_partitions[0].partitions == (0, 1, 2, 3)
    assert a.member.next_deadline_ms() is not None


def test_acknowledging_to_stable() -> None:
    c = Cluster()
    a = c.add("a")
    for _ in range(3):
        c.tick()
    assert a.member.state is MemberState.STABLE
    assert c.group().state.value == "Stable"


def test_heartbeat_sends_only_what_changed() -> None:
    c = Cluster()
    a = c.add("a", group_instance_id="i-a", rack="r1")
    c.run(3_000)
    steady = heartbeats(a)[-1]
    assert steady.member_epoch == 1
    assert steady.subscribed_topic_names is None
    assert steady.topic_partitions is None
    assert steady.rebalance_timeout_ms == -1
    assert steady.rack_id is None
    assert steady.instance_id == "i-a"
    c.handle("a", Subscribe(topics=("foo", "bar")))
    c.tick()
    changed = heartbeats(a)[-1]
    assert changed.subscribed_topic_names == ("bar", "foo")
    assert changed.topic_partitions is None


def test_a_failed_heartbeat_makes_the_next_one_full() -> None:
    c = Cluster()
    a = c.add("a")
    c.run(3_000)
    a.hold = True
    c.run(1_000)
    assert a.held
    a.held.clear()
    a.hold = False
    c.run(6_000)  # the held heartbeat times out (request timeout 5 s): the coordinator is looked up again
    full = [h for h in heartbeats(a) if h.rebalance_timeout_ms > 0 and h.member_epoch > 0]
    assert full
    assert full[-1].topic_partitions is not None
    assert full[-1].subscribed_topic_names == ("foo",)
    assert a.member.state is MemberState.STABLE


def test_two_members_split_the_topic_without_overlap() -> None:
    c = Cluster()
    c.add("a")
    c.run(2_000)
    c.add("b")
    for _ in range(40):
        c.tick(100)
        c.assert_exclusive()
    assert c.owned("a") | c.owned("b") == tps("foo-0", "foo-1", "foo-2", "foo-3")
    assert len(c.owned("a")) == len(c.owned("b")) == 2
    assert {n.member.state for n in c.nodes.values()} == {MemberState.STABLE}


def test_partitions_of_unknown_topic_ids_are_taken_once_metadata_names_them() -> None:
    from streamtasks.membership.consumer import MetadataUpdated

    c = Cluster()
    a = c.add("a")
    c.handle("a", MetadataUpdated(partitions_per_topic={}, topic_ids={}))
    c.run(2_000)
    assert c.owned("a") == frozenset()
    assert any("not in the metadata" in e.reason for e in a.errors)
    c.handle("a", c.metadata_event())
    c.run(1_000)
    assert c.owned("a") == tps("foo-0", "foo-1", "foo-2", "foo-3")
    assert a.member.state is MemberState.STABLE
