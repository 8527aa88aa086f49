"""Many dataclass instances at once (topology.bulk, topology.partitions): the same objects the
constructors make."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from topology.bulk import bulk, slot_setters
from topology.ids import TaskId, TopicPartition
from topology.partitions import topic_partitions, topic_partitions_of


@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.lists(st.integers(0, 99), max_size=60))))
def test_partitions_made_in_bulk_are_the_constructed_ones(groups: list[tuple[str, list[int]]]) -> None:
    expected = [TopicPartition(topic, p) for topic, numbers in groups for p in numbers]
    made = topic_partitions_of(groups)
    assert made == expected
    assert [hash(tp) for tp in made] == [hash(tp) for tp in expected]
    assert all(type(tp) is TopicPartition for tp in made)
    assert [tp for topic, numbers in groups for tp in topic_partitions(topic, numbers)] == expected


def test_a_plain_slotted_dataclass_is_filled_slot_by_slot() -> None:
    assert slot_setters(TopicPartition) is not None
    made = bulk(TopicPartition, 2, {"topic": ["t", "u"], "partition": [1, 2]})
    assert made == [TopicPartition("t", 1), TopicPartition("u", 2)]


@dataclass(frozen=True, slots=True)
class _Checked:
    value: int

    def __post_init__(self) -> None:
        if self.value < 0:
            raise ValueError("negative")


def test_a_dataclass_that_checks_itself_goes_through_its_constructor() -> None:
    assert slot_setters(_Checked) is None
    assert slot_setters(TaskId) is None  # it checks its parts in __post_init__
    assert bulk(_Checked, 2, {"value": [1, 2]}) == [_Checked(1), _Checked(2)]
    with pytest.raises(ValueError, match="negative"):
        bulk(_Checked, 1, {"value": [-1]})
