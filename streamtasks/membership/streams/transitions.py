"""The legal transitions of a streams-group member, as data (the kernel's
:class:`~streamtasks.membership.common.transitions.Transitions`): the pairs of Apache Kafka's
``StreamsMembershipManager`` (its ``MemberState.previousValidStates``), minus the poll-timer
``STALE`` state, which the runtime handles by leaving. docs/streams-groups.md shows the same rows.
"""

from __future__ import annotations

from streamtasks.membership.common.events import Leave
from streamtasks.membership.common.states import IN_GROUP, heartbeat_lifecycle
from streamtasks.membership.common.states import MemberState as S
from streamtasks.membership.common.transitions import Transitions, each
from streamtasks.membership.streams.events import JoinStreamsGroup, RequestShutdown

__all__ = ["IN_GROUP", "TABLE", "TRANSITIONS"]

TRANSITIONS: tuple[tuple[S, str, S], ...] = (
    *heartbeat_lifecycle(
        join="join with the topology at epoch 0",
        first="heartbeat ok: first target",
        new="heartbeat ok: new target",
        lost="fenced: tasks lost",
        rejoin="tasks dropped: rejoin at epoch 0",
        leave="leave: revoke active tasks first",
    ),
    *each((*IN_GROUP, S.FENCED, S.PREPARE_LEAVING, S.LEAVING), "fatal error", S.FATAL),
)

TABLE = Transitions(
    TRANSITIONS,
    {
        JoinStreamsGroup: frozenset({S.UNSUBSCRIBED}),
        Leave: frozenset((*IN_GROUP, S.FENCED, S.UNSUBSCRIBED, S.FATAL, S.PREPARE_LEAVING, S.LEAVING)),
        RequestShutdown: frozenset(IN_GROUP),
    },
)
