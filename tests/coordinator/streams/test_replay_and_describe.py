"""Loading is replaying; StreamsGroupDescribe; the assignor registry."""

from __future__ import annotations

import pytest

from streamtasks.coordinator.streams import StreamsCoordinatorConfig, StreamsGroupCoordinator, record_key
from streamtasks.coordinator.timers import TimerKey, TimerKind
from streamtasks.errors import UnknownAssignorError
from streamtasks.protocol.errors import KafkaErrorCode
from streamtasks.protocol.streams_group import StreamsGroupDescribeRequest

from .support import GROUP, READY, Harness, image

CONFIG = StreamsCoordinatorConfig(
    num_standby_replicas=1, session_timeout_ms=10_000, heartbeat_interval_ms=1_000
)


def _busy_harness() -> Harness:
    h = Harness(CONFIG)
    a, b = h.add("a", "p1", instance_id="i-a"), h.add("b", "p2")
    h.round(3)
    c = h.add("c", "p3")
    h.beat(c)
    h.beat(a)
    a.epoch = -2
    h.beat(a)
    del h.members["a"]
    h.round(2)
    h.add("a2", "p1", instance_id="i-a")
    h.round(3)
    b.epoch = -1
    h.beat(b)
    del h.members["b"]
    h.round(2)
    return h


def test_loading_the_log_or_its_compaction_rebuilds_the_same_groups() -> None:
    h = _busy_harness()
    full = StreamsGroupCoordinator(CONFIG, image=image(READY))
    full.load(h.log, h.now)
    assert full.snapshot() == h.coordinator.snapshot()
    last: dict[tuple[str, ...], object] = {}
    for record in h.log:
        last.pop(record_key(record), None)
        last[record_key(record)] = record
    compacted = StreamsGroupCoordinator(CONFIG, image=image(READY))
    compacted.load(last.values(), h.now)  # type: ignore[arg-type]
    assert compacted.snapshot() == h.coordinator.snapshot()
    for mid in ("a2", "c"):
        assert compacted.timer_deadline(TimerKey(TimerKind.SESSION, GROUP, mid)) == h.now + 10_000


def test_writes_do_not_change_the_coordinator_until_applied() -> None:
    h = _busy_harness()
    before = h.coordinator.snapshot()
    m = h.add("d", "p4")
    result = h.coordinator.heartbeat(m.request(), h.now)
    assert result.records
    assert h.coordinator.snapshot() == before


def test_describe() -> None:
    h = _busy_harness()
    response = h.coordinator.describe(StreamsGroupDescribeRequest(group_ids=(GROUP, "nope")))
    group, missing = response.groups
    assert missing.error is KafkaErrorCode.GROUP_ID_NOT_FOUND
    assert group.error is KafkaErrorCode.NONE
    assert group.group_state == "Stable"
    assert group.assignment_epoch == group.group_epoch
    assert group.assignor_name == "sticky"
    assert group.topology is not None
    assert group.topology.epoch == 1
    assert [m.member_id for m in group.members] == ["a2", "c"]
    actives = [p for m in group.members for t in m.assignment.active_tasks for p in t.partitions]
    assert sorted(actives) == [0, 1, 2, 3]
    for m in group.members:
        assert m.assignment == m.target_assignment
        assert m.process_id in ("p1", "p3")


def test_any_registered_task_assignor_serves_and_unknown_names_fail_clearly() -> None:
    h = Harness(StreamsCoordinatorConfig(assignor="fallback_prior"))
    a = h.add("a")
    h.round(2)
    assert len(a.active) == 4
    with pytest.raises(UnknownAssignorError, match="no task assignor named 'nope'"):
        StreamsGroupCoordinator(StreamsCoordinatorConfig(assignor="nope"))
