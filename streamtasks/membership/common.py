"""What the classic and the KIP-848 member keep alike: frozen records and pure helpers.

Both members are the one owner of their state (h11's rule); what they share is the shape of
the commit before a revocation (:class:`Gate`, :class:`Purpose`), the requests they wait for
and the listener invocations not reported yet (:class:`Requests`), and the two actions that
tell the driver about ownership (:func:`listener_call`, :func:`assignment_changed`). The
functions here compute new records and actions; they change nothing.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from streamtasks.errors import LocalProtocolError
from streamtasks.membership.classic.actions import AssignmentChanged, InvokeListener, ListenerKind
from topology.ids import TopicPartition

__all__ = [
    "MAX_OPEN_INVOCATIONS",
    "Gate",
    "InFlight",
    "Purpose",
    "Requests",
    "answered",
    "assignment_changed",
    "check_issued",
    "lookup_answered",
    "listener_call",
    "sorted_tps",
]

ApiT = TypeVar("ApiT", bound=enum.Enum)

#: Listener invocations remembered until the driver reports them (it need not report them all).
MAX_OPEN_INVOCATIONS = 256


def sorted_tps(partitions: Iterable[TopicPartition]) -> tuple[TopicPartition, ...]:
    return tuple(sorted(partitions))


class Purpose(enum.Enum):
    """Why offsets are being committed before a revocation."""

    JOIN = "join prepare"  # classic
    SYNC = "revocation after SyncGroup"  # classic
    RECONCILE = "reconciliation"  # KIP-848
    LEAVE = "leave"


@dataclass(frozen=True, slots=True, kw_only=True)
class Gate:
    """Offsets of ``partitions`` are committed before they are revoked."""

    purpose: Purpose
    partitions: frozenset[TopicPartition]
    deadline_ms: int
    retry_at_ms: int
    commit_id: int | None = None
    assignment: frozenset[TopicPartition] = frozenset()  # Purpose.SYNC: what to own afterwards
    user_data: bytes = b""  # Purpose.SYNC: the user data of that assignment


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


def listener_call(
    invocation_id: int, kind: ListenerKind, partitions: frozenset[TopicPartition], generation: int
) -> InvokeListener:
    return InvokeListener(
        invocation_id=invocation_id, kind=kind, partitions=sorted_tps(partitions), generation=generation
    )


def assignment_changed(
    before: frozenset[TopicPartition],
    owned: frozenset[TopicPartition],
    generation: int,
    user_data: bytes,
    lost: frozenset[TopicPartition] = frozenset(),
) -> AssignmentChanged:
    """What the driver hears when ownership goes from ``before`` to ``owned``; ``lost``:
    partitions given up without a revocation (only those removed are reported lost)."""
    removed = before - owned
    return AssignmentChanged(
        generation=generation,
        owned=sorted_tps(owned),
        added=sorted_tps(owned - before),
        removed=sorted_tps(removed),
        user_data=user_data,
        lost=sorted_tps(lost & removed),
    )
