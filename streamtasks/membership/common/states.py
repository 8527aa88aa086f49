"""The states of a heartbeat-protocol member: Apache Kafka's client ``MemberState``, shared (as
in Kafka) by the KIP-848 consumer member and the KIP-1071 streams-group member; each member's
transition table says which moves it makes (a streams member never goes STALE)."""

from __future__ import annotations

import enum

from streamtasks.membership.common.transitions import each

__all__ = ["IN_GROUP", "MemberState", "Row", "heartbeat_lifecycle"]


class MemberState(enum.Enum):
    """Where a :class:`~streamtasks.membership.consumer.ConsumerMember` or a
    :class:`~streamtasks.membership.streams.StreamsMember` is in its group.

    The names and meanings are those of Apache Kafka's ``consumer.internals.MemberState`` (for a
    streams member: tasks where a consumer has partitions); the legal moves between them are
    each member's ``transitions.TRANSITIONS``.
    """

    #: Not in the group: not subscribed yet, or left. ``Subscribe`` starts a join.
    UNSUBSCRIBED = "unsubscribed"
    #: Heartbeating at epoch 0 (a full join) until the coordinator gives an epoch and a first
    #: assignment; a client-side group keeps a member here until a target exists.
    JOINING = "joining"
    #: Applying an assignment: committing and revoking what it no longer gets, then taking
    #: what it gets. Heartbeats go on meanwhile.
    RECONCILING = "reconciling"
    #: Reconciled; the heartbeat that tells the coordinator what it owns now is due or in flight.
    ACKNOWLEDGING = "acknowledging"
    #: Owns what the coordinator gave it and heartbeats.
    STABLE = "stable"
    #: Fenced (FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID, or no heartbeat answer for a session
    #: timeout): everything it owned is lost; it rejoins at epoch 0 with the same member id.
    FENCED = "fenced"
    #: ``Leave``: committing and revoking what it owns before the leave heartbeat.
    PREPARE_LEAVING = "prepare_leaving"
    #: The leave heartbeat (epoch -1, or -2 for a static member) is in flight.
    LEAVING = "leaving"
    #: A fatal error (UNRELEASED_INSTANCE_ID, GROUP_MAX_SIZE_REACHED, INVALID_REQUEST...). Terminal.
    FATAL = "fatal"
    #: The application stopped polling for longer than allowed: partitions lost, left the
    #: group; rejoins when the application polls again (``ApplicationPolled``).
    STALE = "stale"


S = MemberState

#: States in which the member is (or is becoming) a member of the group and heartbeats.
IN_GROUP = (S.JOINING, S.RECONCILING, S.ACKNOWLEDGING, S.STABLE)

#: One legal move: (from, trigger, to).
Row = tuple[MemberState, str, MemberState]


def heartbeat_lifecycle(
    *, join: str, first: str, new: str, lost: str, rejoin: str, leave: str
) -> tuple[Row, ...]:
    """The moves both heartbeat members make (Apache Kafka's ``MemberState.previousValidStates``
    they share), under each member's trigger labels: ``join`` at epoch 0, the ``first`` and each
    ``new`` target reconciled and acknowledged, fenced (``lost``) and ``rejoin``, ``leave`` after
    revoking, then the leave heartbeat."""
    return (
        (S.UNSUBSCRIBED, join, S.JOINING),
        (S.JOINING, first, S.RECONCILING),
        *each((S.STABLE, S.ACKNOWLEDGING), new, S.RECONCILING),
        (S.RECONCILING, "reconciled: acknowledge", S.ACKNOWLEDGING),
        (S.ACKNOWLEDGING, "acknowledged", S.STABLE),
        *each(IN_GROUP, lost, S.FENCED),
        (S.FENCED, rejoin, S.JOINING),
        *each((*IN_GROUP, S.FENCED), leave, S.PREPARE_LEAVING),
        (S.PREPARE_LEAVING, "revoked: leave heartbeat sent", S.LEAVING),
        (S.LEAVING, "left", S.UNSUBSCRIBED),
    )
