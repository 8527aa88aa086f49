"""The consumer-coordinator rebalance metrics of a KIP-848 or streams-group member.

A classic member keeps KIP-429's rebalance metrics itself (its JoinGroup / SyncGroup rounds:
:class:`streamtasks.membership.classic.metrics.RebalanceMetrics`). A KIP-848 consumer or a
KIP-1071 streams member has no rounds: as Apache Kafka's consumer under the new protocol does, a
rebalance here is the member moving to a new assignment, from the state that leaves ``STABLE``
(or the first assignment of ``JOINING``) for ``RECONCILING`` / ``ACKNOWLEDGING`` until it is
``STABLE`` again: ``rebalance-latency-*`` is the time its partitions or tasks were being moved.
A member fenced or failing in between counts a failed rebalance; one that leaves, an abandoned
one. :class:`EpochRebalances` follows the states the member loop sees after each step (the
same numbers, names and rates as the classic member's, through the same
:class:`RebalanceMetrics`).
"""

from __future__ import annotations

from collections.abc import Mapping

from streamtasks.membership.classic.metrics import RebalanceMetrics
from streamtasks.membership.common.states import MemberState

__all__ = ["EpochRebalances"]

S = MemberState
MOVING = (S.RECONCILING, S.ACKNOWLEDGING)
FAILED = (S.FENCED, S.FATAL, S.STALE)
#: What of the classic member's snapshot means nothing here: the listener latencies (a streams
#: member's task callbacks are timed by the App) and the JoinGroup rounds' own counts.
LEFT_OUT = ("partitions-", "errors-reported-total", "stale-responses-total")


class EpochRebalances:
    """Rebalance metrics from an epoch member's state moves (module docstring)."""

    def __init__(self, created_ms: int) -> None:
        self._metrics = RebalanceMetrics(created_ms)
        self._moving = False

    def observe(self, state: object, now_ms: int) -> None:
        """The member's state after a step of its loop."""
        if not isinstance(state, MemberState):
            return  # a classic member: it keeps its own
        if state in MOVING:
            if not self._moving:
                self._moving = True
                self._metrics.rebalance_started(now_ms)
        elif state is S.STABLE:
            if self._moving:
                self._moving = False
                self._metrics.rebalance_completed(now_ms)
        elif self._moving:
            self._moving = False
            if state in FAILED:
                self._metrics.rebalance_failed(now_ms)
            self._metrics.rebalance_abandoned()

    def snapshot(self, now_ms: int) -> Mapping[str, float]:
        return {k: v for k, v in self._metrics.snapshot(now_ms).items() if not k.startswith(LEFT_OUT)}
