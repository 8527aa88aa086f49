"""Coordinator moves (the ``move`` fault): what every protocol's side shares.

A ``move`` step (see :data:`~streamtasks.sim.scenario.MOVE_TRIGGERS`) moves the group's
coordinator to another broker, as when the leader of the group's ``__consumer_offsets``
partition changes. The old broker stops being the coordinator: requests it holds (parked joins
and syncs) and requests that reach it afterwards (from every process that has not found the new
one yet, :meth:`~streamtasks.sim.host.MemberHost.to_old_coordinator`) are answered
NOT_COORDINATOR or COORDINATOR_NOT_AVAILABLE; the new one loads the group from what was written
and answers FindCoordinator with COORDINATOR_NOT_AVAILABLE until it has (the step's duration).

:class:`Moves` holds the moves waiting for their trigger and draws, from its own random stream
(a seed without moves draws nothing from it), the error each refused request gets and whether a
request a move interrupts was written before the move (``commit`` / ``sync`` triggers: the
write is kept, its answer is the error, as when a broker loses leadership while the append
completes) or not at all.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from streamtasks.membership.classic import Response as ClassicResponse
from streamtasks.membership.consumer import Response as ConsumerResponse
from streamtasks.protocol.assignment_rpc import (
    ConsumerGroupInstallAssignmentResponse,
    ConsumerGroupPrepareAssignmentRequest,
    ConsumerGroupPrepareAssignmentResponse,
)
from streamtasks.protocol.consumer_group import ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse
from streamtasks.protocol.errors import KafkaErrorCode
from streamtasks.sim.coordinator_base import Request, error_response
from streamtasks.sim.host import MemberHost
from streamtasks.sim.items import SideItem
from streamtasks.sim.scenario import MOVE_WAIT_MS, Step

__all__ = ["COORDINATOR_ERRORS", "MoveDue", "Moves", "refusal"]

#: What the old coordinator answers.
COORDINATOR_ERRORS = (KafkaErrorCode.NOT_COORDINATOR, KafkaErrorCode.COORDINATOR_NOT_AVAILABLE)


@dataclass(frozen=True, slots=True, kw_only=True)
class MoveDue(SideItem):
    """A move that waited for its trigger waits no longer."""

    step: Step


class Moves:
    """The moves of one world: waiting for their trigger, moving (``go(load_ms, error)`` is the
    side's: its coordinator's fail-over), and the draws a move makes."""

    def __init__(self, host: MemberHost[Any], go: Callable[[int, KafkaErrorCode], None]) -> None:
        self._host = host
        self._go = go
        self._rng = random.Random(f"move-run-{host.scenario.seed}")
        self._armed: list[Step] = []
        #: How each move happened: its trigger, ``commit-written`` / ``sync-written`` (the
        #: interrupted request was written first), or ``waited`` (no trigger within the wait).
        self.fired: dict[str, int] = {}

    @property
    def armed(self) -> bool:
        return bool(self._armed)

    def step_due(self, step: Step) -> None:
        """A ``move`` step is due: the coordinator moves now, or when its trigger comes (at the
        latest :data:`~streamtasks.sim.scenario.MOVE_WAIT_MS` later)."""
        if step.trigger in ("", "now"):
            self.move(step, "now")
            return
        self._armed.append(step)
        self._host.sched.schedule(self._host.now + MOVE_WAIT_MS, MoveDue(step=step))

    def wait_over(self, item: MoveDue) -> None:
        """``item``'s move moves now if it is still waiting for its trigger."""
        for i, step in enumerate(self._armed):
            if step is item.step:
                del self._armed[i]
                self.move(step, "waited")
                return

    def move(self, step: Step, how: str) -> None:
        """The group's coordinator moves to another broker now; the new one has loaded what was
        written after the step's duration."""
        host = self._host
        self.fired[how] = self.fired.get(how, 0) + 1
        host.coordinator_epoch += 1
        host.trace.add(host.now, f"coordinator moves ({how}), loading for {step.duration_ms} ms")
        self._go(step.duration_ms, self.error())

    def take(self, trigger: str) -> Step | None:
        """The first move waiting for ``trigger`` (no longer waiting), or None."""
        for i, step in enumerate(self._armed):
            if step.trigger == trigger:
                del self._armed[i]
                return step
        return None

    def interrupting(self, *, commit: bool, rebalancing: bool) -> tuple[Step, str] | None:
        """The move (and its trigger) an arriving request triggers: an OffsetCommit (``commit``)
        or, while the group rebalances, any other (``sync``)."""
        trigger = "commit" if commit else "sync" if rebalancing else ""
        step = self.take(trigger) if trigger else None
        return None if step is None else (step, trigger)

    def error(self) -> KafkaErrorCode:
        """The error a request the old coordinator refuses gets."""
        return self._rng.choice(COORDINATOR_ERRORS)

    def written_first(self) -> bool:
        """Whether a request a move interrupts was written before the move."""
        return self._rng.random() < 0.5


def refusal(request: object, error: KafkaErrorCode) -> ConsumerResponse | ClassicResponse:
    """The answer of the right type for ``request`` (classic or KIP-848) carrying only ``error``."""
    if isinstance(request, ConsumerGroupHeartbeatRequest):
        return ConsumerGroupHeartbeatResponse(error=error, member_epoch=0, heartbeat_interval_ms=0)
    if isinstance(request, ConsumerGroupPrepareAssignmentRequest):
        return ConsumerGroupPrepareAssignmentResponse(error=error)
    if not isinstance(request, Request):
        return ConsumerGroupInstallAssignmentResponse(error=error)
    return error_response(request, error)
