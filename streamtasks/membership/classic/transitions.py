"""The legal transitions of a classic member, as data.

``TRANSITIONS`` lists every (from, trigger, to) the machine may take and ``docs/membership.md``
shows the same table; ``TABLE`` is the lookup the machine asks, (state, trigger) -> next state
(:class:`~streamtasks.membership.common.transitions.Transitions`): any other move raises
``LocalProtocolError``.
``USER_EVENTS`` says in which states an application event is legal; broker events (responses,
failures, coordinator news, metadata) are legal in every state and ignored when stale.
"""

from __future__ import annotations

from streamtasks.membership.classic.states import REBALANCING as _REBALANCING
from streamtasks.membership.classic.states import MemberState as S
from streamtasks.membership.common.events import EnforceRebalance, Leave, Subscribe
from streamtasks.membership.common.transitions import Transitions, each

__all__ = ["TABLE", "TRANSITIONS", "USER_EVENTS", "check_event", "check_transition"]

_LIVE = (S.UNJOINED, S.STABLE, *_REBALANCING)

#: (from, trigger, to). Triggers are short labels, also used in error messages and the docs.
TRANSITIONS: tuple[tuple[S, str, S], ...] = (
    (S.UNJOINED, "join: nothing to revoke, JoinGroup sent", S.JOINING),
    (S.STABLE, "rejoin: nothing to revoke, JoinGroup sent", S.JOINING),
    (S.STABLE, "rejoin: commit before revoking", S.PREPARING),
    (S.PREPARING, "commit done: revoked, JoinGroup sent", S.JOINING),
    (S.JOINING, "JoinGroup ok: SyncGroup sent", S.SYNCING),
    (S.SYNCING, "SyncGroup ok: assignment applied", S.STABLE),
    (S.SYNCING, "SyncGroup ok: commit before revoking", S.REVOKING),
    (S.REVOKING, "commit done: revoked, assignment applied", S.STABLE),
    (S.SYNCING, "SyncGroup failed: rejoin", S.JOINING),
    (S.UNJOINED, "Heartbeat ok: lapsed assignment taken back", S.STABLE),
    *each((S.STABLE, *_REBALANCING), "fenced: partitions lost", S.UNJOINED),
    *each((*_LIVE, S.LEAVING), "fatal error", S.FAILED),
    *each((S.STABLE, *_REBALANCING), "leave: commit before revoking", S.LEAVING),
    *each((*_LIVE, S.FAILED), "leave", S.CLOSED),
    (S.LEAVING, "commit done: revoked, left", S.CLOSED),
    (S.LEAVING, "fenced: partitions lost, left", S.CLOSED),
    (S.CLOSED, "subscribe", S.UNJOINED),
)

#: The lookup: (state, trigger) -> next state, and the states each application event is legal in.
TABLE = Transitions(
    TRANSITIONS,
    {
        Subscribe: frozenset((*_LIVE, S.CLOSED)),
        EnforceRebalance: frozenset(_LIVE),
        Leave: frozenset((*_LIVE, S.FAILED)),
    },
)
USER_EVENTS = TABLE.user_events
check_transition = TABLE.check_transition
check_event = TABLE.check_event
