"""ConsumerGroupHeartbeat transitions: validation, joining, epochs, fencing, leaving,
subscription changes, and the records each write leaves (writes mutate nothing)."""

from __future__ import annotations

from typing import Any

import pytest

from streamtasks.coordinator import (
    CoordinatorConfig,
    GroupEpochRecord,
    GroupState,
    MemberState,
    TimerKey,
    TimerKind,
    TopicPartitionSet,
)
from streamtasks.protocol.consumer_group import ClientAssignor, ConsumerGroupHeartbeatRequest
from streamtasks.protocol.errors import KafkaErrorCode
from tests.coordinator.support import GROUP, Harness, assert_exclusive, image, tps, wire


def request(**changes: Any) -> ConsumerGroupHeartbeatRequest:
    fields: dict[str, Any] = {
        "group_id": GROUP,
        "member_id": "A",
        "member_epoch": 0,
        "rebalance_timeout_ms": 1000,
        "subscribed_topic_names": ("foo",),
    }
    fields.update(changes)
    return ConsumerGroupHeartbeatRequest(**fields)


def test_an_empty_regex_beside_topic_names_is_no_regex() -> None:
    """librdkafka joins with SubscribedTopicRegex "" and its topic names; Apache Kafka 4.x reads
    the empty regex as none and accepts the join, and so does this coordinator."""
    h = Harness()
    result = h.coordinator.heartbeat(request(subscribed_topic_regex=""), 0)
    assert result.response.error is KafkaErrorCode.NONE
    assert result.response.member_epoch > 0


@pytest.mark.parametrize(
    "changes",
    [
        {"group_id": ""},
        {"member_id": ""},
        {"instance_id": ""},
        {"member_epoch": -3},
        {"member_epoch": -2},  # a temporary leave needs the instance id
        {"rebalance_timeout_ms": 0},
        {"subscribed_topic_names": None},
        {"topic_partitions": wire(tps(foo=[0]))},
        {"subscribed_topic_regex": "foo.*", "subscribed_topic_names": None},
        {"subscribed_topic_regex": "foo.*"},
        {
            "server_assignor": "uniform",
            "client_assignors": (ClientAssignor(name="x", minimum_version=0, maximum_version=0),),
        },
        {"client_assignors": (ClientAssignor(name="", minimum_version=0, maximum_version=0),)},
        {"client_assignors": (ClientAssignor(name="x", minimum_version=-2, maximum_version=0),)},
        {
            "client_assignors": (
                ClientAssignor(name="x", minimum_version=2, maximum_version=1, metadata_version=2),
            )
        },
        {
            "client_assignors": (
                ClientAssignor(name="x", minimum_version=0, maximum_version=1, metadata_version=2),
            )
        },
        {"client_assignors": (ClientAssignor(name="x", minimum_version=0, maximum_version=1),) * 2},
    ],
)
def test_invalid_request_changes_nothing(changes: dict[str, Any]) -> None:
    h = Harness()
    result = h.coordinator.heartbeat(request(**changes), 0)
    assert result.response.error is KafkaErrorCode.INVALID_REQUEST
    assert result.response.error_message
    assert (result.records, result.timers) == ((), ())


def test_unknown_server_assignor_is_unsupported() -> None:
    result = Harness().coordinator.heartbeat(request(server_assignor="sticky"), 0)
    assert result.response.error is KafkaErrorCode.UNSUPPORTED_ASSIGNOR
    assert result.records == ()


def test_write_does_not_mutate_until_applied() -> None:
    h = Harness()
    result = h.coordinator.heartbeat(request(), 0)
    assert h.coordinator.group(GROUP) is None
    assert h.coordinator.next_deadline_ms() is None
    h.apply(result)
    assert h.group.member("A") is not None
    assert h.coordinator.next_deadline_ms() == h.coordinator.config.session_timeout_ms


def test_empty_to_stable_on_first_join() -> None:
    h = Harness()
    response = h.join("A")
    assert (response.error, response.member_id, response.member_epoch) == (KafkaErrorCode.NONE, "A", 1)
    assert response.heartbeat_interval_ms == h.coordinator.config.heartbeat_interval_ms
    assert h.group.state is GroupState.STABLE
    kinds = [type(r).__name__ for r in h.log]
    assert kinds[:3] == ["MemberMetadataRecord", "PartitionMetadataRecord", "GroupEpochRecord"]
    assert "TargetAssignmentMetadataRecord" in kinds
    assert kinds[-1] == "CurrentMemberAssignmentRecord"


def test_steady_heartbeat_writes_no_record_and_sends_no_assignment() -> None:
    h = Harness()
    h.join("A")
    before = len(h.log)
    response = h.heartbeat("A", topic_partitions=None)
    assert response.assignment is None
    assert len(h.log) == before
    assert h.heartbeat("A").assignment is None  # owned matches: no assignment either


def test_stable_to_unrevoked_to_stable() -> None:
    h = Harness()
    h.join("A")
    h.join("B")
    response = h.heartbeat("A")
    current = h.current("A")
    assert current.state is MemberState.UNREVOKED_PARTITIONS
    assert (current.member_epoch, current.previous_member_epoch) == (1, 0)
    assert response.member_epoch == 1
    assert len(h.members["A"].owned) == 2
    # without acknowledging (owned unknown) nothing moves
    assert h.heartbeat("A", topic_partitions=None).member_epoch == 1
    # still owning the revoked partition: nothing moves either
    assert h.heartbeat("A", topic_partitions=wire(tps(foo=[0, 1, 2]))).member_epoch == 1
    assert h.heartbeat("A").member_epoch == 2
    assert (h.current("A").state, h.current("A").previous_member_epoch) == (MemberState.STABLE, 1)


def test_unreleased_to_stable_when_the_owner_revokes() -> None:
    h = Harness()
    h.join("A")
    h.join("B")
    assert h.current("B").state is MemberState.UNRELEASED_PARTITIONS
    h.heartbeat("A")
    assert h.heartbeat("B").assignment is None  # still held by A
    h.heartbeat("A")
    response = h.heartbeat("B")
    assert h.current("B").state is MemberState.STABLE
    assert TopicPartitionSet.from_wire(response.assignment.topic_partitions) == h.target("B")
    assert_exclusive(h.coordinator)


def test_lost_response_previous_epoch_with_subset_is_accepted() -> None:
    h = Harness()
    h.join("A")
    h.join("B")
    h.heartbeat("A")
    h.heartbeat("A")  # A moved to epoch 2; pretend that response was lost
    lost = h.heartbeat("A", member_epoch=1, topic_partitions=wire(h.members["A"].owned))
    assert (lost.error, lost.member_epoch) == (KafkaErrorCode.NONE, 2)


def test_previous_epoch_owning_more_is_fenced_and_kept() -> None:
    """Kafka's rule: FENCED_MEMBER_EPOCH changes nothing in the group; the member keeps its
    epoch and partitions until it rejoins at epoch 0 (answered with both) or its session ends."""
    h = Harness()
    h.join("A")
    h.join("B")
    h.heartbeat("A")
    h.heartbeat("A")
    epoch, before, log = h.group.group_epoch, h.current("A"), len(h.log)
    fenced = h.heartbeat("A", member_epoch=1, topic_partitions=wire(tps(foo=[0, 1, 2])))
    assert fenced.error is KafkaErrorCode.FENCED_MEMBER_EPOCH
    assert (h.current("A"), h.group.group_epoch, len(h.log)) == (before, epoch, log)
    assert h.heartbeat("A", member_epoch=2).error is KafkaErrorCode.NONE
    rejoined = h.join("A")
    assert (rejoined.error, rejoined.member_epoch) == (KafkaErrorCode.NONE, before.member_epoch)
    assert rejoined.assignment is not None
    assert TopicPartitionSet.from_wire(rejoined.assignment.topic_partitions) == before.assigned


@pytest.mark.parametrize("epoch", [5, 2])
def test_future_or_unknown_epoch_is_fenced(epoch: int) -> None:
    h = Harness()
    h.join("A")
    assert h.heartbeat("A", member_epoch=epoch).error is KafkaErrorCode.FENCED_MEMBER_EPOCH


def test_unknown_member_and_group() -> None:
    h = Harness()
    assert (
        h.coordinator.heartbeat(request(member_epoch=3), 0).response.error is KafkaErrorCode.UNKNOWN_MEMBER_ID
    )
    h.join("A")
    assert h.coordinator.heartbeat(request(member_id="Z", member_epoch=1), 0).response.error is (
        KafkaErrorCode.UNKNOWN_MEMBER_ID
    )
    assert h.coordinator.heartbeat(request(member_id="Z", member_epoch=-1), 0).response.error is (
        KafkaErrorCode.UNKNOWN_MEMBER_ID
    )


def test_leave_removes_bumps_and_frees_partitions() -> None:
    h = Harness()
    h.join("A")
    h.join("B")
    h.settle()
    response = h.heartbeat("A", member_epoch=-1)
    assert (response.error, response.member_epoch) == (KafkaErrorCode.NONE, -1)
    assert h.group.member("A") is None
    assert h.group.group_epoch == 3
    assert h.target("B") == tps(foo=[0, 1, 2])
    assert h.coordinator.timer_deadline(TimerKey(TimerKind.SESSION, GROUP, "A")) is None
    h.heartbeat("B")
    assert h.members["B"].owned == tps(foo=[0, 1, 2])


def test_last_member_leaves_empty() -> None:
    h = Harness()
    h.join("A")
    h.heartbeat("A", member_epoch=-1)
    assert h.group.state is GroupState.EMPTY
    assert h.coordinator.next_deadline_ms() is None


def test_rejoin_with_same_member_id_keeps_its_epoch_and_assignment() -> None:
    h = Harness()
    h.join("A")
    epoch = h.group.group_epoch
    response = h.join("A")
    assert response.member_epoch == epoch
    assert h.group.group_epoch == epoch
    assert TopicPartitionSet.from_wire(response.assignment.topic_partitions) == tps(foo=[0, 1, 2])


def test_subscription_change_bumps_and_revokes_unsubscribed_topics() -> None:
    h = Harness({"foo": 2, "bar": 2})
    h.join("A", ("foo", "bar"))
    assert len(h.members["A"].owned) == 4
    response = h.heartbeat("A", subscribed_topic_names=("bar",))
    assert h.group.group_epoch == 2
    assert TopicPartitionSet.from_wire(response.assignment.topic_partitions) == tps(bar=[0, 1])
    assert h.current("A").state is MemberState.UNREVOKED_PARTITIONS
    assert h.heartbeat("A").member_epoch == 2


def test_rack_and_assignor_changes_bump_but_timeout_does_not() -> None:
    h = Harness()
    h.join("A")
    h.heartbeat("A", rebalance_timeout_ms=5000)
    assert h.group.group_epoch == 1
    assert h.group.member("A").rebalance_timeout_ms == 5000
    h.heartbeat("A", rack_id="r1")
    assert h.group.group_epoch == 2
    h.heartbeat("A", server_assignor="range")
    assert (h.group.group_epoch, h.group.assignor_name) == (3, "range")


def test_most_common_server_assignor_wins() -> None:
    h = Harness({"foo": 4})
    h.join("A", server_assignor="range")
    h.join("B", server_assignor="range")
    h.join("C", server_assignor="uniform")
    assert h.group.assignor_name == "range"


def test_group_max_size() -> None:
    h = Harness(config=CoordinatorConfig(max_group_size=1))
    h.join("A")
    assert h.join("B").error is KafkaErrorCode.GROUP_MAX_SIZE_REACHED
    assert h.join("A").error is KafkaErrorCode.NONE


def test_topic_created_after_subscription_bumps_on_metadata() -> None:
    h = Harness({"foo": 1})
    h.join("A", ("foo", "bar"))
    h.apply(h.coordinator.on_metadata_image(image({"foo": 1, "bar": 2}), h.now))
    assert h.group.group_epoch == 2
    assert h.target("A") == tps(foo=[0], bar=[0, 1])
    unchanged = h.coordinator.on_metadata_image(image({"foo": 1, "bar": 2, "baz": 9}), h.now)
    assert unchanged.records == ()


def test_group_epoch_record_comes_once_per_write() -> None:
    h = Harness()
    h.join("A")
    result = h.coordinator.heartbeat(request(member_id="B", subscribed_topic_names=("foo", "bar")), 0)
    assert sum(isinstance(r, GroupEpochRecord) for r in result.records) == 1
