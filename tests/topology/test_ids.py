from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamtasks.errors import TopologyError
from topology import TaskId, TopicPartition


def test_task_ids_order_by_subtopology_then_partition() -> None:
    ids = [TaskId(1, 0), TaskId(0, 10), TaskId(0, 2)]
    assert sorted(ids) == [TaskId(0, 2), TaskId(0, 10), TaskId(1, 0)]


def test_task_id_is_hashable_and_prints_like_kafka_streams() -> None:
    assert {TaskId(0, 1), TaskId(0, 1)} == {TaskId(0, 1)}
    assert str(TaskId(3, 14)) == "3_14"


@given(st.integers(0, 10_000), st.integers(0, 10_000))
def test_task_id_parse_round_trips(sub: int, part: int) -> None:
    assert TaskId.parse(str(TaskId(sub, part))) == TaskId(sub, part)


@pytest.mark.parametrize(
    "text",
    [
        *["", "3", "a_1", "1_", "_1", "1-2", "-1_2", "1_2_3"],
        *["0_\u00b2", "\u0660_\u0663", "1_\uff11"],  # digits to str.isdigit, not to int() or not ASCII
        "1_" + "9" * 11,  # more digits than an int32 has
    ],
)
def test_task_id_parse_rejects_garbage(text: str) -> None:
    with pytest.raises(TopologyError, match="not a task id"):
        TaskId.parse(text)


def test_task_id_parse_takes_int32_parts_and_keeps_its_message_short() -> None:
    assert TaskId.parse("2147483647_2147483647") == TaskId(2**31 - 1, 2**31 - 1)
    with pytest.raises(TopologyError) as info:
        TaskId.parse("0_" + "9" * 5000)  # int() of it would raise ValueError
    assert len(str(info.value)) < 100


def test_task_id_rejects_negative_parts() -> None:
    with pytest.raises(TopologyError):
        TaskId(-1, 0)


def test_topic_partitions_order_by_topic_then_partition() -> None:
    tps = [TopicPartition("b", 0), TopicPartition("a", 2), TopicPartition("a", 10)]
    assert sorted(tps) == [TopicPartition("a", 2), TopicPartition("a", 10), TopicPartition("b", 0)]
    assert str(TopicPartition("orders", 3)) == "orders-3"
