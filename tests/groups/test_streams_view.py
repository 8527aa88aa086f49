"""A StreamsGroupDescribe group as ``streamtasks groups describe`` shows it (pure)."""

from __future__ import annotations

import json

from streamtasks.groups.offsets import offset_rows, task_lags
from streamtasks.groups.streams_view import render_streams, streams_group_view, streams_owners
from streamtasks.protocol.errors import KafkaErrorCode
from streamtasks.protocol.streams_group import (
    DescribedStreamsGroup,
    DescribedStreamsMember,
    DescribedSubtopology,
    DescribedTopology,
    Endpoint,
    TaskAssignment,
    TaskIds,
    TaskOffset,
    TopicInfo,
)
from topology.ids import TopicPartition


def _group(subtopologies: tuple[DescribedSubtopology, ...] | None) -> DescribedStreamsGroup:
    member = DescribedStreamsMember(
        member_id="m1", member_epoch=5, client_id="c1", client_host="/h", topology_epoch=0, process_id="p1",
        assignment=TaskAssignment(active_tasks=(TaskIds(subtopology_id="0", partitions=(1, 0)),)),
        target_assignment=TaskAssignment(
            active_tasks=(TaskIds(subtopology_id="0", partitions=(0,)),),
            warmup_tasks=(
                TaskIds(subtopology_id="10", partitions=(0,)),
                TaskIds(subtopology_id="2", partitions=(0,)),
            ),
        ),
        user_endpoint=Endpoint(host="h1", port=8080),
        task_offsets=(TaskOffset(subtopology_id="0", partition=0, offset=7),),
        task_end_offsets=(TaskOffset(subtopology_id="0", partition=0, offset=10),),
    )  # fmt: skip
    return DescribedStreamsGroup(
        error=KafkaErrorCode.NONE, group_id="s", group_state="Reconciling", group_epoch=6, assignment_epoch=6,
        topology=DescribedTopology(epoch=0, subtopologies=subtopologies), members=(member,),
        assignor_name="sticky",
    )  # fmt: skip


def test_topology_tasks_current_against_target_and_task_lags() -> None:
    sub = DescribedSubtopology(
        subtopology_id="0", source_topics=("in",), repartition_sink_topics=("s-rep",),
        state_changelog_topics=(TopicInfo(name="s-store-changelog", partitions=2),),
    )  # fmt: skip
    view = streams_group_view(_group((sub,)))
    document = json.loads(json.dumps(view.to_json()))
    assert document["type"] == "streams"
    assert document["topology_epoch"] == 0
    assert document["subtopologies"][0]["changelog_topics"] == ["s-store-changelog"]
    (member,) = document["members"]
    assert member["current_assignment"]["active"] == ["0_0", "0_1"]
    assert member["target_assignment"] == {"active": ["0_0"], "standby": [], "warmup": ["2_0", "10_0"]}
    assert member["endpoint"] == "h1:8080"
    assert member["task_lags"] == {"0_0": 3}
    text = render_streams(view).splitlines()
    assert text[0].startswith("group s: streams (KIP-1071), state Reconciling, group epoch 6")
    assert text[1].split()[0] == "SUBTOPOLOGY"
    assert text[3].split()[:7] == ["MEMBER", "CLIENT-ID", "PROCESS", "ENDPOINT", "EPOCH", "ACTIVE", "STANDBY"]
    assert text[4].split()[-1] == "0_0=3"
    assert len(render_streams(view, members=False).splitlines()) == 3


def test_a_group_without_a_configured_topology_says_so() -> None:
    view = streams_group_view(_group(None))
    assert view.subtopologies is None
    assert view.to_json()["subtopologies"] is None
    assert "topology: not configured yet" in render_streams(view)


def test_the_offsets_of_a_streams_group_name_their_owner_and_task() -> None:
    """``--offsets`` of a live streams group showed OWNER and TASK as ``-`` on every row (and no
    per-task lag): the topology names each subtopology's input topics, a member's active
    tasks their partitions."""
    subs = (
        DescribedSubtopology(subtopology_id="0", source_topics=("in",), repartition_sink_topics=("s-rep",)),
        DescribedSubtopology(subtopology_id="1", source_topics=(), repartition_source_topics=(
            TopicInfo(name="s-rep", partitions=2),)),
    )  # fmt: skip
    view = streams_group_view(_group(subs))
    owners, tasks = streams_owners(view)  # m1 (client c1) runs active 0_0 and 0_1
    assert owners == {TopicPartition("in", 0): "c1", TopicPartition("in", 1): "c1"}
    assert tasks == {TopicPartition("in", 0): "0_0", TopicPartition("in", 1): "0_1"}
    committed = {TopicPartition("in", 0): 5, TopicPartition("in", 1): 9, TopicPartition("s-rep", 0): 3}
    ends = {TopicPartition("in", 0): 8, TopicPartition("in", 1): 9, TopicPartition("s-rep", 0): 4}
    rows = offset_rows(committed, ends, owners, tasks)
    assert [(r.partition.topic, r.owner, r.task, r.lag) for r in rows] == [
        ("in", "c1", "0_0", 3), ("in", "c1", "0_1", 0), ("s-rep", None, None, 1),
    ]  # fmt: skip
    assert task_lags(rows) == {"0_0": 3, "0_1": 0}
    assert streams_owners(streams_group_view(_group(None))) == ({}, {})
