"""The plumbing every member holds (composition, not a base class): its state and the table
that moves it, the actions a call returns, and the requests it waits for.

A member builds one :class:`Kernel` with its :class:`~.transitions.Transitions` table and its
``SendRequest`` type, and keeps the protocol in its own records and methods. The kernel is the
one owner of the state, the action list and :class:`~.requests.Requests`: ``goto(trigger)``
asks the table for the next state, ``send`` issues a request and emits the protocol's
``SendRequest``, ``report`` an ``ErrorReported``; ``flush`` hands the list to the caller.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Generic, Protocol, TypeVar

from streamtasks.errors import LocalProtocolError
from streamtasks.membership.common.actions import (
    CommonAction,
    ErrorReported,
    FindCoordinator,
    ListenerKind,
    listener_call,
)
from streamtasks.membership.common.events import ListenerCompleted
from streamtasks.membership.common.requests import (
    ApiT,
    InFlight,
    Requests,
    answered,
    check_issued,
    lookup_answered,
)
from streamtasks.membership.common.transitions import StateT, Transitions
from streamtasks.protocol.errors import KafkaErrorCode
from topology.ids import TopicPartition

__all__ = ["Kernel", "SendRequestType", "handler_for"]

RequestT_contra = TypeVar("RequestT_contra", contravariant=True)
SendT_co = TypeVar("SendT_co", covariant=True)
RequestT = TypeVar("RequestT")
SendT = TypeVar("SendT")
HandlerT = TypeVar("HandlerT")


def handler_for(handlers: Mapping[type, HandlerT], event: object) -> HandlerT:
    """What a member's ``handle`` calls for ``event``: its entry in ``handlers`` (by type);
    :class:`LocalProtocolError` for anything that is not one of the member's events."""
    found = handlers.get(type(event))
    if found is None:
        raise LocalProtocolError(f"{type(event).__name__} is not an event this member handles")
    return found


class SendRequestType(Protocol[RequestT_contra, SendT_co]):
    """A protocol's ``SendRequest`` class: built from the request id and the request."""

    def __call__(self, *, request_id: int, request: RequestT_contra) -> SendT_co: ...


class Kernel(Generic[StateT, ApiT, RequestT, SendT]):
    """State, actions and requests of one member; see the module's docstring."""

    __slots__ = ("_expects", "_out", "_send_request", "_state", "_table", "requests")

    def __init__(
        self,
        table: Transitions[StateT],
        state: StateT,
        send_request: SendRequestType[RequestT, SendT],
        expects: Mapping[ApiT, type],
    ) -> None:
        self._table = table
        self._expects = expects
        self._state = state
        self._send_request = send_request
        self.requests: Requests[ApiT] = Requests()
        self._out: list[SendT | CommonAction] = []

    # ------------------------------------------------------------------ state

    @property
    def state(self) -> StateT:
        return self._state

    def start(self, event: object) -> None:
        """Begin a call for ``event``: refused if it is an application event illegal now."""
        self._table.check_event(self._state, event)
        self._out = []

    def check_event(self, event: object) -> None:
        """Raise :class:`LocalProtocolError` if the application event is illegal now."""
        self._table.check_event(self._state, event)

    def goto(self, trigger: str) -> None:
        """Move to the state the table names for (current state, ``trigger``)."""
        self._state = self._table.next_state(self._state, trigger)

    # ------------------------------------------------------------------ actions

    def begin(self) -> None:
        """Start a call: nothing emitted yet."""
        self._out = []

    def emit(self, action: SendT | CommonAction) -> None:
        self._out.append(action)

    def flush(self) -> list[SendT | CommonAction]:
        """The actions emitted since :meth:`begin`, in order; the kernel forgets them."""
        out, self._out = self._out, []
        return out

    def report(self, reason: str, code: KafkaErrorCode | None, *, fatal: bool = False) -> None:
        self._out.append(ErrorReported(reason=reason, code=code, fatal=fatal))

    # ------------------------------------------------------------------ requests

    def issue(self, api: ApiT | None, deadline_ms: int, generation: int) -> int:
        """One more request in flight (``None``: a FindCoordinator); its id."""
        self.requests, rid = self.requests.issued(api, deadline_ms, generation)
        return rid

    def send(self, api: ApiT, request: RequestT, deadline_ms: int, generation: int) -> int:
        """Issue ``request`` and emit the protocol's ``SendRequest`` for it; its id."""
        rid = self.issue(api, deadline_ms, generation)
        self._out.append(self._send_request(request_id=rid, request=request))
        return rid

    def find(self, group_id: str, deadline_ms: int, generation: int, *, silent: bool = False) -> None:
        """Emit a coordinator lookup (``silent``: :class:`FindCoordinator`'s)."""
        rid = self.issue(None, deadline_ms, generation)
        self._out.append(FindCoordinator(request_id=rid, group_id=group_id, silent=silent))

    def settle(self, request_id: int) -> InFlight[ApiT] | None:
        """The request in flight with this id, which the member no longer waits for."""
        self.requests, found = self.requests.settled(request_id)
        return found

    def keep(self, apis: Iterable[ApiT | None]) -> None:
        """Forget every request in flight whose API is not in ``apis`` (``None``: lookups)."""
        self.requests = self.requests.keeping(frozenset(apis))

    def answer(self, request_id: int, response: object) -> InFlight[ApiT] | None:
        """The request ``response`` answers, no longer waited for; ``None`` when the member
        no longer waited for it. An id never issued, or a response of the wrong type for
        the request, raises :class:`LocalProtocolError` (a driver bug)."""
        pending = answered(self.requests, request_id, response, self._expects)
        if pending is not None:
            self.settle(request_id)
        return pending

    def fail(self, request_id: int) -> InFlight[ApiT] | None:
        """The request that failed, no longer waited for; ``None`` when the member no longer
        waited for it. An id never issued raises."""
        check_issued(self.requests, request_id)
        return self.settle(request_id)

    def discovered(self, request_id: int | None) -> bool:
        """Whether a ``CoordinatorDiscovered`` is news (it answers a lookup in flight, or
        none: ``request_id`` None); if so, no lookup is waited for any more."""
        if not lookup_answered(self.requests, request_id):
            return False
        self.requests = self.requests.keeping(frozenset(self._expects))
        return True

    def listener(
        self, kind: ListenerKind, partitions: frozenset[TopicPartition], now_ms: int, generation: int
    ) -> None:
        """Emit a listener call, remembered until the driver reports it."""
        self.requests, n = self.requests.invoked(kind, now_ms)
        self._out.append(listener_call(n, kind, partitions, generation))

    def listener_completed(self, event: ListenerCompleted) -> tuple[ListenerKind, int] | None:
        """The invocation ``event`` reports (kind, time emitted), now forgotten; ``None`` when it
        was reported before or is too old to remember. An id never emitted raises."""
        r = self.requests
        if not 0 < event.invocation_id <= r.next_invocation:
            raise LocalProtocolError(f"ListenerCompleted for unknown invocation {event.invocation_id}")
        found = r.invocations.get(event.invocation_id)
        if found is not None:
            self.requests = r.reported(event.invocation_id)
        return found
