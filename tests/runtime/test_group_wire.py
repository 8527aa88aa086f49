"""The committed offsets' metadata strings on the wire: OffsetCommit and TxnOffsetCommit send
them, OffsetFetch answers them (empty ones are left out)."""

from __future__ import annotations

import datetime

from kio.schema.errors import ErrorCode
from kio.schema.offset_fetch.v7 import response as fetch_v7
from kio.static.primitive import i32, i32Timedelta, i64

from streamtasks.membership.common.actions import CommitOffsets
from streamtasks.protocol.classic_group import OffsetFetchResponse
from streamtasks.runtime.group_member import committed_offsets
from streamtasks.runtime.group_wire import from_wire, to_wire
from topology import TopicPartition

P0, P1 = TopicPartition("clicks", 0), TopicPartition("clicks", 1)


def test_offset_commit_sends_each_offsets_metadata() -> None:
    action = CommitOffsets(
        request_id=1,
        group_id="g",
        member_id="m",
        generation_id=3,
        group_instance_id=None,
        partitions=(P0, P1),
    )
    request = to_wire(action.to_request({P0: 5, P1: 9}, {P0: "AgAAAAAAAAPo"}))
    sent = {
        (int(p.partition_index), int(p.committed_offset), p.committed_metadata)
        for p in request.topics[0].partitions
    }
    assert sent == {(0, 5, "AgAAAAAAAAPo"), (1, 9, "")}
    assert [o.metadata for o in committed_offsets({P1: 2, P0: 1}, {P1: "x"})] == ["", "x"]


def test_offset_fetch_answers_the_metadata_strings() -> None:
    def part(index: int, metadata: str | None) -> fetch_v7.OffsetFetchResponsePartition:
        return fetch_v7.OffsetFetchResponsePartition(
            partition_index=i32(index),
            committed_offset=i64(10 + index),
            committed_leader_epoch=i32(-1),
            metadata=metadata,
            error_code=ErrorCode.none,
        )

    wire = fetch_v7.OffsetFetchResponse(
        throttle_time=i32Timedelta.parse(datetime.timedelta(0)),
        topics=(
            fetch_v7.OffsetFetchResponseTopic(
                name="clicks", partitions=(part(0, "AgAAAAAAAAPo"), part(1, ""))
            ),
        ),  # type: ignore[arg-type]
        error_code=ErrorCode.none,
    )
    answer = from_wire(wire)
    assert isinstance(answer, OffsetFetchResponse)
    assert [(tp, off) for tp, off, _ in answer.offsets] == [(P0, 10), (P1, 11)]
    assert answer.metadata == ((P0, "AgAAAAAAAAPo"),)
