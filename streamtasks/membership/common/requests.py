"""The requests a member waits for and the listener invocations it has not heard back about.

:class:`Requests` is a frozen record, generic over the protocol's ``Api`` enum; the functions
check an answer against the request it answers. They compute; they change nothing.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from streamtasks.errors import LocalProtocolError
from streamtasks.membership.common.actions import ListenerKind

__all__ = [
    "MAX_OPEN_INVOCATIONS",
    "ApiT",
    "InFlight",
    "Requests",
    "answered",
    "check_issued",
    "lookup_answered",
    "lookup_backoff_ms",
]

ApiT = TypeVar("ApiT", bound=enum.Enum)

#: Listener invocations remembered until the driver reports them (it need not report them all).
MAX_OPEN_INVOCATIONS = 256


@dataclass(frozen=True, slots=True, kw_only=True)
class InFlight(Generic[ApiT]):
    """A request the member waits for an answer to."""

    api: ApiT | None  # None: FindCoordinator
    deadline_ms: int
    generation: int  # the generation (classic) or member epoch (KIP-848) it was sent under


@dataclass(frozen=True, slots=True, kw_only=True)
class Requests(Generic[ApiT]):
    """What the member waits for: requests in flight and listener invocations not reported yet.

    Generic over the protocol's ``Api`` enum; annotate (``r: Requests[Api] = Requests()``)
    rather than call the subscripted alias: ``Requests[Api]()`` cannot set ``__orig_class__``
    on a frozen slotted instance and raises ``TypeError``."""

    next_id: int = 0
    inflight: Mapping[int, InFlight[ApiT]] = field(default_factory=dict)
    next_invocation: int = 0
    #: invocation id -> (kind, time it was emitted)
    invocations: Mapping[int, tuple[ListenerKind, int]] = field(default_factory=dict)

    def in_flight(self, api: ApiT | None) -> bool:
        return any(f.api is api for f in self.inflight.values())

    def finds_in_flight(self) -> bool:
        return self.in_flight(None)

    def keeping(self, keep: frozenset[ApiT | None]) -> Requests[ApiT]:
        """The same, with only the requests in flight whose API is in ``keep``."""
        return Requests(
            next_id=self.next_id,
            inflight={r: f for r, f in self.inflight.items() if f.api in keep},
            next_invocation=self.next_invocation,
            invocations=self.invocations,
        )

    def issued(self, api: ApiT | None, deadline_ms: int, generation: int) -> tuple[Requests[ApiT], int]:
        """The same with one more request in flight, and that request's id."""
        rid = self.next_id + 1
        pending = InFlight(api=api, deadline_ms=deadline_ms, generation=generation)
        out = Requests(
            next_id=rid,
            inflight={**self.inflight, rid: pending},
            next_invocation=self.next_invocation,
            invocations=self.invocations,
        )
        return out, rid

    def settled(self, request_id: int) -> tuple[Requests[ApiT], InFlight[ApiT] | None]:
        """The same without request ``request_id``, and that request (None: not in flight)."""
        found = self.inflight.get(request_id)
        if found is None:
            return self, None
        inflight = {k: v for k, v in self.inflight.items() if k != request_id}
        out = Requests(
            next_id=self.next_id,
            inflight=inflight,
            next_invocation=self.next_invocation,
            invocations=self.invocations,
        )
        return out, found

    def invoked(self, kind: ListenerKind, now_ms: int) -> tuple[Requests[ApiT], int]:
        """The same with one more listener invocation open, and its id."""
        n = self.next_invocation + 1
        invocations = {**self.invocations, n: (kind, now_ms)}
        if len(invocations) > MAX_OPEN_INVOCATIONS:  # the driver need not report them all
            del invocations[min(invocations)]
        out = Requests(
            next_id=self.next_id, inflight=self.inflight, next_invocation=n, invocations=invocations
        )
        return out, n

    def reported(self, invocation_id: int) -> Requests[ApiT]:
        """The same without the open invocation ``invocation_id``."""
        invocations = {k: v for k, v in self.invocations.items() if k != invocation_id}
        return Requests(
            next_id=self.next_id,
            inflight=self.inflight,
            next_invocation=self.next_invocation,
            invocations=invocations,
        )


def lookup_backoff_ms(base_ms: int, max_ms: int, failures: int) -> int:
    """How long to wait before the next FindCoordinator after ``failures`` failed ones in a
    row: ``base_ms`` doubled per failure up to ``max_ms`` (Kafka's ``retry.backoff.ms`` and
    ``retry.backoff.max.ms``; without Kafka's random jitter, which a sans-IO machine leaves to
    the world that drives it)."""
    if failures <= 0:
        return base_ms
    return min(max_ms, base_ms << min(failures - 1, 20)) if max_ms > base_ms else base_ms


def check_issued(requests: Requests[ApiT], request_id: int) -> None:
    """Raise :class:`LocalProtocolError` for an id this member never issued (a driver bug)."""
    if not 0 < request_id <= requests.next_id:
        raise LocalProtocolError(f"no request {request_id} was ever issued by this member")


def answered(
    requests: Requests[ApiT], request_id: int, response: object, expects: Mapping[ApiT, type]
) -> InFlight[ApiT] | None:
    """The request ``response`` answers; ``None`` when the member no longer waits for it (a
    duplicate, or one abandoned after a timeout or a reset). An id never issued, or a response
    of the wrong type, is a driver bug: :class:`LocalProtocolError`."""
    check_issued(requests, request_id)
    pending = requests.inflight.get(request_id)
    if pending is None:
        return None
    expected = expects.get(pending.api) if pending.api is not None else None
    if expected is None or not isinstance(response, expected):
        raise LocalProtocolError(
            f"request {request_id} was {pending.api.value if pending.api else 'FindCoordinator'}, "
            f"got {type(response).__name__}"
        )
    return pending


def lookup_answered(requests: Requests[ApiT], request_id: int | None) -> bool:
    """Whether a ``CoordinatorDiscovered`` answers a lookup (``None``: news without one) rather
    than a lookup the member no longer waits for; an id never issued raises."""
    if request_id is None:
        return True
    found = requests.inflight.get(request_id)
    if found is None or found.api is not None:
        check_issued(requests, request_id)
        return False
    return True
