"""ConsumerGroupDescribe answers, group deletion (Dead), the record keys and the partition set."""

from __future__ import annotations

from streamtasks.coordinator import (
    GroupState,
    MemberMetadataRecord,
    MemberMetadataTombstone,
    TopicPartitionSet,
    record_key,
)
from streamtasks.protocol.consumer_group import ConsumerGroupDescribeRequest, TopicIdPartitions
from streamtasks.protocol.errors import KafkaErrorCode
from tests.coordinator.support import GROUP, Harness, topic_id, tps


def describe(h: Harness, *group_ids: str) -> tuple[object, ...]:
    return h.coordinator.describe(ConsumerGroupDescribeRequest(group_ids=group_ids)).groups


def test_describe_unknown_group_is_dead() -> None:
    (group,) = describe(Harness(), "nope")
    assert (group.error, group.group_state) == (KafkaErrorCode.GROUP_ID_NOT_FOUND, "Dead")  # type: ignore[attr-defined]


def test_describe_reports_states_epochs_and_assignments() -> None:
    h = Harness({"foo": 2})
    h.join("A", rack_id="r1")
    h.join("B")
    (group,) = describe(h, GROUP)
    assert (group.group_state, group.group_epoch, group.assignment_epoch, group.assignor_name) == (  # type: ignore[attr-defined]
        "Reconciling",
        2,
        2,
        "uniform",
    )
    a, b = group.members  # type: ignore[attr-defined]
    assert (a.member_id, a.rack_id, a.member_epoch, a.member_type) == ("A", "r1", 1, 1)
    assert [t.topic_name for t in a.assignment.topic_partitions] == ["foo"]
    assert b.assignment.topic_partitions == ()
    assert b.target_assignment.topic_partitions[0].partitions == (1,)
    h.settle()
    (group,) = describe(h, GROUP)
    assert group.group_state == "Stable"  # type: ignore[attr-defined]


def test_delete_group_only_when_empty() -> None:
    h = Harness()
    assert h.apply(h.coordinator.delete_group(GROUP, 0)) is KafkaErrorCode.GROUP_ID_NOT_FOUND
    h.join("A")
    assert h.apply(h.coordinator.delete_group(GROUP, 0)) is KafkaErrorCode.NON_EMPTY_GROUP
    h.heartbeat("A", member_epoch=-1)
    assert h.coordinator.group_state(GROUP) is GroupState.EMPTY
    assert h.apply(h.coordinator.delete_group(GROUP, 0)) is KafkaErrorCode.NONE
    assert h.coordinator.group_state(GROUP) is GroupState.DEAD
    assert h.replayed().snapshot() == {}


def test_record_keys_pair_records_with_their_tombstones() -> None:
    record = MemberMetadataRecord(group_id=GROUP, member_id="A")
    assert record_key(record) == record_key(MemberMetadataTombstone(group_id=GROUP, member_id="A"))
    assert record_key(record) != record_key(MemberMetadataRecord(group_id=GROUP, member_id="B"))


def test_topic_partition_set_is_a_value() -> None:
    foo, bar = topic_id("foo"), topic_id("bar")
    a = TopicPartitionSet({foo: [2, 1], bar: []})
    b = TopicPartitionSet.from_wire(
        (TopicIdPartitions(topic_id=foo, partitions=(1,)), TopicIdPartitions(topic_id=foo, partitions=(2,)))
    )
    assert a == b
    assert hash(a) == hash(b)
    assert a.topics() == {foo}
    assert (foo, 1) in a
    assert (bar, 1) not in a
    assert len(a) == 2
    assert a.union(tps(bar=[0])).difference(tps(foo=[1])) == TopicPartitionSet({foo: [2], bar: [0]})
    assert a.intersection(tps(foo=[2, 3])) == tps(foo=[2])
    assert tps(foo=[2]).issubset(a)
    assert a.to_wire() == (TopicIdPartitions(topic_id=foo, partitions=(1, 2)),)
