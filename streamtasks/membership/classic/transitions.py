"""The legal transitions of a classic member, as data.

``TRANSITIONS`` lists every (from, trigger, to) the machine may take; the machine refuses any
other (``LocalProtocolError``), and ``docs/membership.md`` shows the same table.
``USER_EVENTS`` says in which states an application event is legal; broker events (responses,
failures, coordinator news, metadata) are legal in every state and ignored when stale.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from streamtasks.errors import LocalProtocolError
from streamtasks.membership.classic.events import EnforceRebalance, Leave, Subscribe
from streamtasks.membership.classic.states import REBALANCING as _REBALANCING
from streamtasks.membership.classic.states import MemberState as S

__all__ = ["TRANSITIONS", "USER_EVENTS", "check_event", "check_transition"]

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
    *((s, "fenced: partitions lost", S.UNJOINED) for s in (S.STABLE, *_REBALANCING)),
    *((s, "fatal error", S.FAILED) for s in (*_LIVE, S.LEAVING)),
    *((s, "leave: commit before revoking", S.LEAVING) for s in (S.STABLE, *_REBALANCING)),
    *((s, "leave", S.CLOSED) for s in (*_LIVE, S.FAILED)),
    (S.LEAVING, "commit done: revoked, left", S.CLOSED),
    (S.LEAVING, "fenced: partitions lost, left", S.CLOSED),
    (S.CLOSED, "subscribe", S.UNJOINED),
)

_ALLOWED = frozenset((src, dst) for src, _, dst in TRANSITIONS)

#: The states in which each application event is legal.
USER_EVENTS: Mapping[type, frozenset[S]] = MappingProxyType(
    {
        Subscribe: frozenset((*_LIVE, S.CLOSED)),
        EnforceRebalance: frozenset(_LIVE),
        Leave: frozenset((*_LIVE, S.FAILED)),
    }
)


def check_transition(src: S, dst: S, trigger: str) -> None:
    """Raise :class:`LocalProtocolError` unless ``src -> dst`` is in :data:`TRANSITIONS`."""
    if src is not dst and (src, dst) not in _ALLOWED:
        raise LocalProtocolError(f"illegal transition {src.name} -> {dst.name} ({trigger})")


def check_event(state: S, event: object) -> None:
    """Raise :class:`LocalProtocolError` if the application event is illegal in ``state``."""
    allowed = USER_EVENTS.get(type(event))
    if allowed is not None and state not in allowed:
        raise LocalProtocolError(f"{type(event).__name__} is not allowed in state {state.name}")
