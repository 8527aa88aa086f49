"""An epoch-0 heartbeat (a join) from a member id that is still in the group.

It is either the retry of a join whose response was lost (the member owns nothing yet) or a
stale copy of an old join delivered late (a duplicated or retried request) while the member
owns partitions, perhaps some it is still revoking. The coordinator cannot tell the two apart,
so a join never resets a present member: its epoch and current assignment stay, the empty
owned list of the join acknowledges no revocation, and the response repeats the member's epoch
and assignment in full (Kafka's lost-response rule, which keeps the member's state, and its
KAFKA-19233 rejoin; see docs/membership.md, "A join from a member that is still in the group").
"""

from __future__ import annotations

from streamtasks.coordinator import MemberState, TimerKey, TimerKind, TopicPartitionSet
from streamtasks.protocol.consumer_group import ConsumerGroupHeartbeatRequest
from streamtasks.protocol.errors import KafkaErrorCode
from tests.coordinator.support import GROUP, Harness, assert_exclusive, tps, wire


def stale_join(h: Harness, member_id: str) -> ConsumerGroupHeartbeatRequest:
    """The member's join request, as it sent it when it joined."""
    return ConsumerGroupHeartbeatRequest(
        group_id=GROUP,
        member_id=member_id,
        member_epoch=0,
        topic_partitions=(),
        **h.members[member_id].joined_with,
    )


def test_stale_join_while_revoking_releases_nothing() -> None:
    h = Harness({"foo": 4})
    h.join("A", rebalance_timeout_ms=5_000)
    old_join = stale_join(h, "A")
    assert h.members["A"].owned == tps(foo=[0, 1, 2, 3])
    h.join("B")
    h.heartbeat("A", topic_partitions=None)  # A is told to revoke; its callback is still running
    revoking = h.current("A")
    assert revoking.state is MemberState.UNREVOKED_PARTITIONS
    moving = revoking.pending_revocation
    assert moving
    a_really_owns = tps(foo=[0, 1, 2, 3])
    deadline = h.coordinator.timer_deadline(TimerKey(TimerKind.REVOCATION, GROUP, "A"))

    h.now += 10
    late = h.apply(h.coordinator.heartbeat(old_join, h.now))  # the old join, delivered late
    assert late.error is KafkaErrorCode.NONE
    assert late.member_epoch == revoking.member_epoch
    assert late.assignment is not None
    assert TopicPartitionSet.from_wire(late.assignment.topic_partitions) == revoking.assigned
    after = h.current("A")
    assert (after.member_epoch, after.state, after.pending_revocation) == (
        revoking.member_epoch,
        MemberState.UNREVOKED_PARTITIONS,
        moving,
    )
    for pair in moving.pairs():
        assert h.group.owner(*pair) == "A"
    # a late copy of a request does not buy the member more time to revoke
    assert h.coordinator.timer_deadline(TimerKey(TimerKind.REVOCATION, GROUP, "A")) == deadline

    h.heartbeat("B")
    assert not (h.members["B"].owned.intersection(a_really_owns)), "B got a partition A still owns"
    assert_exclusive(h.coordinator)

    # A acknowledges for real; only then does B get the partitions.
    h.heartbeat("A")
    assert h.current("A").state is MemberState.STABLE
    h.heartbeat("B")
    assert h.members["B"].owned == h.target("B")
    assert_exclusive(h.coordinator)
    assert h.replayed().snapshot() == h.coordinator.snapshot()


def test_stale_join_of_a_stable_member_keeps_its_epoch_and_partitions() -> None:
    h = Harness({"foo": 4})
    h.join("A")
    old_join = stale_join(h, "A")
    h.join("B")
    h.settle()
    before = h.current("A")
    log = len(h.log)
    late = h.apply(h.coordinator.heartbeat(old_join, h.now))
    assert (late.error, late.member_epoch) == (KafkaErrorCode.NONE, before.member_epoch)
    assert late.assignment is not None
    assert TopicPartitionSet.from_wire(late.assignment.topic_partitions) == before.assigned
    assert h.current("A") == before
    assert len(h.log) == log  # nothing changed, nothing written


def test_retried_join_after_a_lost_response_gets_the_same_assignment() -> None:
    h = Harness({"foo": 4})
    h.join("A")
    h.settle()
    first = h.coordinator.heartbeat(_join("B"), h.now)
    h.apply(first)  # B joined; the response never reached B
    epoch = h.group.group_epoch
    retry = h.apply(h.coordinator.heartbeat(_join("B"), h.now))
    assert retry.error is KafkaErrorCode.NONE
    assert h.group.group_epoch == epoch  # no second rebalance
    assert retry.member_epoch == first.response.member_epoch
    assert retry.assignment == first.response.assignment


def test_join_from_a_present_member_with_a_new_subscription_still_bumps() -> None:
    h = Harness({"foo": 2, "bar": 2})
    h.join("A")
    epoch = h.group.group_epoch
    response = h.join("A", topics=("foo", "bar"))
    assert response.error is KafkaErrorCode.NONE
    assert h.group.group_epoch == epoch + 1
    h.settle()
    assert h.members["A"].owned == tps(foo=[0, 1], bar=[0, 1])
    assert h.heartbeat("A", topic_partitions=wire(h.members["A"].owned)).assignment is None


def _join(member_id: str) -> ConsumerGroupHeartbeatRequest:
    return ConsumerGroupHeartbeatRequest(
        group_id=GROUP,
        member_id=member_id,
        member_epoch=0,
        rebalance_timeout_ms=30_000,
        subscribed_topic_names=("foo",),
        topic_partitions=(),
    )
