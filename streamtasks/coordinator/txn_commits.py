"""Transactional offset commits on a coordinator whose offsets live in another cluster, pure.

``streamtasks coordinator`` serves TxnOffsetCommit by checking the committing member against its
own group here and forwarding the offsets to the backing cluster's group coordinator as a
*simple* commit (no member id, generation -1), so they join the producer's transaction in
``__consumer_offsets`` and the transaction markers make them committed or aborted. Three pure
pieces (docs/coordinator.md, "Exactly-once"):

- :func:`check_txn_commit` / :func:`check_streams_txn_commit`: Apache Kafka's
  ``validateTransactionalOffsetCommit`` for consumer and streams groups (KIP-447), same codes;
- :class:`CommitHolds`: which groups have a forwarded commit in flight, and which have a write
  waiting for them. While a commit of a group is in flight, no write of that group (heartbeat,
  join, sync, leave, Prepare/Install, timer) is computed, so the member cannot be fenced
  between the check and the cluster's write; a waiting write keeps new commits of the group
  back until it ran (no write waits for ever behind a stream of commits);
- :class:`TransactionalGroupRecord`: the log record saying a group has committed
  transactionally (from then on its offsets are read from the cluster), with its key/value
  bytes (record type 447).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from streamtasks.coordinator.group import ConsumerGroup
from streamtasks.coordinator.streams import StreamsGroup
from streamtasks.errors import DecodeError
from streamtasks.protocol import _flex as F
from streamtasks.protocol._buf import Reader, Writer
from streamtasks.protocol.errors import KafkaErrorCode

__all__ = [
    "TRANSACTIONAL_GROUP_RECORD_TYPE",
    "CommitHolds",
    "TransactionalGroupRecord",
    "TxnCommitter",
    "check_streams_txn_commit",
    "check_txn_commit",
    "decode_transactional_group",
    "encode_transactional_group",
]

#: The key's int16 record type (KIP-447); not a type Kafka's ``__consumer_offsets`` uses.
TRANSACTIONAL_GROUP_RECORD_TYPE = 447
_VALUE_VERSION = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class TxnCommitter:
    """Who sends a TxnOffsetCommit: its group metadata (all unknown before v3)."""

    member_id: str = ""
    #: The classic generation or the KIP-848 / KIP-1071 member epoch; -1 when not given.
    generation_id: int = -1
    group_instance_id: str | None = None

    @property
    def anonymous(self) -> bool:
        """No group metadata at all (TxnOffsetCommit v0-v2, or a client not in the group)."""
        return self.generation_id == -1 and not self.member_id and self.group_instance_id is None


def check_txn_commit(group: ConsumerGroup | None, who: TxnCommitter) -> KafkaErrorCode:
    """Kafka's ``validateTransactionalOffsetCommit`` on a consumer group (classic members
    included): a group the coordinator does not have accepts only generation -1 (Kafka creates a
    simple group), else ILLEGAL_GENERATION; an empty group accepts generation -1; a commit with
    no group metadata at all is accepted (older TxnOffsetCommit versions carry none); otherwise
    the member must exist (UNKNOWN_MEMBER_ID) at its current epoch (ILLEGAL_GENERATION: the
    transactional API has no STALE_MEMBER_EPOCH)."""
    if group is None:
        return KafkaErrorCode.NONE if who.generation_id < 0 else KafkaErrorCode.ILLEGAL_GENERATION
    if who.generation_id < 0 and not group.members:
        return KafkaErrorCode.NONE
    if who.anonymous:
        return KafkaErrorCode.NONE
    current = group.current(who.member_id)
    if group.member(who.member_id) is None or current is None:
        return KafkaErrorCode.UNKNOWN_MEMBER_ID
    if who.generation_id != current.member_epoch:
        return KafkaErrorCode.ILLEGAL_GENERATION
    return KafkaErrorCode.NONE


def check_streams_txn_commit(group: StreamsGroup, who: TxnCommitter) -> KafkaErrorCode:
    """``StreamsGroup#validateOffsetCommit`` for a transactional commit, as Kafka's
    ``validateTransactionalOffsetCommit`` answers it (STALE_MEMBER_EPOCH becomes
    ILLEGAL_GENERATION)."""
    if who.generation_id < 0 and not group.members:
        return KafkaErrorCode.NONE
    if who.anonymous:
        return KafkaErrorCode.NONE
    current = group.current(who.member_id)
    if group.member(who.member_id) is None or current is None:
        return KafkaErrorCode.UNKNOWN_MEMBER_ID
    if who.generation_id != current.member_epoch:
        return KafkaErrorCode.ILLEGAL_GENERATION
    return KafkaErrorCode.NONE


class CommitHolds:
    """Forwarded commits in flight and writes waiting, per group (see the module docstring).

    The host asks :meth:`may_write` before it computes a write of a group, and :meth:`may_commit`
    before it checks a commit; a write that may not run yet is counted with :meth:`wait_write`
    (and :meth:`wrote` once it ran), a commit from its check to the cluster's answer with
    :meth:`begin` / :meth:`end`. :meth:`held` names the groups whose timers must not fire."""

    __slots__ = ("_in_flight", "_waiting")

    def __init__(self) -> None:
        self._in_flight: Counter[str] = Counter()
        self._waiting: Counter[str] = Counter()

    def may_write(self, group_id: str) -> bool:
        return self._in_flight[group_id] == 0

    def may_commit(self, group_id: str) -> bool:
        return self._waiting[group_id] == 0

    def begin(self, group_id: str) -> None:
        self._in_flight[group_id] += 1

    def end(self, group_id: str) -> None:
        _release(self._in_flight, group_id, "commit of group {!r} is in flight")

    def wait_write(self, group_id: str) -> None:
        self._waiting[group_id] += 1

    def wrote(self, group_id: str) -> None:
        _release(self._waiting, group_id, "write of group {!r} is waiting")

    def in_flight(self, group_id: str) -> int:
        return self._in_flight[group_id]

    def held(self) -> frozenset[str]:
        """The groups with a forwarded commit in flight (their timers wait)."""
        return frozenset(g for g, n in self._in_flight.items() if n > 0)


def _release(counts: Counter[str], group_id: str, what: str) -> None:
    """One fewer of ``group_id`` in ``counts`` (gone at 0); ValueError "no <what>" when none."""
    if counts[group_id] <= 0:
        raise ValueError("no " + what.format(group_id))
    counts[group_id] -= 1
    if not counts[group_id]:
        del counts[group_id]


@dataclass(frozen=True, slots=True, kw_only=True)
class TransactionalGroupRecord:
    """The group has committed offsets transactionally: its offsets are in the backing
    cluster's ``__consumer_offsets`` from then on (written once, before the first forward)."""

    group_id: str


def encode_transactional_group(record: TransactionalGroupRecord) -> tuple[bytes, bytes]:
    """Key: int16 447, the group id (int16-length string); value: int16 version 0 and an empty
    tagged-field section."""
    key = Writer()
    key.int16(TRANSACTIONAL_GROUP_RECORD_TYPE, "key type")
    key.kafka_nullable_string(record.group_id, "group id")
    value = Writer()
    value.int16(_VALUE_VERSION, "value version")
    F.write_tagged_fields(value, {})
    return key.getvalue(), value.getvalue()


def decode_transactional_group(key: bytes, value: bytes | None) -> TransactionalGroupRecord:
    r = Reader(key, "transactional group record key")
    kind = r.int16()
    if kind != TRANSACTIONAL_GROUP_RECORD_TYPE:
        raise r.fail(f"record type {kind} is not {TRANSACTIONAL_GROUP_RECORD_TYPE}")
    group_id = r.kafka_string("group id")
    if r.remaining:
        raise r.fail(f"{r.remaining} trailing byte(s)")
    if value is None:
        raise DecodeError(f"transactional group record of {group_id!r} without a value")
    v = Reader(value, "transactional group record value")
    version = v.int16()
    if version != _VALUE_VERSION:
        raise v.fail(f"value version {version} is not supported (only {_VALUE_VERSION})")
    F.read_tagged_fields(v, "record value", {})
    if v.remaining:
        raise v.fail(f"{v.remaining} trailing byte(s)")
    return TransactionalGroupRecord(group_id=group_id)
