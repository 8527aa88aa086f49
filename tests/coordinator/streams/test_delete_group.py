"""Deleting an empty streams group (what a classic JoinGroup does to it on ``streamtasks
coordinator``, Apache Kafka's conversion back to a classic group): every record tombstoned, the
group's last; refused while it has members, a static member away included; the log replays to
no group, and a new group of the id starts afresh."""

from __future__ import annotations

from streamtasks.coordinator.streams import (
    StreamsCoordinatorConfig,
    StreamsGroupCoordinator,
    StreamsGroupTombstone,
    StreamsTopologyTombstone,
)
from streamtasks.protocol.errors import KafkaErrorCode

from .support import GROUP, READY, Harness, image


def _emptied() -> Harness:
    h = Harness()
    a, b = h.add("a"), h.add("b")
    h.round(3)
    for m in (a, b):
        m.epoch = -1
        h.beat(m)
        del h.members[m.member_id]
    return h


def test_an_empty_group_is_deleted_with_its_group_record_last_and_the_log_replays_to_nothing() -> None:
    h = _emptied()
    g = h.coordinator.group(GROUP)
    assert g is not None
    assert not g.members
    assert g.topology is not None
    result = h.coordinator.delete_group(GROUP, h.now)
    assert h.coordinator.group(GROUP) is not None, "a write changes nothing until applied"
    assert h.apply(result) is KafkaErrorCode.NONE
    assert h.coordinator.group(GROUP) is None
    assert isinstance(result.records[-1], StreamsGroupTombstone)
    assert any(isinstance(r, StreamsTopologyTombstone) for r in result.records)
    replayed = StreamsGroupCoordinator(image=image(READY))
    replayed.load(h.log, h.now)
    assert replayed.groups == {}
    # the tombstones alone (a compacted log) replay to nothing either
    alone = StreamsGroupCoordinator(image=image(READY))
    alone.load(result.records, h.now)
    assert alone.groups == {}


def test_a_new_group_of_the_id_starts_at_epoch_one_after_the_deletion() -> None:
    h = _emptied()
    h.apply(h.coordinator.delete_group(GROUP, h.now))
    c = h.add("c")
    answer = h.beat(c)
    assert answer.error is KafkaErrorCode.NONE
    assert answer.member_epoch == 1


def test_a_group_with_members_or_an_unknown_one_is_not_deleted() -> None:
    h = Harness(StreamsCoordinatorConfig(session_timeout_ms=10_000))
    a = h.add("a", instance_id="i-a")
    h.round(2)
    assert h.coordinator.delete_group(GROUP, h.now).response is KafkaErrorCode.NON_EMPTY_GROUP
    a.epoch = -2  # a static member leaves: it stays a member until its session ends
    h.beat(a)
    assert h.coordinator.delete_group(GROUP, h.now).response is KafkaErrorCode.NON_EMPTY_GROUP
    h.advance(11_000)
    assert h.apply(h.coordinator.delete_group(GROUP, h.now)) is KafkaErrorCode.NONE
    unknown = h.coordinator.delete_group("nope", h.now)
    assert unknown.response is KafkaErrorCode.GROUP_ID_NOT_FOUND
    assert unknown.records == ()
