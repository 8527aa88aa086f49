"""Parked JoinGroups of classic members, and the answer a classic member's join gets.

A classic member's JoinGroup is answered when the member can be given its next epoch: the
target for the group epoch is computed and the member, reconciled with the partitions it
reported owning in the join, is stable in it (or must revoke something first, which it can
only learn from its SyncGroup). Until then the join is *parked*: soft state, like a timer,
kept by the coordinator and changed only by :meth:`GroupCoordinator.apply` from the write's
:class:`ParkJoin` / :class:`AnswerJoin` operations (``Result.joins``).

Every later write that changes the group (another member's heartbeat, join, leave or
revocation, an InstallAssignment, a timer) reconciles the group's parked members again in
the same write (:func:`settle_parked`, run by ``GroupUpdate.result``) and answers those that
can go on: an :class:`AnswerJoin` in that write's result carries the JoinGroup response the
host sends on the parked request's connection, once the write's records are durable. The
member's JOIN timer (its rebalance timeout) answers a join still parked by then with what the
member can have at that moment; removing the member answers it UNKNOWN_MEMBER_ID.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Protocol
from uuid import UUID

from streamtasks.coordinator.reconcile import reconcile
from streamtasks.coordinator.records import (
    CurrentMemberAssignmentRecord,
    MemberMetadataRecord,
    TargetAssignmentMemberRecord,
)
from streamtasks.coordinator.timers import TimerKey
from streamtasks.coordinator.types import MemberState, TopicPartitionSet
from streamtasks.protocol.classic_group import JoinGroupResponse
from streamtasks.protocol.consumer_protocol import CONSUMER_PROTOCOL_TYPE
from streamtasks.protocol.errors import KafkaErrorCode

__all__ = [
    "AnswerJoin",
    "JoinOp",
    "JoinUpdate",
    "ParkJoin",
    "ParkedJoin",
    "ParkedJoins",
    "ParkedView",
    "answer_join",
    "can_answer",
    "reconcile_classic",
    "settle_parked",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class ParkedJoin:
    """A classic member's JoinGroup not answered yet, and the partitions it reported owning."""

    group_id: str
    member_id: str
    owned: TopicPartitionSet


@dataclass(frozen=True, slots=True, kw_only=True)
class ParkJoin:
    parked: ParkedJoin


@dataclass(frozen=True, slots=True, kw_only=True)
class AnswerJoin:
    """Answer the member's parked JoinGroup (every parked request of it) with ``response``."""

    group_id: str
    member_id: str
    response: JoinGroupResponse


JoinOp = ParkJoin | AnswerJoin


class ParkedView(Protocol):
    def has(self, group_id: str) -> bool: ...

    def in_group(self, group_id: str) -> Mapping[str, ParkedJoin]: ...


class _Clock(Protocol):
    @property
    def now_ms(self) -> int: ...


class JoinUpdate(Protocol):
    """What answering a classic join reads and writes of a write in progress: the part of
    :class:`~streamtasks.coordinator.update.GroupUpdate` this module uses (which runs
    :func:`settle_parked` itself, so this module does not import it)."""

    group_epoch: int
    assignment_epoch: int

    @property
    def ctx(self) -> _Clock: ...

    def member(self, member_id: str) -> MemberMetadataRecord | None: ...

    def current(self, member_id: str) -> CurrentMemberAssignmentRecord | None: ...

    def target(self, member_id: str) -> TargetAssignmentMemberRecord | None: ...

    def topic_ids(self, names: tuple[str, ...]) -> frozenset[UUID]: ...

    def owner_now(self, topic_id: UUID, partition: int) -> str | None: ...

    def parked_joins(self) -> dict[str, ParkedJoin]: ...

    def put_current(self, record: CurrentMemberAssignmentRecord) -> None: ...

    def answer_parked(self, member_id: str, response: JoinGroupResponse) -> None: ...

    def schedule(self, key: TimerKey, deadline_ms: int) -> None: ...

    def cancel(self, key: TimerKey, *, armed: bool | None = None) -> None: ...

    def session_timer(self, member_id: str) -> TimerKey: ...

    def join_timer(self, member_id: str) -> TimerKey: ...

    def sync_timer(self, member_id: str) -> TimerKey: ...


class ParkedJoins:
    """The parked joins by group and member; changed only by :meth:`apply`."""

    __slots__ = ("_groups",)

    def __init__(self) -> None:
        self._groups: dict[str, dict[str, ParkedJoin]] = {}

    def has(self, group_id: str) -> bool:
        """Whether the group has a parked join (O(1): every write asks)."""
        return group_id in self._groups

    def in_group(self, group_id: str) -> Mapping[str, ParkedJoin]:
        return MappingProxyType(self._groups.get(group_id, {}))

    def __len__(self) -> int:
        return sum(len(g) for g in self._groups.values())

    def apply(self, op: JoinOp) -> None:
        if isinstance(op, ParkJoin):
            self._groups.setdefault(op.parked.group_id, {})[op.parked.member_id] = op.parked
            return
        group = self._groups.get(op.group_id)
        if group is not None:
            group.pop(op.member_id, None)
            if not group:
                del self._groups[op.group_id]

    def clear(self) -> None:
        self._groups.clear()


def reconcile_classic(
    u: JoinUpdate,
    member_id: str,
    owned: TopicPartitionSet,
    *,
    current: CurrentMemberAssignmentRecord | None = None,
) -> CurrentMemberAssignmentRecord | None:
    """The classic member's next current assignment (from ``current``, by default its would-be
    one) given what it reported owning; None when it is not a member any more."""
    member = u.member(member_id)
    if current is None:
        current = u.current(member_id)
    if member is None or current is None:
        return None
    return reconcile(
        current,
        target_epoch=u.assignment_epoch,
        target=u.target(member_id),
        subscribed_topic_ids=u.topic_ids(member.subscribed_topic_names),
        owned=owned,
        owner_of=u.owner_now,
    )


def can_answer(u: JoinUpdate, nxt: CurrentMemberAssignmentRecord) -> bool:
    """Whether a join can be answered: the member must revoke first, or it is stable in the
    target of the latest group epoch."""
    if nxt.state is MemberState.UNREVOKED_PARTITIONS:
        return True
    return u.group_epoch <= u.assignment_epoch and nxt.state is MemberState.STABLE


def answer_join(u: JoinUpdate, member_id: str, nxt: CurrentMemberAssignmentRecord) -> JoinGroupResponse:
    """Put the member's reconciled assignment, arm its sync and session timers and build the
    JoinGroup response (generation = member epoch; no leader: the coordinator assigns)."""
    member = u.member(member_id)
    assert member is not None
    assert member.classic is not None
    u.put_current(nxt)
    now = u.ctx.now_ms
    u.cancel(u.join_timer(member_id))
    u.schedule(u.sync_timer(member_id), now + member.rebalance_timeout_ms)
    u.schedule(u.session_timer(member_id), now + member.classic.session_timeout_ms)
    return JoinGroupResponse(
        error=KafkaErrorCode.NONE,
        generation_id=nxt.member_epoch,
        protocol_type=CONSUMER_PROTOCOL_TYPE,
        protocol_name=member.classic.protocol_name,
        member_id=member_id,
    )


def settle_parked(u: JoinUpdate, *, force: str | None = None) -> None:
    """Answer every parked join of the group that can be answered after this write (and
    ``force``'s whatever its state: its JOIN timer fired)."""
    for member_id, parked in sorted(u.parked_joins().items()):
        nxt = reconcile_classic(u, member_id, parked.owned)
        if nxt is None:
            u.answer_parked(member_id, _unknown(member_id))
        elif member_id == force or can_answer(u, nxt):
            u.answer_parked(member_id, answer_join(u, member_id, nxt))
        else:
            u.put_current(nxt)


def _unknown(member_id: str) -> JoinGroupResponse:
    return JoinGroupResponse(error=KafkaErrorCode.UNKNOWN_MEMBER_ID, member_id=member_id)
