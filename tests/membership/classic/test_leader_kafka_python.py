"""A streamtasks leader of an eager ``sticky`` group with kafka-python 3 members: their sticky
userdata (an int16 version header before the KIP-341 layout) reaches the assignor as claims."""

from __future__ import annotations

import warnings

from assignors.partition.sticky import StickyAssignor
from streamtasks.membership.classic.leader import decode_members, lead
from streamtasks.protocol.classic_group import JoinGroupMember
from streamtasks.protocol.consumer_protocol import ConsumerProtocolSubscription, encode_subscription
from streamtasks.protocol.sticky import StickyUserData, encode_sticky_userdata
from tests.membership.classic.helpers import tps

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
    from kafka.structs import TopicPartition as KpTopicPartition


def kafka_python_member(member_id: str, owned: str, generation: int) -> JoinGroupMember:
    """The JoinGroup metadata kafka-python 3's ``StickyPartitionAssignor`` writes."""
    partitions = [KpTopicPartition(tp.topic, tp.partition) for tp in tps(owned)]
    metadata: bytes = StickyPartitionAssignor._metadata(["t"], partitions, generation).encode()
    return JoinGroupMember(member_id=member_id, group_instance_id=None, metadata=metadata)


def streamtasks_member(member_id: str, owned: str, generation: int) -> JoinGroupMember:
    ud = encode_sticky_userdata(StickyUserData(partitions=tps(owned), generation=generation))
    metadata = encode_subscription(ConsumerProtocolSubscription(topics=("t",), user_data=ud))
    return JoinGroupMember(member_id=member_id, group_instance_id=None, metadata=metadata)


def test_the_leader_reads_a_kafka_python_members_claims() -> None:
    members = (kafka_python_member("kp", "t0 t1", 4), streamtasks_member("st", "t2 t3", 4))
    decoded = decode_members(members, assignor=StickyAssignor(), generation_marker=True)
    assert decoded.problems == ()
    assert decoded.subscriptions["kp"].owned_partitions == tps("t0 t1")
    assert decoded.subscriptions["kp"].generation == 4
    assert decoded.subscriptions["st"].owned_partitions == tps("t2 t3")


def test_kafka_python_members_keep_their_partitions_in_a_mixed_sticky_group() -> None:
    members = (
        kafka_python_member("kp1", "t0 t1 t2", 7),
        kafka_python_member("kp2", "t3 t4 t5", 7),
        streamtasks_member("st", "", -1),  # a new member: it takes one from each
    )
    result = lead(members, assignor=StickyAssignor(), partitions_per_topic={"t": 6})
    assert result.problems == ()
    assert len(set(result.assignment["kp1"]) & set(tps("t0 t1 t2"))) == 2
    assert len(set(result.assignment["kp2"]) & set(tps("t3 t4 t5"))) == 2
    assert sorted(p for parts in result.assignment.values() for p in parts) == list(tps("t0 t1 t2 t3 t4 t5"))
