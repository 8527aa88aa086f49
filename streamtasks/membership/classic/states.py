"""The states of a classic group member."""

from __future__ import annotations

import enum

__all__ = ["HAS_GENERATION", "REBALANCING", "MemberState"]


class MemberState(enum.Enum):
    """Where a :class:`~streamtasks.membership.classic.ClassicMember` is in the group protocol.

    Kafka's ``MemberState`` (UNJOINED, PREPARING_REBALANCE, COMPLETING_REBALANCE, STABLE) split
    so that every wait is visible: the offset commit before a revocation is a state of its own.
    """

    #: Not a member: not joined yet, or reset by an error. Joins on the next poll when subscribed.
    UNJOINED = "unjoined"
    #: Join prepare: committing the offsets of the partitions the member is about to revoke
    #: (eager: all of them; cooperative: the ones no longer subscribed) before JoinGroup.
    PREPARING = "preparing"
    #: JoinGroup in flight (Kafka's PREPARING_REBALANCE).
    JOINING = "joining"
    #: SyncGroup in flight (Kafka's COMPLETING_REBALANCE).
    SYNCING = "syncing"
    #: Cooperative: the new assignment dropped owned partitions; committing their offsets
    #: before revoking them, then rejoining.
    REVOKING = "revoking"
    #: Owns the assignment of the current generation and heartbeats.
    STABLE = "stable"
    #: Leave: committing owned offsets before revoking and sending LeaveGroup.
    LEAVING = "leaving"
    #: Left the group (or never subscribed). ``Subscribe`` starts over.
    CLOSED = "closed"
    #: A fatal error (FENCED_INSTANCE_ID, INCONSISTENT_GROUP_PROTOCOL, ...). Terminal.
    FAILED = "failed"


#: States in which the member has (or is getting) a generation and heartbeats.
HAS_GENERATION = (
    MemberState.SYNCING,
    MemberState.STABLE,
    MemberState.PREPARING,
    MemberState.REVOKING,
    MemberState.LEAVING,
)
#: States of a rebalance under way.
REBALANCING = (MemberState.PREPARING, MemberState.JOINING, MemberState.SYNCING, MemberState.REVOKING)
