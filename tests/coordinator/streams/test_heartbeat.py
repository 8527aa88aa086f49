"""StreamsGroupHeartbeat on the streams coordinator: joins, revoke-before-assign, standbys,
statuses, fencing, leaving."""

from __future__ import annotations

from dataclasses import replace

from streamtasks.coordinator.streams import StreamsCoordinatorConfig, StreamsGroupState, StreamsMemberState
from streamtasks.membership.streams.records import tasks_of
from streamtasks.protocol.errors import KafkaErrorCode
from streamtasks.protocol.streams_group import StreamsGroupStatus

from .support import GROUP, READY, Harness, image, topology

ALL = frozenset(("0", p) for p in range(4))


def test_first_member_gets_every_task_and_the_group_is_stable() -> None:
    h = Harness()
    a = h.add("a")
    r = h.beat(a)
    assert r.error is KafkaErrorCode.NONE
    assert a.active == ALL
    assert a.epoch == 1
    assert r.heartbeat_interval_ms == 5_000
    assert r.task_offset_interval_ms == 60_000
    assert r.acceptable_recovery_lag == 10_000
    h.beat(a)
    assert h.coordinator.group_state(GROUP) is StreamsGroupState.STABLE


def test_a_task_goes_to_a_new_member_only_after_its_owner_revoked_it() -> None:
    h = Harness()
    a, b = h.add("a"), h.add("b")
    h.beat(a)
    h.beat(b)  # epoch 2: b's target has two of a's tasks, which a still owns
    g = h.coordinator.group(GROUP)
    assert g is not None
    assert b.active == frozenset()
    assert b.epoch == 2
    assert g.current("b").state is StreamsMemberState.UNRELEASED_TASKS  # type: ignore[union-attr]
    h.beat(a)  # told to keep two: it drops the other two at once (the test member)
    assert len(a.active) == 2
    assert a.epoch == 1
    assert g.current("a").state is StreamsMemberState.UNREVOKED_TASKS  # type: ignore[union-attr]
    h.beat(b)
    assert b.active == frozenset(), "a has not reported the revocation yet"
    h.beat(a)  # reports it owns two: moves to epoch 2
    assert a.epoch == 2
    h.beat(b)
    assert len(b.active) == 2
    assert a.active.isdisjoint(b.active)
    assert h.all_active() == ALL
    h.round()
    assert h.coordinator.group_state(GROUP) is StreamsGroupState.STABLE


def test_standbys_never_share_a_process_with_their_active() -> None:
    h = Harness(StreamsCoordinatorConfig(num_standby_replicas=1))
    for name, process in (("a1", "p1"), ("a2", "p1"), ("b1", "p2")):
        h.add(name, process)
    h.round(4)
    assert h.all_active() == ALL
    by_process: dict[str, set[tuple[str, int]]] = {}
    for m in h.members.values():
        by_process.setdefault(m.process_id, set()).update(m.active)
    for m in h.members.values():
        assert m.standby.isdisjoint(by_process[m.process_id])
    assert frozenset(t for m in h.members.values() for t in m.standby) == ALL


def test_missing_source_topics_leave_the_group_not_ready_until_they_exist() -> None:
    h = Harness(topics={})
    a = h.add("a")
    r = h.beat(a)
    assert [s.status_code for s in r.status or ()] == [StreamsGroupStatus.MISSING_SOURCE_TOPICS]
    assert "input" in (r.status or ())[0].status_detail
    assert a.active == frozenset()
    assert h.coordinator.group_state(GROUP) is StreamsGroupState.NOT_READY
    h.coordinator.set_image(image({"input": 4}))
    r = h.beat(a)
    assert [s.status_code for s in r.status or ()] == [StreamsGroupStatus.MISSING_INTERNAL_TOPICS]
    h.coordinator.set_image(image(READY))
    r = h.beat(a)
    assert r.status == ()
    assert a.active == ALL


def test_wrongly_partitioned_changelog_is_reported() -> None:
    h = Harness(topics={"input": 4, "app-store-changelog": 3})
    r = h.beat(h.add("a"))
    assert [s.status_code for s in r.status or ()] == [StreamsGroupStatus.INCORRECTLY_PARTITIONED_TOPICS]


def test_a_partition_added_to_the_source_bumps_the_epoch_and_adds_tasks() -> None:
    h = Harness()
    a = h.add("a")
    h.round(2)
    h.coordinator.set_image(image({"input": 6, "app-store-changelog": 6}))
    h.round(2)
    assert a.active == frozenset(("0", p) for p in range(6))
    assert a.epoch == 2


def test_stale_and_unknown_members_are_refused() -> None:
    h = Harness()
    a = h.add("a")
    h.beat(a)
    epoch = a.epoch
    a.epoch = 7
    assert h.beat(a).error is KafkaErrorCode.FENCED_MEMBER_EPOCH
    group = h.coordinator.group(GROUP)
    assert group is not None
    current = group.current("a")
    assert current is not None, "a fenced member stays in the group (Kafka's rule)"
    assert (current.member_epoch, current.active) == (epoch, ALL)
    a.epoch, a.active = 0, frozenset()
    h.beat(a)  # it rejoins at epoch 0: answered with its epoch and tasks
    assert (a.epoch, a.active) == (epoch, ALL)


def test_a_stray_copy_of_an_old_heartbeat_does_not_free_a_live_members_tasks() -> None:
    h = Harness()
    a, b = h.add("a"), h.add("b")
    h.round(3)
    stray = replace(a.request(), member_epoch=a.epoch - 1, active_tasks=None)  # a duplicate, late
    owned, epoch = a.active, a.epoch
    assert owned
    assert epoch > 1
    assert h.apply(h.coordinator.heartbeat(stray, h.now)).error is KafkaErrorCode.FENCED_MEMBER_EPOCH
    c = h.add("c")  # a new member: a target is computed with a still in the group
    h.round(4)
    assert h.beat(a).error is KafkaErrorCode.NONE, "a's own heartbeats still pass"
    owners = [m.active for m in (a, b, c)]
    assert sum(len(o) for o in owners) == len(ALL)
    assert frozenset().union(*owners) == ALL, "every task owned once"
    assert a.active, "a kept a share of the tasks"


def test_a_repeated_join_keeps_the_members_tasks() -> None:
    h = Harness()
    a, b = h.add("a"), h.add("b")
    h.round(3)
    owned, epoch = a.active, a.epoch
    late = replace(
        a.request(), member_epoch=0, topology=topology(), process_id="p-a", rebalance_timeout_ms=30_000
    )
    response = h.apply(h.coordinator.heartbeat(late, h.now))
    assert response.member_epoch == epoch
    assert tasks_of(response.active_tasks) == owned
    h.round(2)
    assert a.active == owned
    assert b.active == ALL - owned
    ghost = h.add("ghost")
    ghost.epoch = 3
    assert h.beat(ghost).error is KafkaErrorCode.UNKNOWN_MEMBER_ID


def test_a_lost_response_is_forgiven_at_the_previous_epoch() -> None:
    h = Harness()
    a, _b = h.add("a"), h.add("b")
    h.round(3)
    assert a.epoch == 2
    # b joins at epoch 3... pretend a lost the answer that moved it from 2 to 3
    c = h.add("c")
    h.beat(c)
    h.round(3)
    epoch = a.epoch
    g = h.coordinator.group(GROUP)
    assert g is not None
    current = g.current("a")
    assert current is not None
    assert current.previous_member_epoch < epoch
    a.epoch = current.previous_member_epoch
    assert h.beat(a).error is KafkaErrorCode.NONE
    assert a.epoch == epoch


def test_invalid_requests() -> None:
    h = Harness()
    a = h.add("a")
    bad = a.request()
    assert (
        h.apply(h.coordinator.heartbeat(replace(bad, topology=None), 0)).error
        is KafkaErrorCode.INVALID_REQUEST
    )
    assert (
        h.apply(h.coordinator.heartbeat(replace(bad, group_id=""), 0)).error is KafkaErrorCode.INVALID_REQUEST
    )
    assert (
        h.apply(h.coordinator.heartbeat(replace(bad, process_id=None), 0)).error
        is KafkaErrorCode.INVALID_REQUEST
    )
    assert (
        h.apply(h.coordinator.heartbeat(replace(bad, member_epoch=-3), 0)).error
        is KafkaErrorCode.INVALID_REQUEST
    )
    dup = topology()
    dup = replace(dup, subtopologies=dup.subtopologies * 2)
    r = h.apply(h.coordinator.heartbeat(replace(bad, topology=dup), 0))
    assert r.error is KafkaErrorCode.STREAMS_INVALID_TOPOLOGY
    assert h.log == []


def test_leaving_gives_the_tasks_to_the_others() -> None:
    h = Harness()
    a, b = h.add("a"), h.add("b")
    h.round(3)
    a.epoch = -1
    r = h.beat(a)
    assert r.member_epoch == -1
    del h.members["a"]
    h.round(2)
    assert b.active == ALL


def test_shutdown_application_reaches_every_member() -> None:
    h = Harness()
    a, b = h.add("a"), h.add("b")
    h.round(2)
    r = h.apply(h.coordinator.heartbeat(replace(a.request(), shutdown_application=True), h.now))
    assert StreamsGroupStatus.SHUTDOWN_APPLICATION in [s.status_code for s in r.status or ()]
    assert StreamsGroupStatus.SHUTDOWN_APPLICATION in [s.status_code for s in h.beat(b).status or ()]


def test_topology_epochs() -> None:
    h = Harness()
    a, b = h.add("a"), h.add("b")
    h.beat(a, topology(2))
    r = h.beat(b, topology(1))
    assert StreamsGroupStatus.STALE_TOPOLOGY in [s.status_code for s in r.status or ()]
    c = h.add("c")
    other = topology(2, stateful=False)
    assert h.beat(c, other).error is KafkaErrorCode.STREAMS_INVALID_TOPOLOGY_EPOCH


def test_group_max_size() -> None:
    h = Harness(StreamsCoordinatorConfig(max_group_size=1))
    h.beat(h.add("a"))
    assert h.beat(h.add("b")).error is KafkaErrorCode.GROUP_MAX_SIZE_REACHED
