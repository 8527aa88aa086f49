"""The legal transitions of a KIP-848 member, as data.

``TRANSITIONS`` lists every (from, trigger, to) the machine may take and ``docs/membership.md``
shows the same table; ``TABLE`` is the lookup the machine asks, (state, trigger) -> next state
(:class:`~streamtasks.membership.common.transitions.Transitions`): any other move raises
``LocalProtocolError``. The pairs are
those of Apache Kafka's client ``MemberState`` (its ``previousValidStates``), minus the ones a
member without a fetch loop never takes. ``USER_EVENTS`` says in which states an application
event is legal; broker events are legal in every state and ignored when stale.
"""

from __future__ import annotations

from streamtasks.membership.common.events import EnforceRebalance, Leave, Subscribe
from streamtasks.membership.common.states import MemberState as S
from streamtasks.membership.common.transitions import Transitions
from streamtasks.membership.consumer.events import (
    ApplicationPolled,
    AssignorMetadataChanged,
    PollTimerExpired,
)

__all__ = ["IN_GROUP", "TABLE", "TRANSITIONS", "USER_EVENTS", "check_event", "check_transition"]

#: States in which the member is (or is becoming) a member of the group and heartbeats.
IN_GROUP = (S.JOINING, S.RECONCILING, S.ACKNOWLEDGING, S.STABLE)

#: (from, trigger, to). Triggers are short labels, also used in error messages and the docs.
TRANSITIONS: tuple[tuple[S, str, S], ...] = (
    (S.UNSUBSCRIBED, "subscribe: join at epoch 0", S.JOINING),
    (S.JOINING, "heartbeat ok: first assignment", S.RECONCILING),
    (S.STABLE, "heartbeat ok: new assignment", S.RECONCILING),
    (S.ACKNOWLEDGING, "heartbeat ok: new assignment", S.RECONCILING),
    (S.RECONCILING, "reconciled: acknowledge", S.ACKNOWLEDGING),
    (S.ACKNOWLEDGING, "acknowledged", S.STABLE),
    *((s, "fenced: partitions lost", S.FENCED) for s in IN_GROUP),
    (S.FENCED, "rejoin at epoch 0", S.JOINING),
    *((s, "leave: revoke first", S.PREPARE_LEAVING) for s in (*IN_GROUP, S.FENCED)),
    (S.PREPARE_LEAVING, "revoked: leave heartbeat sent", S.LEAVING),
    (S.LEAVING, "left", S.UNSUBSCRIBED),
    (S.PREPARE_LEAVING, "left without a leave heartbeat", S.UNSUBSCRIBED),
    *((s, "poll timer expired: partitions lost, left", S.STALE) for s in (*IN_GROUP, S.STALE)),
    (S.STALE, "application polled: rejoin at epoch 0", S.JOINING),
    (S.STALE, "leave", S.UNSUBSCRIBED),
    *((s, "fatal error", S.FATAL) for s in IN_GROUP),
)

_SUBSCRIBED = (*IN_GROUP, S.FENCED, S.STALE)

#: The lookup: (state, trigger) -> next state, and the states each application event is legal in.
TABLE = Transitions(
    TRANSITIONS,
    {
        Subscribe: frozenset((*_SUBSCRIBED, S.UNSUBSCRIBED)),
        EnforceRebalance: frozenset(_SUBSCRIBED),
        AssignorMetadataChanged: frozenset((*_SUBSCRIBED, S.UNSUBSCRIBED)),
        Leave: frozenset((*_SUBSCRIBED, S.UNSUBSCRIBED, S.FATAL)),
        PollTimerExpired: frozenset((*_SUBSCRIBED,)),
        ApplicationPolled: frozenset((*_SUBSCRIBED, S.UNSUBSCRIBED)),
    },
)
USER_EVENTS = TABLE.user_events
check_transition = TABLE.check_transition
check_event = TABLE.check_event
