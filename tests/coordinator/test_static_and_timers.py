"""Static members (epoch -2, instance id takeover, UNRELEASED_INSTANCE_ID) and the timers:
session expiry, revocation timeout, rearming on load."""

from __future__ import annotations

from streamtasks.coordinator import GroupState, MemberState, TimerKey, TimerKind
from streamtasks.protocol.errors import KafkaErrorCode
from tests.coordinator.support import GROUP, Harness, assert_exclusive, tps


def static_pair() -> Harness:
    h = Harness({"foo": 4})
    h.join("A", instance_id="i-a")
    h.join("B", instance_id="i-b")
    h.settle()
    return h


def test_static_leave_keeps_partitions_and_epoch() -> None:
    h = static_pair()
    epoch, owned = h.group.group_epoch, h.members["A"].owned
    response = h.heartbeat("A", member_epoch=-2, instance_id="i-a")
    assert (response.error, response.member_epoch) == (KafkaErrorCode.NONE, -2)
    assert h.group.group_epoch == epoch  # no rebalance
    current = h.current("A")
    assert (current.member_epoch, current.previous_member_epoch, current.assigned) == (-2, epoch, owned)
    assert h.group.state is GroupState.RECONCILING


def test_static_rejoin_takes_over_the_old_members_place() -> None:
    h = static_pair()
    epoch, owned = h.group.group_epoch, h.members["A"].owned
    h.heartbeat("A", member_epoch=-2, instance_id="i-a")
    response = h.join("A2", instance_id="i-a")
    assert (response.error, response.member_epoch) == (KafkaErrorCode.NONE, epoch)
    assert h.members["A2"].owned == owned
    assert h.group.member("A") is None
    assert h.group.static_member("i-a") == "A2"
    assert h.group.group_epoch == epoch
    assert h.group.state is GroupState.STABLE
    assert h.coordinator.timer_deadline(TimerKey(TimerKind.SESSION, GROUP, "A")) is None
    assert_exclusive(h.coordinator)


def test_static_rejoin_with_the_same_member_id() -> None:
    h = static_pair()
    owned = h.members["A"].owned
    h.heartbeat("A", member_epoch=-2, instance_id="i-a")
    response = h.join("A", instance_id="i-a")
    assert response.error is KafkaErrorCode.NONE
    assert h.members["A"].owned == owned


def test_second_member_with_a_held_instance_id_is_unreleased() -> None:
    h = static_pair()
    response = h.join("A2", instance_id="i-a")
    assert response.error is KafkaErrorCode.UNRELEASED_INSTANCE_ID
    assert h.group.member("A2") is None


def test_static_member_that_does_not_return_is_removed_after_the_session() -> None:
    h = static_pair()
    h.heartbeat("A", member_epoch=-2, instance_id="i-a")
    epoch = h.group.group_epoch
    session = h.coordinator.config.session_timeout_ms
    h.now += session - 1
    h.heartbeat("B")
    assert h.advance(1) != []
    assert h.group.member("A") is None
    assert h.group.group_epoch == epoch + 1
    h.settle()
    assert h.members["B"].owned == tps(foo=[0, 1, 2, 3])


def test_session_expiry_removes_and_bumps() -> None:
    h = static_pair()
    session = h.coordinator.config.session_timeout_ms
    h.now += session // 2
    h.heartbeat("B")
    assert h.advance(session // 2) != []  # A's deadline
    assert h.group.member("A") is None
    assert h.advance(session) != []  # B's too
    assert h.group.state is GroupState.EMPTY


def test_revocation_timeout_fences_a_member_that_keeps_its_partitions() -> None:
    h = Harness({"foo": 2})
    h.join("A", rebalance_timeout_ms=500)
    h.join("B")
    h.heartbeat("A", topic_partitions=None)  # told to revoke, never acknowledges
    assert h.current("A").state is MemberState.UNREVOKED_PARTITIONS
    h.now += 400
    h.heartbeat("A", topic_partitions=None)  # heartbeats keep the session, not the revocation
    h.heartbeat("B")
    h.advance(100)
    assert h.group.member("A") is None
    h.heartbeat("B")
    assert h.members["B"].owned == tps(foo=[0, 1])


def test_revocation_timer_cancelled_on_acknowledgement() -> None:
    h = Harness({"foo": 2})
    h.join("A", rebalance_timeout_ms=500)
    h.join("B")
    h.heartbeat("A")
    key = TimerKey(TimerKind.REVOCATION, GROUP, "A")
    assert h.coordinator.timer_deadline(key) == 500
    h.heartbeat("A")
    assert h.coordinator.timer_deadline(key) is None


def test_timer_write_before_its_deadline_is_a_no_op() -> None:
    h = Harness()
    h.join("A")
    result = h.coordinator.on_timer(TimerKey(TimerKind.SESSION, GROUP, "A"), 1)
    assert (result.records, result.timers) == ((), ())


def test_load_rearms_timers_from_now() -> None:
    h = Harness({"foo": 2})
    h.join("A", rebalance_timeout_ms=700)
    h.join("B")
    h.heartbeat("A")  # A revoking
    fresh = h.replayed()
    resumed = fresh.load(h.log, 10_000)
    assert resumed.records == ()
    assert fresh.snapshot() == h.coordinator.snapshot()
    session = fresh.config.session_timeout_ms
    assert fresh.timer_deadline(TimerKey(TimerKind.SESSION, GROUP, "B")) == 10_000 + session
    assert fresh.timer_deadline(TimerKey(TimerKind.REVOCATION, GROUP, "A")) == 10_700
