"""KIP-848's case studies (seed lines ~2185-2545), step by step, with the server-side ``uniform``
assignor: each assertion is a state the KIP lists."""

from __future__ import annotations

from streamtasks.coordinator import (
    CurrentMemberAssignmentRecord,
    GroupEpochRecord,
    GroupState,
    MemberMetadataRecord,
    MemberState,
    PartitionMetadataRecord,
    TargetAssignmentMemberRecord,
    TargetAssignmentMetadataRecord,
    TopicPartitionSet,
)
from tests.coordinator.support import GROUP, Harness, Member, assert_exclusive, image, tps


def pending(response: object) -> TopicPartitionSet:
    assignment = response.assignment  # type: ignore[attr-defined]
    return TopicPartitionSet.from_wire(assignment.pending_topic_partitions)


def assigned(response: object) -> TopicPartitionSet:
    assignment = response.assignment  # type: ignore[attr-defined]
    return TopicPartitionSet.from_wire(assignment.topic_partitions)


def test_case_study_join_then_two_more_members() -> None:
    """'Let's assume that the group is subscribed to the topic foo which has 3 partitions.'"""
    h = Harness({"foo": 3})
    # A joins: group epoch 1, target epoch 1 = all partitions; A has nothing to revoke: epoch 1.
    r = h.join("A")
    assert (h.group.group_epoch, h.group.assignment_epoch) == (1, 1)
    assert h.target("A") == tps(foo=[0, 1, 2])
    assert (r.member_epoch, assigned(r)) == (1, tps(foo=[0, 1, 2]))

    # B joins: epoch 2, target A=[0, 1], B=[2]; B moves to epoch 2 with foo-2 pending.
    r = h.join("B")
    assert (h.group.group_epoch, h.group.assignment_epoch) == (2, 2)
    assert (h.target("A"), h.target("B")) == (tps(foo=[0, 1]), tps(foo=[2]))
    assert (r.member_epoch, assigned(r), pending(r)) == (2, tps(), tps(foo=[2]))
    assert h.current("B").state is MemberState.UNRELEASED_PARTITIONS

    # A heartbeats: it is asked to revoke foo-2 and stays in epoch 1.
    r = h.heartbeat("A")
    assert (r.member_epoch, assigned(r)) == (1, tps(foo=[0, 1]))
    assert h.current("A").pending_revocation == tps(foo=[2])
    # A acknowledges: epoch 2, foo-2 released.
    r = h.heartbeat("A")
    assert r.member_epoch == 2
    assert h.group.owner(*next(tps(foo=[2]).pairs())) is None
    # B heartbeats and gets foo-2.
    r = h.heartbeat("B")
    assert (r.member_epoch, assigned(r), pending(r)) == (2, tps(foo=[2]), tps())
    assert h.group.state is GroupState.STABLE

    # C joins: epoch 3, target A=[0], B=[2], C=[1].
    r = h.join("C")
    assert h.group.group_epoch == 3
    assert (h.target("A"), h.target("B"), h.target("C")) == (tps(foo=[0]), tps(foo=[2]), tps(foo=[1]))
    assert (r.member_epoch, assigned(r), pending(r)) == (3, tps(), tps(foo=[1]))
    # B has nothing to revoke: epoch 3 directly.
    assert h.heartbeat("B").member_epoch == 3
    # A revokes foo-1, then moves to 3; C gets foo-1.
    r = h.heartbeat("A")
    assert (r.member_epoch, assigned(r)) == (2, tps(foo=[0]))
    assert h.heartbeat("C").assignment is None  # nothing changed for C yet
    assert h.heartbeat("A").member_epoch == 3
    r = h.heartbeat("C")
    assert (r.member_epoch, assigned(r)) == (3, tps(foo=[1]))
    assert h.group.state is GroupState.STABLE
    assert_exclusive(h.coordinator)


def seed(h: Harness, epoch: int, owned: dict[str, TopicPartitionSet], topics: dict[str, int]) -> None:
    """A stable group at ``epoch`` where each member owns its target (loaded from records)."""
    img = image(topics)
    h.log += [
        GroupEpochRecord(group_id=GROUP, epoch=epoch),
        PartitionMetadataRecord(group_id=GROUP, topics=img.topics),
    ]
    for member_id, partitions in owned.items():
        h.log += [
            MemberMetadataRecord(
                group_id=GROUP,
                member_id=member_id,
                subscribed_topic_names=("foo",),
                rebalance_timeout_ms=30_000,
            ),
            TargetAssignmentMemberRecord(group_id=GROUP, member_id=member_id, partitions=partitions),
            CurrentMemberAssignmentRecord(
                group_id=GROUP,
                member_id=member_id,
                member_epoch=epoch,
                previous_member_epoch=epoch - 1,
                assigned=partitions,
            ),
        ]
        h.members[member_id] = Member(member_id, epoch, partitions)
    h.log.append(
        TargetAssignmentMetadataRecord(group_id=GROUP, assignment_epoch=epoch, assignor_name="uniform")
    )
    h.apply(h.coordinator.load(h.log, h.now))


def test_case_study_scale_out_from_epoch_21() -> None:
    h = Harness({"foo": 6})
    seed(h, 21, {"A": tps(foo=[0, 1, 2]), "B": tps(foo=[3, 4, 5])}, {"foo": 6})
    assert h.group.state is GroupState.STABLE

    # C joins: epoch 22, target A=[0, 1], B=[3, 4], C=[2, 5]; C moves to 22 with nothing yet.
    r = h.join("C")
    assert h.group.group_epoch == h.group.assignment_epoch == 22
    assert (h.target("A"), h.target("B"), h.target("C")) == (
        tps(foo=[0, 1]),
        tps(foo=[3, 4]),
        tps(foo=[2, 5]),
    )
    assert (r.member_epoch, assigned(r), pending(r)) == (22, tps(), tps(foo=[2, 5]))

    assert assigned(h.heartbeat("A")) == tps(foo=[0, 1])  # revoke foo-2
    assert assigned(h.heartbeat("B")) == tps(foo=[3, 4])  # revoke foo-5
    assert h.heartbeat("C").assignment is None  # no change for C
    assert h.heartbeat("A").member_epoch == 22  # acknowledged: foo-2 released
    r = h.heartbeat("C")
    assert (assigned(r), pending(r)) == (tps(foo=[2]), tps(foo=[5]))  # foo-2 now, foo-5 held
    assert h.heartbeat("B").member_epoch == 22  # acknowledged: foo-5 released
    r = h.heartbeat("C")
    assert (assigned(r), pending(r)) == (tps(foo=[2, 5]), tps())
    assert h.group.state is GroupState.STABLE


def test_case_study_member_failure() -> None:
    h = Harness({"foo": 6})
    seed(h, 22, {"A": tps(foo=[0, 1]), "B": tps(foo=[3, 4]), "C": tps(foo=[2, 5])}, {"foo": 6})
    session = h.coordinator.config.session_timeout_ms
    for _ in range(3):
        h.now += session // 3
        h.heartbeat("B")
        h.heartbeat("C")
    # A failed to heartbeat: removed after the session timeout, group epoch 23, new target.
    h.advance(1)
    assert h.group.member("A") is None
    assert h.group.group_epoch == h.group.assignment_epoch == 23
    assert (h.target("B"), h.target("C")) == (tps(foo=[0, 3, 4]), tps(foo=[1, 2, 5]))
    # B and C heartbeat and transition to 23 with their new partitions.
    assert (h.heartbeat("B").member_epoch, h.members["B"].owned) == (23, tps(foo=[0, 3, 4]))
    assert (h.heartbeat("C").member_epoch, h.members["C"].owned) == (23, tps(foo=[1, 2, 5]))
    assert h.group.state is GroupState.STABLE


def test_case_study_partition_added() -> None:
    h = Harness({"foo": 1})
    seed(h, 22, {"A": tps(foo=[0]), "B": tps()}, {"foo": 1})
    # foo-1 is created: the coordinator detects it and bumps the epoch; B gets foo-1.
    h.apply(h.coordinator.on_metadata_image(image({"foo": 2}), h.now))
    assert h.group.group_epoch == h.group.assignment_epoch == 23
    assert (h.target("A"), h.target("B")) == (tps(foo=[0]), tps(foo=[1]))
    assert h.heartbeat("A").member_epoch == 23
    r = h.heartbeat("B")
    assert (r.member_epoch, assigned(r)) == (23, tps(foo=[1]))
    assert h.group.state is GroupState.STABLE
