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
from streamtasks.membership.common.states import IN_GROUP, heartbeat_lifecycle
from streamtasks.membership.common.states import MemberState as S
from streamtasks.membership.common.transitions import Transitions, each
from streamtasks.membership.consumer.events import (
    ApplicationPolled,
    AssignorMetadataChanged,
    PollTimerExpired,
)
from streamtasks.membership.consumer.lapse import ASK, REJOIN

__all__ = ["IN_GROUP", "TABLE", "TRANSITIONS", "USER_EVENTS", "check_event", "check_transition"]

#: (from, trigger, to). Triggers are short labels, also used in error messages and the docs;
#: the moves both heartbeat members make come first (:func:`.common.states.heartbeat_lifecycle`).
TRANSITIONS: tuple[tuple[S, str, S], ...] = (
    *heartbeat_lifecycle(
        join="subscribe: join at epoch 0",
        first="heartbeat ok: first assignment",
        new="heartbeat ok: new assignment",
        lost="fenced: partitions lost",
        rejoin=REJOIN,
        leave="leave: revoke first",
    ),
    (S.FENCED, ASK, S.JOINING),
    (S.PREPARE_LEAVING, "left without a leave heartbeat", S.UNSUBSCRIBED),
    *each((*IN_GROUP, S.STALE), "poll timer expired: partitions lost, left", S.STALE),
    (S.STALE, "application polled: rejoin at epoch 0", S.JOINING),
    (S.STALE, "leave", S.UNSUBSCRIBED),
    *each(IN_GROUP, "fatal error", S.FATAL),
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
