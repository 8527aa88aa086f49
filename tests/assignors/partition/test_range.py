from __future__ import annotations

from hypothesis import given

from assignors.partition.range import RangeAssignor
from assignors.partition.types import GroupSubscription, RebalanceProtocol
from tests.assignors.partition import kafka_python
from tests.assignors.partition.groups import check_complete, group, groups
from topology.ids import TopicPartition


def tps(topic: str, *partitions: int) -> tuple[TopicPartition, ...]:
    return tuple(TopicPartition(topic, p) for p in partitions)


def test_declares_eager_only_and_a_version() -> None:
    assert RangeAssignor().supported_protocols() == (RebalanceProtocol.EAGER,)
    assert RangeAssignor.name == "range"
    assert RangeAssignor.version == 0


def test_first_members_get_the_remainder_per_topic() -> None:
    g = group({"c0": ["t0", "t1"], "c1": ["t0", "t1"]}, {"t0": 3, "t1": 3})
    result = RangeAssignor().assign(g)
    assert result.members == {"c0": tps("t0", 0, 1) + tps("t1", 0, 1), "c1": tps("t0", 2) + tps("t1", 2)}


def test_copartitioned_topics_line_up() -> None:
    members = {f"m{i}": ["orders", "payments", "other"] for i in range(3)}
    g = group(members, {"orders": 8, "payments": 8, "other": 5})
    result = RangeAssignor().assign(g)
    for partitions in result.members.values():
        orders = [tp.partition for tp in partitions if tp.topic == "orders"]
        payments = [tp.partition for tp in partitions if tp.topic == "payments"]
        assert orders == payments
        assert orders  # everyone got some


def test_static_members_first_by_instance_id_then_dynamic_by_member_id() -> None:
    g = group(
        {"zz-dynamic": ["t"], "aa-dynamic": ["t"], "m-static-b": ["t"], "m-static-a": ["t"]},
        {"t": 4},
        instance_ids={"m-static-b": "instance-1", "m-static-a": "instance-2"},
    )
    result = RangeAssignor().assign(g)
    assert result.members["m-static-b"] == tps("t", 0)  # instance-1 sorts first
    assert result.members["m-static-a"] == tps("t", 1)
    assert result.members["aa-dynamic"] == tps("t", 2)
    assert result.members["zz-dynamic"] == tps("t", 3)


def test_only_subscribers_share_a_topic() -> None:
    g = group({"a": ["x"], "b": ["x", "y"], "c": []}, {"x": 4, "y": 3})
    result = RangeAssignor().assign(g)
    assert result.members == {"a": tps("x", 0, 1), "b": tps("x", 2, 3) + tps("y", 0, 1, 2), "c": ()}


@given(groups())
def test_matches_kafka_python_and_assigns_everything(g: GroupSubscription) -> None:
    result = RangeAssignor().assign(g)
    check_complete(g, result)
    assert dict(result.members) == kafka_python.run(kafka_python.RangePartitionAssignor, g)
