"""TxnOffsetCommit (KIP-98, with KIP-447's group metadata): input offsets committed inside a
transaction, decoded and as pure data.

Since v3 the request carries the consumer group's metadata (generation id, member id, group
instance id; under KIP-848 the generation is the member epoch), so the group coordinator fences
a member that lost its partitions even when its transactional producer is not fenced: one
producer per process (exactly-once v2) can no longer be fenced by its ``transactional_id``
alone, as a producer per task was. :func:`txn_commit_verdict` says what the committing side
does with each answer.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from streamtasks.protocol.classic_group import CommittedOffset
from streamtasks.protocol.errors import KafkaErrorCode
from topology.ids import TopicPartition

__all__ = [
    "TXN_FENCED",
    "TxnCommitVerdict",
    "TxnOffsetCommitRequest",
    "TxnOffsetCommitResponse",
    "txn_commit_verdict",
]

#: Answers that mean this process may not commit these offsets any more: the group moved on
#: (generation, member, static instance) or a newer producer with our transactional id exists.
TXN_FENCED = frozenset(
    {
        KafkaErrorCode.ILLEGAL_GENERATION,
        KafkaErrorCode.UNKNOWN_MEMBER_ID,
        KafkaErrorCode.FENCED_INSTANCE_ID,
        KafkaErrorCode.FENCED_MEMBER_EPOCH,
        KafkaErrorCode.STALE_MEMBER_EPOCH,
        KafkaErrorCode.REBALANCE_IN_PROGRESS,
        KafkaErrorCode.INVALID_PRODUCER_EPOCH,
        KafkaErrorCode.PRODUCER_FENCED,
    }
)


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnOffsetCommitRequest:
    """Offsets to commit when the transaction of ``producer_id``/``producer_epoch`` commits,
    with the group metadata of the member that processed them."""

    transactional_id: str
    group_id: str
    producer_id: int
    producer_epoch: int
    #: The classic generation, or the KIP-848 member epoch.
    generation_id: int
    member_id: str
    group_instance_id: str | None
    offsets: tuple[CommittedOffset, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnOffsetCommitResponse:
    """Per partition, the coordinator's answer."""

    errors: tuple[tuple[TopicPartition, KafkaErrorCode], ...]


class TxnCommitVerdict(enum.Enum):
    """What to do with a TxnOffsetCommit answer."""

    #: Every partition's offset is pending in the transaction.
    DONE = "done"
    #: Send the partitions that failed again (coordinator moving or loading, a transaction
    #: marker still being written).
    RETRY = "retry"
    #: This process was fenced: abort the transaction, close the tasks dirty.
    FENCED = "fenced"
    #: Any other error: abort the transaction.
    FAILED = "failed"


def txn_commit_verdict(response: TxnOffsetCommitResponse) -> TxnCommitVerdict:
    """The verdict on ``response``: the worst of its partitions' answers (fenced over failed
    over retry)."""
    codes = {code for _, code in response.errors if code is not KafkaErrorCode.NONE}
    if codes & TXN_FENCED:
        return TxnCommitVerdict.FENCED
    if any(not code.retriable for code in codes):
        return TxnCommitVerdict.FAILED
    return TxnCommitVerdict.RETRY if codes else TxnCommitVerdict.DONE
