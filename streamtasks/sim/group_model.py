"""The data half of the classic group coordinator model: one group, its members, its state.

This mirrors the bookkeeping of Apache Kafka's classic group (``ClassicGroup`` /
``ClassicGroupMember`` in the group-coordinator module): members in join order, the static
member index, the members that still owe a JoinGroup or a SyncGroup, protocol support counts
and the vote that picks the group protocol. Request handling lives in
:mod:`streamtasks.sim.coordinator`. Everything here is deterministic: members are kept in
insertion order and every choice Kafka leaves to a hash map's iteration order is made by that
order instead (see docs/simulation.md).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from streamtasks.errors import LocalProtocolError
from streamtasks.protocol.classic_group import JoinGroupMember, ProtocolMetadata

__all__ = [
    "GroupModel",
    "GroupSnapshot",
    "GroupState",
    "MemberModel",
    "MemberSnapshot",
    "ReplyTo",
]


class GroupState(enum.Enum):
    """Kafka's ``ClassicGroupState`` without ``Dead`` (the model holds exactly one group)."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"


#: Which states a state may be entered from (Kafka's ``validPreviousStates``).
_VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}
    ),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplyTo:
    """Where a parked request's response goes: the sending process and its request id."""

    conn: str
    request_id: int


class MemberModel:
    """One member as the coordinator knows it (mutable; internal to the model)."""

    __slots__ = (
        "assignment",
        "awaiting_join",
        "awaiting_sync",
        "group_instance_id",
        "is_new",
        "member_id",
        "protocol_type",
        "protocols",
        "rebalance_timeout_ms",
        "session_timeout_ms",
    )

    def __init__(
        self,
        *,
        member_id: str,
        group_instance_id: str | None,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        protocol_type: str,
        protocols: tuple[ProtocolMetadata, ...],
        assignment: bytes = b"",
    ) -> None:
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        self.session_timeout_ms = session_timeout_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.protocol_type = protocol_type
        self.protocols = protocols
        self.assignment = assignment
        self.awaiting_join: ReplyTo | None = None
        self.awaiting_sync: ReplyTo | None = None
        self.is_new = False

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def protocol_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.protocols)

    def metadata(self, protocol_name: str | None) -> bytes:
        for p in self.protocols:
            if p.name == protocol_name:
                return p.metadata
        return b""

    def matches(self, protocols: tuple[ProtocolMetadata, ...]) -> bool:
        """Same protocols, same order, same metadata bytes."""
        return self.protocols == protocols

    def vote(self, candidates: frozenset[str]) -> str:
        """The member's most preferred protocol among ``candidates``."""
        for name in self.protocol_names:
            if name in candidates:
                return name
        raise LocalProtocolError(f"member {self.member_id} supports none of {sorted(candidates)}")

    def has_satisfied_heartbeat(self) -> bool:
        """A new member never does; an old one does while a JoinGroup/SyncGroup is parked."""
        if self.is_new:
            return False
        return self.awaiting_join is not None or self.awaiting_sync is not None


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberSnapshot:
    member_id: str
    group_instance_id: str | None
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[ProtocolMetadata, ...]
    assignment: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupSnapshot:
    """What Kafka persists in a GroupMetadata record: enough to reload the group after a
    coordinator fail-over (it comes back Stable, or Empty without members)."""

    generation: int
    protocol_type: str | None
    protocol_name: str | None
    leader: str | None
    members: tuple[MemberSnapshot, ...]


class GroupModel:
    """One classic group's state (Kafka's ``ClassicGroup``)."""

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.state = GroupState.EMPTY
        self.previous_state = GroupState.EMPTY
        self.generation = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader: str | None = None
        self.members: dict[str, MemberModel] = {}
        self.static_members: dict[str, str] = {}
        self.pending_join: dict[str, None] = {}
        self.pending_sync: dict[str, None] = {}
        self.new_member_added = False
        self._support: dict[str, int] = {}

    # -- state ------------------------------------------------------------------------------

    def transition(self, target: GroupState) -> None:
        if self.state not in _VALID_PREVIOUS[target]:
            raise LocalProtocolError(f"group {self.group_id}: illegal transition {self.state} -> {target}")
        self.previous_state = self.state
        self.state = target

    def can_rebalance(self) -> bool:
        return self.state in _VALID_PREVIOUS[GroupState.PREPARING_REBALANCE]

    # -- membership -------------------------------------------------------------------------

    def is_leader(self, member_id: str) -> bool:
        return self.leader is not None and self.leader == member_id

    def add(self, member: MemberModel, reply_to: ReplyTo | None) -> None:
        if member.group_instance_id is not None:
            if member.group_instance_id in self.static_members:
                raise LocalProtocolError(f"static member {member.group_instance_id} is already a member")
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader is None:
            self.leader = member.member_id
        self.members[member.member_id] = member
        self._count(member, +1)
        member.awaiting_join = reply_to
        self.pending_join.pop(member.member_id, None)

    def remove(self, member_id: str) -> MemberModel | None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self._count(member, -1)
            if member.group_instance_id is not None:
                self.static_members.pop(member.group_instance_id, None)
        if self.is_leader(member_id):
            self.leader = next(iter(self.members), None)
        self.pending_join.pop(member_id, None)
        self.pending_sync.pop(member_id, None)
        return member

    def update(
        self,
        member: MemberModel,
        *,
        protocols: tuple[ProtocolMetadata, ...],
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        reply_to: ReplyTo | None,
    ) -> None:
        self._count(member, -1)
        member.protocols = protocols
        self._count(member, +1)
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        member.awaiting_join = reply_to

    def replace_static(self, group_instance_id: str, old_member_id: str, new_member_id: str) -> MemberModel:
        """KIP-345: the new process takes over the old member id's place and assignment.
        The caller fences whatever the old id still has parked."""
        old = self.members.pop(old_member_id)
        new = MemberModel(
            member_id=new_member_id,
            group_instance_id=old.group_instance_id,
            session_timeout_ms=old.session_timeout_ms,
            rebalance_timeout_ms=old.rebalance_timeout_ms,
            protocol_type=old.protocol_type,
            protocols=old.protocols,
            assignment=old.assignment,
        )
        self.members[new_member_id] = new
        if self.is_leader(old_member_id):
            self.leader = new_member_id
        self.static_members[group_instance_id] = new_member_id
        if old_member_id in self.pending_sync:
            del self.pending_sync[old_member_id]
            self.pending_sync[new_member_id] = None
        return new

    def static_member_id(self, group_instance_id: str) -> str | None:
        return self.static_members.get(group_instance_id)

    def has_all_joined(self) -> bool:
        return not self.pending_join and all(m.awaiting_join is not None for m in self.members.values())

    def not_yet_rejoined(self) -> tuple[MemberModel, ...]:
        return tuple(m for m in self.members.values() if m.awaiting_join is None)

    def elect_joined_leader(self) -> bool:
        """Kafka's ``maybeElectNewJoinedLeader``: keep a leader that rejoined, else promote the
        first member (in join order) that did; False if nobody rejoined or there is no leader."""
        if self.leader is None:
            return False
        current = self.members.get(self.leader)
        if current is not None and current.awaiting_join is not None:
            return True
        for member in self.members.values():
            if member.awaiting_join is not None:
                self.leader = member.member_id
                return True
        return False

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # -- protocols --------------------------------------------------------------------------

    def _count(self, member: MemberModel, delta: int) -> None:
        for name in member.protocol_names:
            self._support[name] = self._support.get(name, 0) + delta

    def candidate_protocols(self) -> frozenset[str]:
        size = len(self.members)
        return frozenset(name for name, count in self._support.items() if count == size and size > 0)

    def supports_protocols(self, protocol_type: str, names: tuple[str, ...]) -> bool:
        """Could a member offering ``names`` join? (an empty group takes any non-empty offer)"""
        if self.state is GroupState.EMPTY:
            return bool(protocol_type) and bool(names)
        size = len(self.members)
        return self.protocol_type == protocol_type and any(self._support.get(n, 0) == size for n in names)

    def select_protocol(self) -> str:
        """Every member votes for its most preferred protocol among those all members support;
        the most votes win. Ties go to the protocol first voted for in join order (Kafka leaves
        them to hash-map order)."""
        if not self.members:
            raise LocalProtocolError("cannot select a protocol for an empty group")
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for member in self.members.values():
            choice = member.vote(candidates)
            votes[choice] = votes.get(choice, 0) + 1
        best = max(votes.values())
        return next(name for name, count in votes.items() if count == best)

    def join_members(self) -> tuple[JoinGroupMember, ...]:
        """Every member's metadata for the selected protocol, as the leader receives it."""
        return tuple(
            JoinGroupMember(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                metadata=m.metadata(self.protocol_name),
            )
            for m in self.members.values()
        )

    def init_next_generation(self) -> None:
        self.generation += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition(GroupState.COMPLETING_REBALANCE)
        else:
            self.protocol_name = None
            self.transition(GroupState.EMPTY)
        self.pending_sync.clear()

    # -- persistence ------------------------------------------------------------------------

    def snapshot(self) -> GroupSnapshot:
        return GroupSnapshot(
            generation=self.generation,
            protocol_type=self.protocol_type,
            protocol_name=self.protocol_name,
            leader=self.leader,
            members=tuple(
                MemberSnapshot(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    session_timeout_ms=m.session_timeout_ms,
                    rebalance_timeout_ms=m.rebalance_timeout_ms,
                    protocol_type=m.protocol_type,
                    protocols=m.protocols,
                    assignment=m.assignment,
                )
                for m in self.members.values()
            ),
        )

    @classmethod
    def restore(cls, group_id: str, snapshot: GroupSnapshot) -> GroupModel:
        """The group a new coordinator loads: Stable with the persisted generation (Empty
        without members); nothing parked, nobody pending."""
        group = cls(group_id)
        group.generation = snapshot.generation
        group.protocol_type = snapshot.protocol_type
        group.protocol_name = snapshot.protocol_name
        for ms in snapshot.members:
            member = MemberModel(
                member_id=ms.member_id,
                group_instance_id=ms.group_instance_id,
                session_timeout_ms=ms.session_timeout_ms,
                rebalance_timeout_ms=ms.rebalance_timeout_ms,
                protocol_type=ms.protocol_type,
                protocols=ms.protocols,
                assignment=ms.assignment,
            )
            group.add(member, None)
        group.leader = (
            snapshot.leader if snapshot.leader in group.members else next(iter(group.members), None)
        )
        if group.members:
            group.state = GroupState.STABLE
            group.previous_state = GroupState.COMPLETING_REBALANCE
        return group
