"""One write's scratchpad for one group: the records it emits and the group as it will be once
they are replayed, without touching the group (Kafka builds the same picture in the local
variables of its write methods). Every write module works through a :class:`GroupUpdate`:
emit records, read the would-be state, and hand back a :class:`~.result.Result`.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Protocol, TypeVar

from assignors.partition.types import PartitionAssignor
from streamtasks.coordinator.group import ConsumerGroup
from streamtasks.coordinator.parked import AnswerJoin, JoinOp, ParkedJoin, ParkedView, ParkJoin, settle_parked
from streamtasks.coordinator.records import (
    ClientAssignmentRequestRecord,
    ClientAssignmentRequestTombstone,
    CurrentMemberAssignmentRecord,
    CurrentMemberAssignmentTombstone,
    GroupEpochRecord,
    MemberMetadataRecord,
    MemberMetadataTombstone,
    PartitionMetadataRecord,
    PreparedAssignmentRecord,
    PreparedAssignmentTombstone,
    Record,
    TargetAssignmentMemberRecord,
    TargetAssignmentMemberTombstone,
    TargetAssignmentMetadataRecord,
)
from streamtasks.coordinator.result import Result
from streamtasks.coordinator.selection import choose_member, preferred_server_assignor, select_client_assignor
from streamtasks.coordinator.target import run_server_assignor, target_records
from streamtasks.coordinator.timers import CancelTimer, ScheduleTimer, TimerKey, TimerKind, TimerOp
from streamtasks.coordinator.types import CoordinatorConfig, MetadataImage, TopicMetadata
from streamtasks.protocol.classic_group import JoinGroupResponse
from streamtasks.protocol.consumer_group import LEAVE_GROUP_STATIC_MEMBER_EPOCH
from streamtasks.protocol.errors import KafkaErrorCode

__all__ = ["GroupUpdate", "TimerView", "WriteContext"]

R = TypeVar("R")


class TimerView(Protocol):
    def is_armed(self, key: TimerKey) -> bool: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class WriteContext:
    """What a write may read besides the group: settings, assignors, metadata, timers, time."""

    config: CoordinatorConfig
    assignors: Mapping[str, PartitionAssignor]
    image: MetadataImage
    timers: TimerView
    parked: ParkedView
    now_ms: int


class GroupUpdate:
    """Records and timer operations for one group, and the group as they will leave it."""

    __slots__ = (
        "_claimed",
        "_current",
        "_members",
        "_parked",
        "_targets",
        "aliases",
        "assignment_epoch",
        "assignment_timer_armed",
        "bumped",
        "client_request",
        "ctx",
        "group",
        "group_epoch",
        "group_id",
        "interval_timer_armed",
        "joins",
        "partition_metadata",
        "prepared",
        "records",
        "removed",
        "timers",
    )

    def __init__(self, group: ConsumerGroup | None, group_id: str, ctx: WriteContext) -> None:
        self.group = group
        self.group_id = group_id
        self.ctx = ctx
        self.records: list[Record] = []
        self.timers: list[TimerOp] = []
        self._members: dict[str, MemberMetadataRecord | None] = {}
        self._current: dict[str, CurrentMemberAssignmentRecord | None] = {}
        self._targets: dict[str, TargetAssignmentMemberRecord | None] = {}
        self.group_epoch = group.group_epoch if group else 0
        self.assignment_epoch = group.assignment_epoch if group else 0
        self.partition_metadata: tuple[TopicMetadata, ...] = group.partition_metadata if group else ()
        self.client_request = group.client_request if group else None
        self.prepared = group.prepared if group else None
        #: Members removed by this write: what they owned is free.
        self.removed: set[str] = set()
        #: Static takeover: old member id -> new member id (the new one owns what the old did).
        self.aliases: dict[str, str] = {}
        self.bumped = False
        self.assignment_timer_armed = ctx.timers.is_armed(self.assignment_timer)
        self.interval_timer_armed = ctx.timers.is_armed(self.interval_timer)
        #: Parked classic joins: the group's, with this write's parks and answers over them.
        self.joins: list[JoinOp] = []
        self._parked: dict[str, ParkedJoin | None] = {}
        #: Partitions members took in this write (tracked only while joins are parked, for
        #: :meth:`owner_now`).
        self._claimed: dict[tuple[uuid.UUID, int], str] | None = {} if ctx.parked.has(group_id) else None

    # -- the would-be state -----------------------------------------------------------------------

    def member(self, member_id: str) -> MemberMetadataRecord | None:
        if member_id in self._members:
            return self._members[member_id]
        return self.group.member(member_id) if self.group else None

    def current(self, member_id: str) -> CurrentMemberAssignmentRecord | None:
        if member_id in self._current:
            return self._current[member_id]
        return self.group.current(member_id) if self.group else None

    def target(self, member_id: str) -> TargetAssignmentMemberRecord | None:
        if member_id in self._targets:
            return self._targets[member_id]
        return self.group.target(member_id) if self.group else None

    def all_members(self) -> dict[str, MemberMetadataRecord]:
        """Every member after this write (O(group size): for epoch bumps only)."""
        out = dict(self.group.members) if self.group else {}
        for member_id, record in self._members.items():
            if record is None:
                out.pop(member_id, None)
            else:
                out[member_id] = record
        return out

    def member_count(self) -> int:
        count = len(self.group.members) if self.group else 0
        for member_id, record in self._members.items():
            existed = self.group is not None and self.group.member(member_id) is not None
            count += (record is not None) - existed
        return count

    def present_members(self) -> dict[str, MemberMetadataRecord]:
        """Members not away (a static member that left with epoch -2 is away)."""
        out = {}
        for member_id, record in self.all_members().items():
            current = self.current(member_id)
            if current is None or current.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                out[member_id] = record
        return out

    def owner_of(self, topic_id: uuid.UUID, partition: int) -> str | None:
        owner = self.group.owner(topic_id, partition) if self.group else None
        if owner is None or owner in self.removed:
            return None
        return self.aliases.get(owner, owner)

    def owner_now(self, topic_id: uuid.UUID, partition: int) -> str | None:
        """:meth:`owner_of` with this write's changes: a partition its owner released in this
        write is free, one a member took in this write is that member's (exact only while
        joins are parked, when :func:`~.parked.settle_parked` reconciles after other members)."""
        owner = self.owner_of(topic_id, partition)
        if owner is not None and owner in self._current:
            current = self._current[owner]
            pair = (topic_id, partition)
            if current is None or (pair not in current.assigned and pair not in current.pending_revocation):
                owner = None
        if owner is None and self._claimed is not None:
            return self._claimed.get((topic_id, partition))
        return owner

    def parked_joins(self) -> dict[str, ParkedJoin]:
        """The group's parked joins after this write."""
        out = dict(self.ctx.parked.in_group(self.group_id))
        for member_id, parked in self._parked.items():
            if parked is None:
                out.pop(member_id, None)
            else:
                out[member_id] = parked
        return out

    def subscribed_topic_names(self) -> set[str]:
        counts: Counter[str] = Counter(self.group.subscribed_topic_counts) if self.group else Counter()
        for member_id, record in self._members.items():
            old = self.group.member(member_id) if self.group else None
            if old is not None:
                counts.subtract(old.subscribed_topic_names)
            if record is not None:
                counts.update(record.subscribed_topic_names)
        return {name for name, count in counts.items() if count > 0}

    def topic_ids(self, names: tuple[str, ...]) -> frozenset[uuid.UUID]:
        """Ids of the named topics in the (would-be) subscribed topics' metadata."""
        group = self.group
        if group is not None and self.partition_metadata is group.partition_metadata:
            found = (group.topic_by_name(n) for n in names)
            return frozenset(t.topic_id for t in found if t is not None)
        by_name = {t.name: t for t in self.partition_metadata}
        return frozenset(by_name[n].topic_id for n in names if n in by_name)

    @property
    def assignment_timer(self) -> TimerKey:
        return TimerKey(TimerKind.ASSIGNMENT, self.group_id)

    @property
    def interval_timer(self) -> TimerKey:
        return TimerKey(TimerKind.ASSIGNMENT_INTERVAL, self.group_id)

    def session_timer(self, member_id: str) -> TimerKey:
        return TimerKey(TimerKind.SESSION, self.group_id, member_id)

    def revocation_timer(self, member_id: str) -> TimerKey:
        return TimerKey(TimerKind.REVOCATION, self.group_id, member_id)

    def join_timer(self, member_id: str) -> TimerKey:
        return TimerKey(TimerKind.JOIN, self.group_id, member_id)

    def sync_timer(self, member_id: str) -> TimerKey:
        return TimerKey(TimerKind.SYNC, self.group_id, member_id)

    # -- emitting -----------------------------------------------------------------------------------

    def emit(self, record: Record) -> None:
        """Append a record and fold it into the would-be state."""
        self.records.append(record)
        match record:
            case MemberMetadataRecord():
                self._members[record.member_id] = record
            case MemberMetadataTombstone():
                self._members[record.member_id] = None
            case CurrentMemberAssignmentRecord():
                self._current[record.member_id] = record
            case CurrentMemberAssignmentTombstone():
                self._current[record.member_id] = None
            case TargetAssignmentMemberRecord():
                self._targets[record.member_id] = record
            case TargetAssignmentMemberTombstone():
                self._targets[record.member_id] = None
            case GroupEpochRecord():
                self.group_epoch = record.epoch
            case TargetAssignmentMetadataRecord():
                self.assignment_epoch = record.assignment_epoch
            case PartitionMetadataRecord():
                self.partition_metadata = record.topics
            case ClientAssignmentRequestRecord():
                self.client_request = record
            case ClientAssignmentRequestTombstone():
                self.client_request = None
            case PreparedAssignmentRecord():
                self.prepared = record
            case PreparedAssignmentTombstone():
                self.prepared = None
            case _:
                pass

    def schedule(self, key: TimerKey, deadline_ms: int) -> None:
        self.timers.append(ScheduleTimer(key=key, deadline_ms=deadline_ms))
        if key == self.assignment_timer:
            self.assignment_timer_armed = True
        elif key == self.interval_timer:
            self.interval_timer_armed = True

    def cancel(self, key: TimerKey, *, armed: bool | None = None) -> None:
        """Cancel ``key`` if it is (or may be) armed."""
        if armed is None:
            if key == self.assignment_timer:
                armed = self.assignment_timer_armed
            elif key == self.interval_timer:
                armed = self.interval_timer_armed
            else:
                armed = self.ctx.timers.is_armed(key)
        if armed:
            self.timers.append(CancelTimer(key=key))
        if key == self.assignment_timer:
            self.assignment_timer_armed = False
        elif key == self.interval_timer:
            self.interval_timer_armed = False

    def put_member(self, record: MemberMetadataRecord) -> None:
        existing = self.member(record.member_id)
        if existing is not record and existing != record:
            self.emit(record)

    def put_current(self, record: CurrentMemberAssignmentRecord) -> None:
        existing = self.current(record.member_id)
        if existing is not record and existing != record:
            if self._claimed is not None:
                for pair in record.assigned.union(record.pending_revocation).pairs():
                    self._claimed.setdefault(pair, record.member_id)
            self.emit(record)

    def park(self, parked: ParkedJoin) -> None:
        self._parked[parked.member_id] = parked
        self.joins.append(ParkJoin(parked=parked))
        if self._claimed is None:
            self._claimed = {}

    def answer_parked(self, member_id: str, response: JoinGroupResponse) -> None:
        """Answer the member's parked join (if it has one)."""
        if member_id in self.parked_joins():
            self._parked[member_id] = None
            self.joins.append(AnswerJoin(group_id=self.group_id, member_id=member_id, response=response))

    def remove_member(self, member_id: str) -> None:
        """Tombstones for the member's current assignment, target and metadata; its timers go."""
        gid = self.group_id
        if self.current(member_id) is not None:
            self.emit(CurrentMemberAssignmentTombstone(group_id=gid, member_id=member_id))
        if self.target(member_id) is not None:
            self.emit(TargetAssignmentMemberTombstone(group_id=gid, member_id=member_id))
        self.emit(MemberMetadataTombstone(group_id=gid, member_id=member_id))
        self.removed.add(member_id)
        self.cancel(self.session_timer(member_id))
        self.cancel(self.revocation_timer(member_id))
        self.cancel(self.join_timer(member_id))
        self.cancel(self.sync_timer(member_id))
        self.answer_parked(
            member_id, JoinGroupResponse(error=KafkaErrorCode.UNKNOWN_MEMBER_ID, member_id=member_id)
        )

    # -- epochs and assignment ----------------------------------------------------------------------

    def refresh_partition_metadata(self) -> bool:
        """Record the subscribed topics' metadata if the image differs from the recorded one."""
        image = self.ctx.image.by_name
        topics = tuple(image[n] for n in sorted(self.subscribed_topic_names()) if n in image)
        if topics == self.partition_metadata:
            return False
        self.emit(PartitionMetadataRecord(group_id=self.group_id, topics=topics))
        return True

    def bump(self) -> None:
        """A new assignment is needed: the group epoch goes up (once per write)."""
        if self.bumped:
            return
        self.bumped = True
        self.refresh_partition_metadata()
        self.emit(GroupEpochRecord(group_id=self.group_id, epoch=self.group_epoch + 1))

    def assign(self, *, asker: str | None = None) -> None:
        """After a bump: compute the target with the server-side assignor, or make sure a member
        is asked to compute it with the client-side one.

        Client-side, the member asked is ``asker``, the member whose heartbeat this write
        answers (it learns so in this very answer). A write no present member's heartbeat made
        (a leave, an expired timer, a fail-over) asks nobody: the first member to heartbeat
        next is asked (:func:`~streamtasks.coordinator.heartbeat.heartbeat` calls this again
        while an epoch is owed and nobody is asked). That is the soonest any member can hear
        of it: a member chosen here would learn only at its own next heartbeat, on average half
        an interval later than the first of the group's (docs/simulation.md, "Where unowned time
        goes in a rolling bounce").

        Batching (``assignment_interval_ms`` > 0, Kafka's KIP-1263): while the interval timer
        armed by the last server-side computation runs, nothing is computed (O(1), so a
        heartbeat stays cheap however large the group): the group epoch stays ahead of the
        assignment epoch, members keep reconciling towards the last target, and the timer's
        write computes one target for every bump made meanwhile."""
        if self.group_epoch <= self.assignment_epoch or self.interval_timer_armed:
            return
        members = self.all_members()
        client_assignor = select_client_assignor(members.values())
        if client_assignor is not None:
            request = self.client_request
            if request is None or request.member_id not in self.present_members():
                if asker is not None and asker in self.present_members():
                    self.ask(asker)
                else:
                    self.drop_client_request()
            return
        self.drop_client_request()
        name = preferred_server_assignor(members.values(), self.ctx.config.server_assignors)
        topics = {t.name: t for t in self.partition_metadata}
        new = (
            run_server_assignor(
                self.ctx.assignors[name],
                members={
                    m: (frozenset(r.subscribed_topic_names), r.rack_id, r.instance_id)
                    for m, r in members.items()
                },
                targets={m: t.partitions for m in members if (t := self.target(m)) is not None},
                topics=topics,
                epoch=self.group_epoch,
            )
            if members
            else {}
        )
        old = {m: t for m in members if (t := self.target(m)) is not None}
        fresh = {
            m: TargetAssignmentMemberRecord(group_id=self.group_id, member_id=m, partitions=p)
            for m, p in new.items()
        }
        for record in target_records(self.group_id, old, fresh, epoch=self.group_epoch, assignor_name=name):
            self.emit(record)
        interval = self.ctx.config.assignment_interval_ms
        if interval > 0:
            self.schedule(self.interval_timer, self.ctx.now_ms + interval)

    def ask_member(self, *, previous: str | None, skip_previous: bool = False) -> None:
        """Ask a (new) member to compute the client-side assignment for the current epoch."""
        chosen = choose_member(self.present_members(), previous=previous, skip_previous=skip_previous)
        self.drop_client_request()
        if chosen is not None:
            self.ask(chosen)

    def ask(self, member_id: str) -> None:
        """Ask ``member_id`` to compute the client-side assignment for the current epoch."""
        self.drop_client_request()
        self.emit(
            ClientAssignmentRequestRecord(
                group_id=self.group_id, member_id=member_id, group_epoch=self.group_epoch
            )
        )

    def drop_client_request(self) -> None:
        if self.client_request is not None:
            self.emit(ClientAssignmentRequestTombstone(group_id=self.group_id))
        if self.prepared is not None:
            self.emit(PreparedAssignmentTombstone(group_id=self.group_id))
        self.cancel(self.assignment_timer)

    def rename_client_request(self, old: str, new: str) -> None:
        """A static member's replacement inherits its request to compute the assignment."""
        request = self.client_request
        if request is not None and request.member_id == old:
            self.drop_client_request()
            self.emit(replace(request, member_id=new))

    def result(self, response: R, *, image: MetadataImage | None = None) -> Result[R]:
        if self.records and self._claimed is not None and self.parked_joins():
            settle_parked(self)
        return Result(
            records=tuple(self.records),
            response=response,
            timers=tuple(self.timers),
            image=image,
            joins=tuple(self.joins),
        )
