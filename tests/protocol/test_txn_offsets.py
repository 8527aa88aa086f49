"""TxnOffsetCommit: the verdict on each answer, and the v3 wire form with the group metadata."""

from __future__ import annotations

import datetime
import io

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.txn_offset_commit.v3.request import TxnOffsetCommitRequest as KRequest
from kio.schema.txn_offset_commit.v3.response import (
    TxnOffsetCommitResponse as KResponse,
)
from kio.schema.txn_offset_commit.v3.response import (
    TxnOffsetCommitResponsePartition,
    TxnOffsetCommitResponseTopic,
)
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i32, i32Timedelta

from streamtasks.protocol.classic_group import CommittedOffset
from streamtasks.protocol.errors import KafkaErrorCode
from streamtasks.protocol.txn_offsets import (
    TxnCommitVerdict,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
    txn_commit_verdict,
)
from streamtasks.runtime.group_wire import from_wire, response_type, to_wire
from topology.ids import TopicPartition

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)
E = KafkaErrorCode


def _verdict(*codes: KafkaErrorCode) -> TxnCommitVerdict:
    parts = (A0, A1, B0)
    return txn_commit_verdict(TxnOffsetCommitResponse(errors=tuple(zip(parts, codes, strict=False))))


def test_all_none_is_done() -> None:
    assert _verdict(E.NONE, E.NONE) is TxnCommitVerdict.DONE


@pytest.mark.parametrize(
    "code",
    [E.COORDINATOR_LOAD_IN_PROGRESS, E.NOT_COORDINATOR, E.CONCURRENT_TRANSACTIONS, E.REQUEST_TIMED_OUT],
)
def test_a_moving_or_busy_coordinator_is_retried(code: KafkaErrorCode) -> None:
    assert _verdict(E.NONE, code) is TxnCommitVerdict.RETRY


@pytest.mark.parametrize(
    "code",
    [
        E.ILLEGAL_GENERATION,
        E.UNKNOWN_MEMBER_ID,
        E.FENCED_INSTANCE_ID,
        E.FENCED_MEMBER_EPOCH,
        E.REBALANCE_IN_PROGRESS,
        E.INVALID_PRODUCER_EPOCH,
        E.PRODUCER_FENCED,
    ],
)
def test_a_member_or_producer_that_moved_on_is_fenced_whatever_else_answered(code: KafkaErrorCode) -> None:
    assert _verdict(E.NOT_COORDINATOR, code, E.GROUP_AUTHORIZATION_FAILED) is TxnCommitVerdict.FENCED


def test_any_other_error_fails_the_transaction() -> None:
    assert _verdict(E.NOT_COORDINATOR, E.GROUP_AUTHORIZATION_FAILED) is TxnCommitVerdict.FAILED


def test_v3_carries_the_group_metadata_on_the_wire() -> None:
    request = TxnOffsetCommitRequest(
        transactional_id="app-3f0c",
        group_id="app",
        producer_id=4001,
        producer_epoch=7,
        generation_id=12,
        member_id="m-1",
        group_instance_id="w1",
        offsets=(
            CommittedOffset(partition=B0, offset=5),
            CommittedOffset(partition=A1, offset=30),
            CommittedOffset(partition=A0, offset=20),
        ),
    )
    entity = to_wire(request)
    buffer = io.BytesIO()
    entity_writer(KRequest)(buffer, entity)
    decoded, _ = entity_reader(KRequest)(memoryview(buffer.getvalue()), 0)
    assert (decoded.transactional_id, decoded.group_id) == ("app-3f0c", "app")
    assert (decoded.producer_id, decoded.producer_epoch) == (4001, 7)
    assert (decoded.generation_id, decoded.member_id, decoded.group_instance_id) == (12, "m-1", "w1")
    assert [
        (t.name, [(p.partition_index, p.committed_offset) for p in t.partitions]) for t in decoded.topics
    ] == [
        ("a", [(0, 20), (1, 30)]),
        ("b", [(0, 5)]),
    ]
    assert response_type(request) is KResponse


def test_the_answer_decodes_per_partition() -> None:
    response = KResponse(
        throttle_time=i32Timedelta.parse(datetime.timedelta(0)),
        topics=(
            TxnOffsetCommitResponseTopic(
                name="a",  # type: ignore[arg-type]
                partitions=(
                    TxnOffsetCommitResponsePartition(partition_index=i32(0), error_code=ErrorCode.none),
                    TxnOffsetCommitResponsePartition(
                        partition_index=i32(1), error_code=ErrorCode.illegal_generation
                    ),
                ),
            ),
        ),
    )
    decoded = from_wire(response)
    assert decoded == TxnOffsetCommitResponse(errors=((A0, E.NONE), (A1, E.ILLEGAL_GENERATION)))
    assert txn_commit_verdict(decoded) is TxnCommitVerdict.FENCED
