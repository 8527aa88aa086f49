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
from streamtasks.protocol.consumer_group import ClientAssignor, ConsumerGroupHeartbeatRequest
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


def test_fenced_stray_copy_then_late_join_leaves_the_member_its_partitions() -> None:
    """Simulator seed 9872133 (consumer-client, dup and late copies): a duplicate of a member's
    heartbeat at its previous epoch, without its owned list, is fenced (the member discards
    that answer: its own copy was answered at the new epoch), then a late copy of its old join
    arrives, then the member heartbeats at its epoch. The fence used to remove the member, the
    late join re-created it empty at the assignment epoch it still held, its heartbeat passed,
    and its partitions went to another member while it kept processing them. Kafka's rule: a
    fence only answers FENCED_MEMBER_EPOCH; the member keeps its epoch and partitions."""
    h = Harness({"foo": 4})
    assignors = (ClientAssignor(name="streams", minimum_version=0, maximum_version=0),)
    h.join("A", client_assignors=assignors)
    old_join = stale_join(h, "A")
    h.install("A", h.prepare("A").group_epoch, {"A": tps(foo=[0, 1, 2, 3])})
    h.heartbeat("A", topic_partitions=None)
    h.join("B", client_assignors=assignors)
    _compute(h, {"A": tps(foo=[0, 1]), "B": tps(foo=[2, 3])})
    h.heartbeat("A", topic_partitions=None)  # A revokes 2 and 3
    h.heartbeat("A")
    h.heartbeat("B")
    a = h.current("A")
    assert (a.member_epoch, a.assigned) == (h.group.assignment_epoch, tps(foo=[0, 1]))
    assert h.members["A"].owned == tps(foo=[0, 1])
    epoch = h.group.group_epoch

    stray = h.heartbeat("A", member_epoch=a.previous_member_epoch, topic_partitions=None)
    assert stray.error is KafkaErrorCode.FENCED_MEMBER_EPOCH
    assert h.current("A") == a  # fenced, not removed
    assert h.group.group_epoch == epoch

    late = h.apply(h.coordinator.heartbeat(old_join, h.now))  # nobody reads its answer
    assert (late.error, late.member_epoch) == (KafkaErrorCode.NONE, a.member_epoch)
    real = h.heartbeat("A", topic_partitions=None)
    assert (real.error, real.member_epoch) == (KafkaErrorCode.NONE, a.member_epoch)
    assert h.current("A").assigned == h.members["A"].owned == tps(foo=[0, 1])

    # the next assignment cannot hand A's partitions to B while A holds them
    h.heartbeat("B", rack_id="r")  # B's rack changes: a new assignment is asked for
    _compute(h, {"A": tps(), "B": tps(foo=[0, 1, 2, 3])})
    h.heartbeat("B")
    assert not h.members["B"].owned.intersection(tps(foo=[0, 1])), "B got partitions A still owns"
    assert_exclusive(h.coordinator)
    assert h.replayed().snapshot() == h.coordinator.snapshot()


def _compute(h: Harness, assignment: dict[str, TopicPartitionSet]) -> None:
    """The member the coordinator asked computes ``assignment`` and installs it."""
    request = h.group.client_request
    assert request is not None
    prepared = h.prepare(request.member_id)
    assert h.install(request.member_id, prepared.group_epoch, assignment).error is KafkaErrorCode.NONE


def _join(member_id: str) -> ConsumerGroupHeartbeatRequest:
    return ConsumerGroupHeartbeatRequest(
        group_id=GROUP,
        member_id=member_id,
        member_epoch=0,
        rebalance_timeout_ms=30_000,
        subscribed_topic_names=("foo",),
        topic_partitions=(),
    )
