"""What a simulated world schedules: messages in flight, a process's timers, scenario steps and
the coordinator's timer. Every world (each protocol's side) uses these; a side adds its own
items by subclassing :class:`SideItem`."""

from __future__ import annotations

from dataclasses import dataclass

from streamtasks.sim.scenario import Step

__all__ = [
    "CoordinatorWake",
    "FailoverEnd",
    "Item",
    "ProcessItem",
    "SideItem",
    "StepDue",
    "ToCoordinator",
    "ToMember",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class ToCoordinator:
    """A request arriving at the coordinator."""

    conn: str
    request_id: int
    request: object
    #: A copy whose answer has nowhere to go: a late join (the KIP-848 world's late-join fault),
    #: or a request served as its connection broke (``MemberHost.duplicate_is_retry``).
    late: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class ToMember:
    """A response arriving at a process."""

    conn: str
    request_id: int
    response: object


@dataclass(frozen=True, slots=True, kw_only=True)
class ProcessItem:
    """Something due at a process: ``wake`` (its member's deadline), ``resume`` (end of a
    pause), ``lookup`` (a FindCoordinator answer), ``metadata`` (a metadata refresh), ``failed``
    (the connection broke under request ``request_id``)."""

    kind: str
    conn: str
    request_id: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class StepDue:
    """A scenario step whose time has come."""

    step: Step


@dataclass(frozen=True, slots=True, kw_only=True)
class CoordinatorWake:
    """The coordinator's next timer is due."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SideItem:
    """Something only one protocol's side schedules (a fail-over's end, say)."""


Item = ToCoordinator | ToMember | ProcessItem | StepDue | CoordinatorWake | SideItem


@dataclass(frozen=True, slots=True, kw_only=True)
class FailoverEnd(SideItem):
    """A coordinator's fail-over is over: its replacement loads the log (the KIP-848 and
    streams sides)."""
