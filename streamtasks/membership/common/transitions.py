"""A member's legal moves as data, looked up the way h11 does: (state, trigger) -> next state.

Each protocol lists its moves as ``(from, trigger, to)`` rows (the same rows its documentation
shows) and the states in which each application event is legal; :class:`Transitions` turns
them into the lookup the machine asks. The table decides: a machine names the trigger, never the
next state, and a pair that is not in the table raises :class:`LocalProtocolError`.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Generic, TypeVar

from streamtasks.errors import LocalProtocolError

__all__ = ["StateT", "Transitions", "each"]

StateT = TypeVar("StateT", bound=enum.Enum)


def each(states: Iterable[StateT], trigger: str, to: StateT) -> tuple[tuple[StateT, str, StateT], ...]:
    """The row ``(s, trigger, to)`` for every ``s`` of ``states``: one move from many states."""
    return tuple((s, trigger, to) for s in states)


class Transitions(Generic[StateT]):
    """The lookup built from a protocol's rows; frozen once built.

    ``rows``: every ``(from, trigger, to)``; one ``(from, trigger)`` names one ``to`` (a second
    one is a bug in the table and raises ``ValueError``). ``user_events``: the states in which
    each application event type is legal; events not named there are legal everywhere.
    """

    __slots__ = ("_next", "_pairs", "_user_events", "rows")

    def __init__(
        self,
        rows: Iterable[tuple[StateT, str, StateT]],
        user_events: Mapping[type, frozenset[StateT]],
    ) -> None:
        self.rows = tuple(rows)
        moves: dict[tuple[StateT, str], StateT] = {}
        for src, trigger, dst in self.rows:
            if moves.setdefault((src, trigger), dst) is not dst:
                raise ValueError(f"{src.name} with {trigger!r} leads to two states")
        self._next: Mapping[tuple[StateT, str], StateT] = MappingProxyType(moves)
        self._pairs = frozenset((src, dst) for src, _, dst in self.rows)
        self._user_events = MappingProxyType(dict(user_events))

    @property
    def user_events(self) -> Mapping[type, frozenset[StateT]]:
        return self._user_events

    def next_state(self, state: StateT, trigger: str) -> StateT:
        """The state ``trigger`` leads to from ``state``; :class:`LocalProtocolError` when the
        table has no such move."""
        found = self._next.get((state, trigger))
        if found is None:
            raise LocalProtocolError(f"illegal transition from {state.name} ({trigger})")
        return found

    def check_transition(self, src: StateT, dst: StateT, trigger: str) -> None:
        """Raise :class:`LocalProtocolError` unless some row leads from ``src`` to ``dst``."""
        if src is not dst and (src, dst) not in self._pairs:
            raise LocalProtocolError(f"illegal transition {src.name} -> {dst.name} ({trigger})")

    def check_event(self, state: StateT, event: object) -> None:
        """Raise :class:`LocalProtocolError` if the application event is illegal in ``state``."""
        allowed = self._user_events.get(type(event))
        if allowed is not None and state not in allowed:
            raise LocalProtocolError(f"{type(event).__name__} is not allowed in state {state.name}")
