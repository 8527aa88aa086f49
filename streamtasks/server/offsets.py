"""Committed offsets of the groups the server coordinates: the store (changed only by
:meth:`OffsetStore.replay`, as the coordinator's groups are) and the fencing rules Kafka
applies to OffsetCommit / OffsetFetch for consumer groups (KIP-848): a member commits and
fetches with its current member epoch; an admin or simple client (no member id, epoch -1) may
commit only while the group has no members, and may always fetch. A classic-protocol member of
the group commits with its generation id, which is its member epoch, at any OffsetCommit
version, and is answered ILLEGAL_GENERATION (not STALE_MEMBER_EPOCH) when it differs. A streams
group's rules (KIP-1071) are the same for its members, with no classic members."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from streamtasks.coordinator import ConsumerGroup
from streamtasks.coordinator.record_codec import OffsetCommitRecord, OffsetCommitTombstone
from streamtasks.coordinator.streams import StreamsGroup
from streamtasks.protocol.errors import KafkaErrorCode

__all__ = [
    "MAX_METADATA_BYTES",
    "OffsetCommitCheck",
    "OffsetStore",
    "check_commit",
    "check_fetch",
    "check_streams_commit",
    "check_streams_fetch",
]

#: Kafka's ``offset.metadata.max.bytes`` default.
MAX_METADATA_BYTES = 4096


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetCommitCheck:
    """Who is committing: the group, the member id and epoch from the request, its version."""

    group_id: str
    member_id: str
    member_epoch: int
    api_version: int


def check_commit(group: ConsumerGroup | None, check: OffsetCommitCheck) -> KafkaErrorCode:
    """The error every partition of an OffsetCommit gets (NONE: the commit may go ahead)."""
    if group is None or not group.members:
        if check.member_epoch < 0:
            return KafkaErrorCode.NONE  # admin / simple commit to a group with no members
        if group is None:
            return (
                KafkaErrorCode.GROUP_ID_NOT_FOUND
                if check.api_version >= 9
                else KafkaErrorCode.ILLEGAL_GENERATION
            )
    current = group.current(check.member_id)
    member = group.member(check.member_id)
    if member is None or current is None:
        return KafkaErrorCode.UNKNOWN_MEMBER_ID
    if member.classic is None and check.api_version < 9:
        return KafkaErrorCode.UNSUPPORTED_VERSION  # a KIP-848 member commits with v9+
    return _epoch_check(check.member_epoch, current.member_epoch, classic=member.classic is not None)


def _epoch_check(received: int, expected: int, *, classic: bool) -> KafkaErrorCode:
    if received == expected:
        return KafkaErrorCode.NONE
    return KafkaErrorCode.ILLEGAL_GENERATION if classic else KafkaErrorCode.STALE_MEMBER_EPOCH


def check_fetch(group: ConsumerGroup | None, member_id: str | None, member_epoch: int) -> KafkaErrorCode:
    """The error of an OffsetFetch for one group (NONE: answer the offsets)."""
    if member_epoch < 0 and not member_id:
        return KafkaErrorCode.NONE
    if group is None:
        return KafkaErrorCode.GROUP_ID_NOT_FOUND
    current = group.current(member_id or "")
    member = group.member(member_id or "")
    if member is None or current is None:
        return KafkaErrorCode.UNKNOWN_MEMBER_ID
    return _epoch_check(member_epoch, current.member_epoch, classic=member.classic is not None)


def _streams_epoch_check(group: StreamsGroup, member_id: str, member_epoch: int) -> KafkaErrorCode:
    current = group.current(member_id)
    if group.member(member_id) is None or current is None:
        return KafkaErrorCode.UNKNOWN_MEMBER_ID
    return KafkaErrorCode.NONE if member_epoch == current.member_epoch else KafkaErrorCode.STALE_MEMBER_EPOCH


def check_streams_commit(group: StreamsGroup, check: OffsetCommitCheck) -> KafkaErrorCode:
    """Apache Kafka's ``StreamsGroup#validateOffsetCommit``: an admin commit (epoch < 0) only
    while the group has no members; else a member at its current epoch, with v9+."""
    if check.member_epoch < 0 and not group.members:
        return KafkaErrorCode.NONE
    if check.api_version < 9 and group.member(check.member_id) is not None:
        return KafkaErrorCode.UNSUPPORTED_VERSION
    return _streams_epoch_check(group, check.member_id, check.member_epoch)


def check_streams_fetch(group: StreamsGroup, member_id: str | None, member_epoch: int) -> KafkaErrorCode:
    """``StreamsGroup#validateOffsetFetch``: an admin fetch always; a member at its epoch."""
    if member_epoch < 0 and not member_id:
        return KafkaErrorCode.NONE
    return _streams_epoch_check(group, member_id or "", member_epoch)


class OffsetStore:
    """The last committed offset per (group, topic, partition)."""

    __slots__ = ("_groups",)

    def __init__(self) -> None:
        self._groups: dict[str, dict[tuple[str, int], OffsetCommitRecord]] = {}

    def replay(self, record: OffsetCommitRecord | OffsetCommitTombstone) -> None:
        key = (record.topic, record.partition)
        if isinstance(record, OffsetCommitTombstone):
            offsets = self._groups.get(record.group_id)
            if offsets is not None:
                offsets.pop(key, None)
                if not offsets:
                    del self._groups[record.group_id]
            return
        self._groups.setdefault(record.group_id, {})[key] = record

    def committed(self, group_id: str, topic: str, partition: int) -> OffsetCommitRecord | None:
        return self._groups.get(group_id, {}).get((topic, partition))

    def partitions(self, group_id: str) -> Iterable[tuple[str, int]]:
        """Every partition the group has an offset for, sorted."""
        return sorted(self._groups.get(group_id, {}))

    def group_ids(self) -> list[str]:
        return sorted(self._groups)

    def __len__(self) -> int:
        return sum(len(o) for o in self._groups.values())
