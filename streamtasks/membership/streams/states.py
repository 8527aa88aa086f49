"""The states of a streams-group member: Apache Kafka's client ``MemberState``, as its
``StreamsMembershipManager`` uses them."""

from __future__ import annotations

import enum

__all__ = ["StreamsMemberState"]


class StreamsMemberState(enum.Enum):
    """Where a :class:`~streamtasks.membership.streams.StreamsMember` is in its streams group;
    the legal moves are :data:`~streamtasks.membership.streams.transitions.TRANSITIONS`."""

    #: Not in the group: not started yet, or left. ``JoinStreamsGroup`` starts a join.
    UNSUBSCRIBED = "unsubscribed"
    #: Heartbeating at epoch 0 with the topology until the broker answers with an epoch.
    JOINING = "joining"
    #: Applying a new target: revoking the active tasks it loses (and waiting for the runtime),
    #: then taking the new active / standby / warm-up tasks.
    RECONCILING = "reconciling"
    #: Reconciled; the heartbeat that reports the tasks it owns now is due or in flight.
    ACKNOWLEDGING = "acknowledging"
    #: Owns its target and heartbeats.
    STABLE = "stable"
    #: FENCED_MEMBER_EPOCH or UNKNOWN_MEMBER_ID: its tasks are lost; it rejoins at epoch 0 with
    #: the same member id once the runtime has dropped them.
    FENCED = "fenced"
    #: ``Leave``: revoking its active tasks before the leave heartbeat.
    PREPARE_LEAVING = "prepare_leaving"
    #: The leave heartbeat (epoch -1, or -2 for a static member) is in flight.
    LEAVING = "leaving"
    #: A fatal error (an invalid topology, authorization, UNRELEASED_INSTANCE_ID, ...). Terminal.
    FATAL = "fatal"
