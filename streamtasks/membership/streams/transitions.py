"""The legal transitions of a streams-group member, as data (the kernel's
:class:`~streamtasks.membership.common.transitions.Transitions`): the pairs of Apache Kafka's
``StreamsMembershipManager`` (its ``MemberState.previousValidStates``), minus the poll-timer
``STALE`` state, which the runtime handles by leaving. docs/streams-groups.md shows the same rows.
"""

from __future__ import annotations

from streamtasks.membership.common.events import Leave
from streamtasks.membership.common.states import MemberState as S
from streamtasks.membership.common.transitions import Transitions
from streamtasks.membership.streams.events import JoinStreamsGroup, RequestShutdown

__all__ = ["IN_GROUP", "TABLE", "TRANSITIONS"]

#: States in which the member is (or is becoming) a member of the group and heartbeats.
IN_GROUP = (S.JOINING, S.RECONCILING, S.ACKNOWLEDGING, S.STABLE)

TRANSITIONS: tuple[tuple[S, str, S], ...] = (
    (S.UNSUBSCRIBED, "join with the topology at epoch 0", S.JOINING),
    (S.JOINING, "heartbeat ok: first target", S.RECONCILING),
    (S.STABLE, "heartbeat ok: new target", S.RECONCILING),
    (S.ACKNOWLEDGING, "heartbeat ok: new target", S.RECONCILING),
    (S.RECONCILING, "reconciled: acknowledge", S.ACKNOWLEDGING),
    (S.ACKNOWLEDGING, "acknowledged", S.STABLE),
    *((s, "fenced: tasks lost", S.FENCED) for s in IN_GROUP),
    (S.FENCED, "tasks dropped: rejoin at epoch 0", S.JOINING),
    *((s, "leave: revoke active tasks first", S.PREPARE_LEAVING) for s in (*IN_GROUP, S.FENCED)),
    (S.PREPARE_LEAVING, "revoked: leave heartbeat sent", S.LEAVING),
    (S.LEAVING, "left", S.UNSUBSCRIBED),
    *((s, "fatal error", S.FATAL) for s in (*IN_GROUP, S.FENCED, S.PREPARE_LEAVING, S.LEAVING)),
)

TABLE = Transitions(
    TRANSITIONS,
    {
        JoinStreamsGroup: frozenset({S.UNSUBSCRIBED}),
        Leave: frozenset((*IN_GROUP, S.FENCED, S.UNSUBSCRIBED, S.FATAL, S.PREPARE_LEAVING, S.LEAVING)),
        RequestShutdown: frozenset(IN_GROUP),
    },
)
