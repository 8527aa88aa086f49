"""The one place streams-group task ids meet streamtasks' (runtime/streams_tasks.py)."""

from __future__ import annotations

import pytest

from streamtasks.errors import LocalProtocolError
from streamtasks.protocol.streams_group import Subtopology, TaskOffset, TopicInfo, Topology
from streamtasks.protocol.userdata import RUNNING_OFFSET_SUM, decode_assignment_info
from streamtasks.runtime.streams_tasks import (
    TaskPartitions,
    assignment_user_data,
    kafka_task,
    task_id,
    task_offsets,
)
from topology.ids import TaskId, TopicPartition

TOPOLOGY = Topology(
    epoch=0,
    subtopologies=(
        Subtopology(
            subtopology_id="0", source_topics=("lines",), repartition_sink_topics=("app-words-repartition",)
        ),
        Subtopology(
            subtopology_id="1",
            repartition_source_topics=(TopicInfo(name="app-words-repartition"),),
            state_changelog_topics=(TopicInfo(name="app-counts-changelog"),),
        ),
        Subtopology(subtopology_id="2", source_topics=("left", "right")),
    ),
)


def test_task_ids_map_both_ways() -> None:
    assert task_id(("0", 3)) == TaskId(0, 3)
    assert task_id(("12", 0)) == TaskId(12, 0)
    assert kafka_task(TaskId(12, 0)) == ("12", 0)
    for tid in (TaskId(0, 0), TaskId(7, 41)):
        assert task_id(kafka_task(tid)) == tid


@pytest.mark.parametrize("subtopology", ["a", "-1", "", "1a"])
def test_a_subtopology_id_that_is_not_a_number_is_not_ours(subtopology: str) -> None:
    with pytest.raises(LocalProtocolError, match="not one of streamtasks'"):
        task_id((subtopology, 0))


def test_a_task_reads_its_sources_and_repartition_sources_at_its_partition() -> None:
    parts = TaskPartitions(TOPOLOGY)
    assert parts.of([("0", 2)]) == (TopicPartition("lines", 2),)
    assert parts.of([("1", 0)]) == (TopicPartition("app-words-repartition", 0),)
    assert parts.of([("2", 1), ("0", 1)]) == (
        TopicPartition("left", 1),
        TopicPartition("lines", 1),
        TopicPartition("right", 1),
    )
    assert parts.of([]) == ()
    with pytest.raises(LocalProtocolError, match="unknown subtopology '9'"):
        parts.of([("9", 0)])


def test_the_brokers_tasks_become_the_apps_assignment_info() -> None:
    info = decode_assignment_info(assignment_user_data([("0", 1), ("1", 1)], [("1", 0)], [("1", 2)]))
    assert info.active_tasks == {TaskId(0, 1), TaskId(1, 1)}
    assert info.standby_tasks == {TaskId(1, 0)}
    assert info.warmup_tasks == {TaskId(1, 2)}


def test_task_offsets_are_sorted_and_leave_out_the_running_marker() -> None:
    sums = {TaskId(1, 0): 40, TaskId(0, 3): 7, TaskId(1, 1): RUNNING_OFFSET_SUM}
    assert task_offsets(sums) == (
        TaskOffset(subtopology_id="0", partition=3, offset=7),
        TaskOffset(subtopology_id="1", partition=0, offset=40),
    )
