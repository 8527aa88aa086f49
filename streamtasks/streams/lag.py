"""When a member asks for a rebalance because of its standbys' lags (KIP-848, "Member Behavior").

Sans-IO: the driver feeds lag observations with :meth:`LagTrigger.observe`, asks
:meth:`LagTrigger.poll` whether to trigger a rebalance now, and sleeps until
:meth:`LagTrigger.next_deadline_ms`. Two triggers, each at most once per task per assignment:

* ``caught_up``: a **warm-up** task's lag is within ``acceptable_recovery_lag`` -- it is ready to
  take over, and a rebalance lets the leader move the active there. Plain standbys never
  trigger this way (they are usually caught up; that would rebalance for ever).
* ``lag_growing``: a standby or warm-up whose observed lag only rose (every observation at
  least the previous one, the last strictly above the first) over at least
  ``growth_window_ms`` -- it is falling behind, so the assignment should change.

Rate limit: at most one trigger per ``min_interval_ms`` (kept across :meth:`LagTrigger.reset`);
a trigger held back stays pending and a later :meth:`LagTrigger.poll` returns it. ``reset``
after every assignment forgets observations, pending triggers and which tasks fired, so a
warm-up that was already caught up triggers once more on its next observation.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from streamtasks.errors import ConfigError, LocalProtocolError
from topology.ids import TaskId

__all__ = ["LagTrigger", "RebalanceTrigger", "TriggerKind"]

TriggerKind = Literal["caught_up", "lag_growing"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RebalanceTrigger:
    """Why the member should rejoin now: ``task``'s ``lag`` when the trigger was detected."""

    task: TaskId
    lag: int
    reason: str
    kind: TriggerKind


@dataclass(slots=True)
class _Run:
    """The current run of non-decreasing observations of one task."""

    start_ms: int
    start_lag: int
    last_ms: int
    last_lag: int


class LagTrigger:
    """The member-side rebalance trigger policy (module docstring)."""

    def __init__(
        self, *, acceptable_recovery_lag: int, growth_window_ms: int = 60_000, min_interval_ms: int = 2_000
    ) -> None:
        if acceptable_recovery_lag < 0:
            raise ConfigError(f"acceptable_recovery_lag must be >= 0, got {acceptable_recovery_lag}")
        if growth_window_ms <= 0:
            raise ConfigError(f"growth_window_ms must be > 0, got {growth_window_ms}")
        if min_interval_ms < 0:
            raise ConfigError(f"min_interval_ms must be >= 0, got {min_interval_ms}")
        self._acceptable = acceptable_recovery_lag
        self._window = growth_window_ms
        self._min_interval = min_interval_ms
        self._warmups: frozenset[TaskId] = frozenset()
        self._standbys: frozenset[TaskId] = frozenset()
        self._runs: dict[TaskId, _Run] = {}
        self._fired: set[tuple[TriggerKind, TaskId]] = set()
        self._pending: list[RebalanceTrigger] = []
        self._last_trigger_ms: int | None = None

    @property
    def warmups(self) -> frozenset[TaskId]:
        return self._warmups

    @property
    def standbys(self) -> frozenset[TaskId]:
        """Plain standbys (warm-ups excluded)."""
        return self._standbys

    @property
    def pending(self) -> tuple[RebalanceTrigger, ...]:
        """Triggers detected and not yet returned by :meth:`poll`, oldest first."""
        return tuple(self._pending)

    def reset(self, warmups: Iterable[TaskId], standbys: Iterable[TaskId], now_ms: int) -> None:
        """Start over for a new assignment (a task in both sets is a warm-up)."""
        del now_ms  # observations carry their own times; kept for a uniform driver API
        self._warmups = frozenset(warmups)
        self._standbys = frozenset(standbys) - self._warmups
        self._runs.clear()
        self._fired.clear()
        self._pending.clear()

    def observe(self, task: TaskId, lag: int, now_ms: int) -> None:
        """Record ``task``'s lag at ``now_ms``; tasks that are neither standby nor warm-up are
        ignored. Raises :class:`~streamtasks.errors.LocalProtocolError` for a negative lag."""
        if lag < 0:
            raise LocalProtocolError(f"lag of task {task} must be >= 0, got {lag}")
        warmup = task in self._warmups
        if not warmup and task not in self._standbys:
            return
        run = self._runs.get(task)
        if run is None or lag < run.last_lag or now_ms < run.last_ms:
            run = self._runs[task] = _Run(start_ms=now_ms, start_lag=lag, last_ms=now_ms, last_lag=lag)
        else:
            run.last_ms, run.last_lag = now_ms, lag
        if warmup and lag <= self._acceptable:
            reason = f"warm-up {task} caught up: lag {lag} <= acceptable {self._acceptable}"
            self._fire("caught_up", task, lag, reason)
        if run.last_lag > run.start_lag and run.last_ms - run.start_ms >= self._window:
            self._fire(
                "lag_growing",
                task,
                lag,
                f"{'warm-up' if warmup else 'standby'} {task} lag rose from {run.start_lag} to {lag} "
                f"over {run.last_ms - run.start_ms} ms",
            )

    def _fire(self, kind: TriggerKind, task: TaskId, lag: int, reason: str) -> None:
        if (kind, task) in self._fired:
            return
        self._fired.add((kind, task))
        self._pending.append(RebalanceTrigger(task=task, lag=lag, reason=reason, kind=kind))

    def poll(self, now_ms: int) -> RebalanceTrigger | None:
        """The oldest pending trigger, unless one was returned less than ``min_interval_ms`` ago."""
        if not self._pending or not self._allowed(now_ms):
            return None
        self._last_trigger_ms = now_ms
        return self._pending.pop(0)

    def next_deadline_ms(self, now_ms: int) -> int | None:
        """When :meth:`poll` will return something (``now_ms`` if it would now); ``None``
        while nothing is pending (only a new observation can change that)."""
        if not self._pending:
            return None
        if self._last_trigger_ms is None:
            return now_ms
        return max(now_ms, self._last_trigger_ms + self._min_interval)

    def _allowed(self, now_ms: int) -> bool:
        return self._last_trigger_ms is None or now_ms >= self._last_trigger_ms + self._min_interval
