"""A streams group's state, changed only by :meth:`StreamsGroup.replay`."""

from __future__ import annotations

import enum
from collections.abc import ItemsView, Mapping
from types import MappingProxyType

from streamtasks.coordinator.streams.records import (
    StreamsCurrentAssignmentRecord,
    StreamsCurrentAssignmentTombstone,
    StreamsGroupRecord,
    StreamsGroupTombstone,
    StreamsMemberRecord,
    StreamsMemberState,
    StreamsMemberTombstone,
    StreamsRecord,
    StreamsTargetMemberRecord,
    StreamsTargetMemberTombstone,
    StreamsTargetMetadataRecord,
    StreamsTargetMetadataTombstone,
    StreamsTopologyRecord,
    StreamsTopologyTombstone,
)
from streamtasks.membership.streams.records import Task
from streamtasks.protocol.streams_group import Topology

__all__ = ["StreamsGroup", "StreamsGroupState"]


class StreamsGroupState(enum.Enum):
    """Streams group states as StreamsGroupDescribe names them (Kafka's ``StreamsGroupState``)."""

    EMPTY = "Empty"
    NOT_READY = "NotReady"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


class StreamsGroup:
    """The group's records by key, plus indexes kept by :meth:`replay`: which member owns each
    active task now (assigned or pending revocation), so that a task is never given to two
    members; the current assignments with warm-ups; how many members have a user endpoint (the
    last two read at every heartbeat, without a walk of the group)."""

    __slots__ = (
        "_currents",
        "_endpoints",
        "_lent",
        "_members",
        "_owners",
        "_targets",
        "_warming",
        "group_id",
        "meta",
        "target_meta",
        "topology",
    )

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.meta: StreamsGroupRecord | None = None
        self.topology: Topology | None = None
        self.target_meta: StreamsTargetMetadataRecord | None = None
        self._members: dict[str, StreamsMemberRecord] = {}
        self._currents: dict[str, StreamsCurrentAssignmentRecord] = {}
        self._targets: dict[str, StreamsTargetMemberRecord] = {}
        self._owners: dict[Task, str] | _Overlay = {}
        self._warming: dict[str, frozenset[Task]] = {}  # member id -> its current warm-ups
        self._endpoints = 0  # members with a user endpoint
        #: The maps this copy still shares with the group it was copied from.
        self._lent: set[str] = set()

    def copy(self) -> StreamsGroup:
        """A copy a write replays its records on (the records are immutable; the maps are not).
        It shares the group's maps until it first changes one, which it then copies: a write
        that changes no member's tasks does not copy the task index (10 x members entries in
        the sweeps), one that writes no record copies nothing. The group itself must not change
        while the copy is in use (a write's copy is read only before the write is applied)."""
        other = StreamsGroup(self.group_id)
        other.meta, other.topology, other.target_meta = self.meta, self.topology, self.target_meta
        other._members, other._currents = self._members, self._currents
        other._targets, other._owners = self._targets, self._owners
        other._warming, other._endpoints = self._warming, self._endpoints
        other._lent = {"_members", "_currents", "_targets", "_owners", "_warming"}
        return other

    def _own(self, *names: str) -> None:
        """Copy the named maps if they are still shared (before the first change of each); the
        task index, 10 x members entries in the sweeps, is not copied but overlaid."""
        for name in names:
            if name in self._lent:
                self._lent.discard(name)
                if name == "_owners":
                    self._owners = _Overlay(self._owners)
                else:
                    setattr(self, name, dict(getattr(self, name)))

    # -- reading --------------------------------------------------------------------------------

    @property
    def epoch(self) -> int:
        return 0 if self.meta is None else self.meta.epoch

    @property
    def target_epoch(self) -> int:
        return 0 if self.target_meta is None else self.target_meta.assignment_epoch

    @property
    def members(self) -> Mapping[str, StreamsMemberRecord]:
        return MappingProxyType(self._members)

    @property
    def currents(self) -> Mapping[str, StreamsCurrentAssignmentRecord]:
        return MappingProxyType(self._currents)

    @property
    def targets(self) -> Mapping[str, StreamsTargetMemberRecord]:
        return MappingProxyType(self._targets)

    @property
    def warming(self) -> Mapping[str, frozenset[Task]]:
        """The current assignments' warm-ups, of the members that have any."""
        return MappingProxyType(self._warming)

    @property
    def has_endpoints(self) -> bool:
        """A member has a user endpoint."""
        return self._endpoints > 0

    def member(self, member_id: str) -> StreamsMemberRecord | None:
        return self._members.get(member_id)

    def current(self, member_id: str) -> StreamsCurrentAssignmentRecord | None:
        return self._currents.get(member_id)

    def target(self, member_id: str) -> StreamsTargetMemberRecord | None:
        return self._targets.get(member_id)

    def owner(self, task: Task) -> str | None:
        """The member that owns ``task`` as active now (assigned or pending revocation)."""
        return self._owners.get(task)

    def static_member(self, instance_id: str) -> str | None:
        for member in self._members.values():
            if member.instance_id == instance_id:
                return member.member_id
        return None

    def state(self, *, ready: bool) -> StreamsGroupState:
        """``ready``: the topology is configured (every topic there, partitioned right)."""
        if self.meta is None:
            return StreamsGroupState.DEAD
        if not self._members:
            return StreamsGroupState.EMPTY
        if not ready:
            return StreamsGroupState.NOT_READY
        if self.target_epoch != self.epoch:
            return StreamsGroupState.ASSIGNING
        for current in self._currents.values():
            if current.member_epoch != self.target_epoch or current.state is not StreamsMemberState.STABLE:
                return StreamsGroupState.RECONCILING
        return StreamsGroupState.STABLE

    def snapshot(self) -> tuple[object, ...]:
        """Everything replay built, comparable (tests: loading = replaying)."""
        return (
            self.meta,
            self.topology,
            self.target_meta,
            sorted(self._members.items()),
            sorted(self._currents.items()),
            sorted(self._targets.items()),
            sorted(self._owners.items()),
        )

    # -- the one change -------------------------------------------------------------------------

    def replay(self, record: StreamsRecord) -> None:
        if self._lent:
            self._own(*_CHANGES.get(type(record), ()))
        match record:
            case StreamsGroupRecord():
                self.meta = record
            case StreamsGroupTombstone():
                self.meta = None
            case StreamsTopologyRecord():
                self.topology = record.topology
            case StreamsTopologyTombstone():
                self.topology = None
            case StreamsMemberRecord():
                self._count_endpoint(self._members.get(record.member_id), -1)
                self._members[record.member_id] = record
                self._count_endpoint(record, 1)
            case StreamsMemberTombstone():
                self._count_endpoint(self._members.pop(record.member_id, None), -1)
            case StreamsTargetMetadataRecord():
                self.target_meta = record
            case StreamsTargetMetadataTombstone():
                self.target_meta = None
            case StreamsTargetMemberRecord():
                self._targets[record.member_id] = record
            case StreamsTargetMemberTombstone():
                self._targets.pop(record.member_id, None)
            case StreamsCurrentAssignmentRecord():
                self._drop_owned(record.member_id)
                self._currents[record.member_id] = record
                for task in record.active | record.pending_revocation:
                    self._owners[task] = record.member_id
                if record.warmup:
                    self._warming[record.member_id] = record.warmup
                else:
                    self._warming.pop(record.member_id, None)
            case StreamsCurrentAssignmentTombstone():
                self._drop_owned(record.member_id)
                self._currents.pop(record.member_id, None)
                self._warming.pop(record.member_id, None)

    def _count_endpoint(self, member: StreamsMemberRecord | None, by: int) -> None:
        if member is not None and member.user_endpoint is not None:
            self._endpoints += by

    def _drop_owned(self, member_id: str) -> None:
        old = self._currents.get(member_id)
        if old is None:
            return
        for task in old.active | old.pending_revocation:
            if self._owners.get(task) == member_id:
                del self._owners[task]


class _Overlay:
    """A copy's task index: its changes over the index of the group it was copied from (which
    does not change while the copy is in use), without copying that index."""

    __slots__ = ("_base", "_changed")

    def __init__(self, base: dict[Task, str] | _Overlay) -> None:
        self._base = base
        self._changed: dict[Task, str | None] = {}  # None: the copy dropped the task

    def get(self, task: Task) -> str | None:
        changed = self._changed
        return changed[task] if task in changed else self._base.get(task)

    def __setitem__(self, task: Task, owner: str) -> None:
        self._changed[task] = owner

    def __delitem__(self, task: Task) -> None:
        self._changed[task] = None

    def items(self) -> ItemsView[Task, str]:
        merged = dict(self._base.items())
        for task, owner in self._changed.items():
            if owner is None:
                merged.pop(task, None)
            else:
                merged[task] = owner
        return merged.items()


#: The maps each record type changes (copied first by a copy that still shares them).
_CHANGES: dict[type[object], tuple[str, ...]] = {
    StreamsMemberRecord: ("_members",),
    StreamsMemberTombstone: ("_members",),
    StreamsTargetMemberRecord: ("_targets",),
    StreamsTargetMemberTombstone: ("_targets",),
    StreamsCurrentAssignmentRecord: ("_currents", "_owners", "_warming"),
    StreamsCurrentAssignmentTombstone: ("_currents", "_owners", "_warming"),
}
