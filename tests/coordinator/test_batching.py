"""Target batching (``CoordinatorConfig.assignment_interval_ms``, Kafka's KIP-1263): after a
server-side target is computed the next one waits for the interval; the epoch bumps made
meanwhile are served by one assignor run when the interval timer fires."""

from __future__ import annotations

import pytest

from streamtasks.coordinator import (
    CoordinatorConfig,
    GroupCoordinator,
    GroupState,
    MemberState,
    TargetAssignmentMemberRecord,
    TargetAssignmentMetadataRecord,
    TimerKey,
    TimerKind,
)
from streamtasks.errors import ConfigError
from tests.coordinator.support import GROUP, Harness, assert_exclusive, tps, wire

INTERVAL = 1_000
TIMER = TimerKey(TimerKind.ASSIGNMENT_INTERVAL, GROUP)


def batching(topics: dict[str, int] | None = None) -> Harness:
    return Harness(topics or {"foo": 6}, config=CoordinatorConfig(assignment_interval_ms=INTERVAL))


def targets_written(h: Harness, since: int) -> list[object]:
    return [
        r
        for r in h.log[since:]
        if isinstance(r, TargetAssignmentMemberRecord | TargetAssignmentMetadataRecord)
    ]


def test_first_target_is_computed_at_once_and_arms_the_interval() -> None:
    h = batching()
    response = h.join("A")
    assert response.member_epoch == 1
    assert h.members["A"].owned == tps(foo=range(6))
    assert h.coordinator.timer_deadline(TIMER) == INTERVAL


def test_bumps_within_the_interval_wait_for_one_assignor_run() -> None:
    h = batching()
    h.join("A")
    mark = len(h.log)
    h.now = 10
    h.join("B")
    h.now = 20
    h.join("C")
    group = h.group
    assert (group.group_epoch, group.assignment_epoch) == (3, 1)
    assert group.state is GroupState.ASSIGNING
    assert targets_written(h, mark) == []
    # the newcomers wait at the last target's epoch with nothing, A keeps everything
    assert (h.current("B").member_epoch, h.current("B").assigned) == (1, tps())
    assert h.heartbeat("A").member_epoch == 1

    h.advance(INTERVAL - 20)  # t = 1,000: the interval timer's write
    metadata = [r for r in targets_written(h, mark) if isinstance(r, TargetAssignmentMetadataRecord)]
    assert [r.assignment_epoch for r in metadata] == [3]
    assert h.coordinator.timer_deadline(TIMER) == 2 * INTERVAL
    h.settle()
    assert h.group.state is GroupState.STABLE
    assert {m: len(h.members[m].owned) for m in "ABC"} == {"A": 2, "B": 2, "C": 2}
    assert_exclusive(h.coordinator)

    mark = len(h.log)
    h.advance(INTERVAL)  # nothing owed: no records, and the timer is not rearmed
    assert h.log[mark:] == []
    assert h.coordinator.timer_deadline(TIMER) is None
    h.join("D")  # the interval is over: computed at once
    assert h.group.assignment_epoch == h.group.group_epoch
    assert h.replayed().snapshot() == h.coordinator.snapshot()


def test_a_deferred_join_writes_no_target_records() -> None:
    h = batching()
    h.join("A")
    before = len(h.log)
    h.join("B")
    kinds = sorted(type(r).__name__ for r in h.log[before:])
    assert kinds == ["CurrentMemberAssignmentRecord", "GroupEpochRecord", "MemberMetadataRecord"]


def test_leave_while_deferred_frees_the_partitions_for_the_next_target() -> None:
    h = batching()
    h.join("A")
    h.advance(INTERVAL)
    h.join("B")
    h.settle()
    assert h.group.state is GroupState.STABLE
    h.now += 10
    h.heartbeat("B", member_epoch=-1)
    assert h.group.assignment_epoch < h.group.group_epoch
    h.advance(INTERVAL)
    h.settle()
    assert h.members["A"].owned == tps(foo=range(6))


def test_unsubscribed_topics_are_revoked_without_waiting_for_the_target() -> None:
    h = batching({"foo": 2, "bar": 2})
    h.join("A", topics=("foo", "bar"))
    h.now = 10
    response = h.heartbeat("A", subscribed_topic_names=("foo",))
    assert h.group.assignment_epoch < h.group.group_epoch
    assert response.assignment is not None
    current = h.current("A")
    assert current.state is MemberState.UNREVOKED_PARTITIONS
    assert current.pending_revocation == tps(bar=[0, 1])
    assert h.members["A"].owned == tps(foo=[0, 1])


def test_loading_mid_interval_computes_the_owed_target_at_once() -> None:
    h = batching()
    h.join("A")
    h.join("B")
    assert h.group.assignment_epoch < h.group.group_epoch
    fresh = GroupCoordinator(h.coordinator.config, image=h.coordinator.image)
    resumed = fresh.load(h.log, h.now)
    assert any(isinstance(r, TargetAssignmentMetadataRecord) for r in resumed.records)
    fresh.apply(resumed)
    group = fresh.group(GROUP)
    assert group is not None
    assert group.assignment_epoch == group.group_epoch
    assert fresh.timer_deadline(TIMER) == h.now + INTERVAL


def test_delete_group_cancels_the_interval_timer() -> None:
    h = batching()
    h.join("A")
    h.heartbeat("A", member_epoch=-1, topic_partitions=wire(h.members["A"].owned))
    h.apply(h.coordinator.delete_group(GROUP, h.now))
    assert h.coordinator.timer_deadline(TIMER) is None


def test_negative_interval_is_a_config_error() -> None:
    with pytest.raises(ConfigError):
        CoordinatorConfig(assignment_interval_ms=-1)
