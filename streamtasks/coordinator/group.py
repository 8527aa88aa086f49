"""One consumer group's state: the only class whose fields change, and only in :meth:`replay`.

The fields are the replayed records (member metadata, current and target assignments, the
group and assignment epochs, the subscribed topics' metadata, the client-side assignment in
progress) and indexes derived from them on replay (who owns each partition, the static members
by instance id, how many members subscribe to each topic, how many are stable at each epoch),
so that a heartbeat costs O(1) in the size of the group. Writes read a group through its
properties and never change it.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Mapping
from types import MappingProxyType

from streamtasks.coordinator.records import (
    ClientAssignmentRequestRecord,
    ClientAssignmentRequestTombstone,
    CurrentMemberAssignmentRecord,
    CurrentMemberAssignmentTombstone,
    GroupEpochRecord,
    GroupEpochTombstone,
    MemberMetadataRecord,
    MemberMetadataTombstone,
    PartitionMetadataRecord,
    PartitionMetadataTombstone,
    PreparedAssignmentRecord,
    PreparedAssignmentTombstone,
    Record,
    TargetAssignmentMemberRecord,
    TargetAssignmentMemberTombstone,
    TargetAssignmentMetadataRecord,
    TargetAssignmentMetadataTombstone,
)
from streamtasks.coordinator.types import GroupState, MemberState, TopicMetadata
from streamtasks.errors import RemoteProtocolError

__all__ = ["ConsumerGroup"]


class ConsumerGroup:
    """A consumer group as its records say. Build it empty and :meth:`replay` records into it."""

    __slots__ = (
        "_classic_members",
        "_classic_protocols",
        "_current",
        "_members",
        "_owners",
        "_stable_at",
        "_static",
        "_subscribers",
        "_targets",
        "_topics_by_id",
        "_topics_by_name",
        "assignment_epoch",
        "assignor_name",
        "client_request",
        "group_epoch",
        "group_id",
        "partition_metadata",
        "prepared",
    )

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.assignor_name = ""
        self.partition_metadata: tuple[TopicMetadata, ...] = ()
        self.client_request: ClientAssignmentRequestRecord | None = None
        self.prepared: PreparedAssignmentRecord | None = None
        self._members: dict[str, MemberMetadataRecord] = {}
        self._current: dict[str, CurrentMemberAssignmentRecord] = {}
        self._targets: dict[str, TargetAssignmentMemberRecord] = {}
        self._topics_by_name: dict[str, TopicMetadata] = {}
        self._topics_by_id: dict[uuid.UUID, TopicMetadata] = {}
        # derived on replay
        self._owners: dict[tuple[uuid.UUID, int], str] = {}
        self._static: dict[str, str] = {}
        self._subscribers: Counter[str] = Counter()
        self._stable_at: Counter[int] = Counter()
        self._classic_members = 0
        self._classic_protocols: Counter[str] = Counter()

    # -- reads -----------------------------------------------------------------------------------

    @property
    def members(self) -> Mapping[str, MemberMetadataRecord]:
        return MappingProxyType(self._members)

    @property
    def current_assignments(self) -> Mapping[str, CurrentMemberAssignmentRecord]:
        return MappingProxyType(self._current)

    @property
    def targets(self) -> Mapping[str, TargetAssignmentMemberRecord]:
        return MappingProxyType(self._targets)

    def member(self, member_id: str) -> MemberMetadataRecord | None:
        return self._members.get(member_id)

    def current(self, member_id: str) -> CurrentMemberAssignmentRecord | None:
        return self._current.get(member_id)

    def target(self, member_id: str) -> TargetAssignmentMemberRecord | None:
        return self._targets.get(member_id)

    def static_member(self, instance_id: str) -> str | None:
        """The member id holding ``instance_id``, if any."""
        return self._static.get(instance_id)

    def owner(self, topic_id: uuid.UUID, partition: int) -> str | None:
        """The member that owns the partition (assigned, or not yet revoked), if any."""
        return self._owners.get((topic_id, partition))

    def supports_classic_protocols(self, names: frozenset[str], *, member_id: str) -> bool:
        """Whether one of ``names`` is a protocol every classic member other than ``member_id``
        offers (Kafka's ``supportsClassicProtocols``; true when there is no other)."""
        own = self._members.get(member_id)
        own_names = frozenset() if own is None or own.classic is None else own.classic.protocol_names
        others = self._classic_members - (own is not None and own.classic is not None)
        if others <= 0:
            return True
        return any(self._classic_protocols[n] - (n in own_names) == others for n in names)

    @property
    def subscribed_topic_counts(self) -> Mapping[str, int]:
        return MappingProxyType(self._subscribers)

    def topic_by_name(self, name: str) -> TopicMetadata | None:
        return self._topics_by_name.get(name)

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicMetadata | None:
        return self._topics_by_id.get(topic_id)

    @property
    def state(self) -> GroupState:
        if not self._members:
            return GroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return GroupState.ASSIGNING
        if self._stable_at[self.assignment_epoch] == len(self._members) == len(self._current):
            return GroupState.STABLE
        return GroupState.RECONCILING

    def snapshot(self) -> tuple[object, ...]:
        """Everything, derived indexes included, as one comparable value (for tests)."""
        return (
            self.group_id,
            self.group_epoch,
            self.assignment_epoch,
            self.assignor_name,
            self.partition_metadata,
            self.client_request,
            self.prepared,
            dict(self._members),
            dict(self._current),
            dict(self._targets),
            dict(self._owners),
            dict(self._static),
            +self._subscribers,
            +self._stable_at,
            self._classic_members,
            +self._classic_protocols,
            self.state,
        )

    # -- the only mutation ----------------------------------------------------------------------

    def replay(self, record: Record) -> None:
        """Apply one record of this group. Group deletion (:class:`GroupEpochTombstone`) is the
        coordinator's: it drops the whole object."""
        if record.group_id != self.group_id:
            raise RemoteProtocolError(f"record of group {record.group_id!r} replayed into {self.group_id!r}")
        match record:
            case GroupEpochRecord():
                self.group_epoch = record.epoch
            case PartitionMetadataRecord():
                self.partition_metadata = record.topics
                self._topics_by_name = {t.name: t for t in record.topics}
                self._topics_by_id = {t.topic_id: t for t in record.topics}
            case PartitionMetadataTombstone():
                self.partition_metadata = ()
                self._topics_by_name = {}
                self._topics_by_id = {}
            case MemberMetadataRecord():
                self._drop_member_indexes(record.member_id)
                self._members[record.member_id] = record
                if record.instance_id is not None:
                    self._static[record.instance_id] = record.member_id
                self._subscribers.update(record.subscribed_topic_names)
                if record.classic is not None:
                    self._classic_members += 1
                    self._classic_protocols.update(record.classic.protocol_names)
            case MemberMetadataTombstone():
                self._drop_member_indexes(record.member_id)
                self._members.pop(record.member_id, None)
            case TargetAssignmentMetadataRecord():
                self.assignment_epoch = record.assignment_epoch
                self.assignor_name = record.assignor_name
            case TargetAssignmentMetadataTombstone():
                self.assignment_epoch = 0
                self.assignor_name = ""
            case TargetAssignmentMemberRecord():
                self._targets[record.member_id] = record
            case TargetAssignmentMemberTombstone():
                self._targets.pop(record.member_id, None)
            case CurrentMemberAssignmentRecord():
                self._drop_current(record.member_id)
                self._current[record.member_id] = record
                owners = self._owners
                for pair in record.assigned.pairs():
                    owners[pair] = record.member_id
                for pair in record.pending_revocation.pairs():
                    owners[pair] = record.member_id
                if record.state is MemberState.STABLE:
                    self._stable_at[record.member_epoch] += 1
            case CurrentMemberAssignmentTombstone():
                self._drop_current(record.member_id)
            case ClientAssignmentRequestRecord():
                self.client_request = record
            case ClientAssignmentRequestTombstone():
                self.client_request = None
            case PreparedAssignmentRecord():
                self.prepared = record
            case PreparedAssignmentTombstone():
                self.prepared = None
            case GroupEpochTombstone():
                raise RemoteProtocolError("a group tombstone is replayed by the coordinator, not the group")

    def _drop_member_indexes(self, member_id: str) -> None:
        old = self._members.get(member_id)
        if old is None:
            return
        if old.instance_id is not None and self._static.get(old.instance_id) == member_id:
            del self._static[old.instance_id]
        self._subscribers.subtract(old.subscribed_topic_names)
        for name in old.subscribed_topic_names:
            if self._subscribers[name] <= 0:
                del self._subscribers[name]
        if old.classic is not None:
            self._classic_members -= 1
            self._classic_protocols.subtract(old.classic.protocol_names)
            for name in old.classic.protocol_names:
                if self._classic_protocols[name] <= 0:
                    del self._classic_protocols[name]

    def _drop_current(self, member_id: str) -> None:
        old = self._current.pop(member_id, None)
        if old is None:
            return
        owners = self._owners
        for pair in old.assigned.pairs():
            if owners.get(pair) == member_id:
                del owners[pair]
        for pair in old.pending_revocation.pairs():
            if owners.get(pair) == member_id:
                del owners[pair]
        if old.state is MemberState.STABLE:
            self._stable_at[old.member_epoch] -= 1
            if self._stable_at[old.member_epoch] <= 0:
                del self._stable_at[old.member_epoch]
