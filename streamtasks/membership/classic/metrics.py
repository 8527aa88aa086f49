"""KIP-429's consumer rebalance metrics, kept from injected time (``now_ms``), no clock.

Names are Kafka's (``consumer-coordinator-metrics`` group): rebalance latency avg/max/total,
rebalance-total, rebalance-rate-per-hour, failed-rebalance-total,
failed-rebalance-rate-per-hour, the listener callback latencies and
last-rebalance-seconds-ago. Rates count events in the trailing hour; before the member is an
hour old the rate is extrapolated from the time it has existed (at least one second), as a
windowed ``Rate`` would.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field

from streamtasks.membership.classic.actions import ListenerKind

__all__ = ["HOUR_MS", "RebalanceMetrics"]

HOUR_MS = 3_600_000
_LISTENER_PREFIX = {
    ListenerKind.REVOKED: "partitions-revoked-latency",
    ListenerKind.ASSIGNED: "partitions-assigned-latency",
    ListenerKind.LOST: "partitions-lost-latency",
}


@dataclass(slots=True)
class _Stat:
    count: int = 0
    total: float = 0.0
    maximum: float = 0.0

    def record(self, value: float) -> None:
        self.count += 1
        self.total += value
        self.maximum = max(self.maximum, value)

    @property
    def avg(self) -> float:
        return self.total / self.count if self.count else 0.0


@dataclass(slots=True)
class _Windowed:
    times: deque[int] = field(default_factory=deque)
    total: int = 0

    def record(self, now_ms: int) -> None:
        self.total += 1
        self.times.append(now_ms)

    def per_hour(self, now_ms: int, created_ms: int) -> float:
        while self.times and self.times[0] <= now_ms - HOUR_MS:
            self.times.popleft()
        window = min(HOUR_MS, max(now_ms - created_ms, 1_000))
        return len(self.times) * HOUR_MS / window


class RebalanceMetrics:
    """Mutable metric state owned by one member; :meth:`snapshot` reads it at ``now_ms``."""

    __slots__ = (
        "_completed",
        "_created_ms",
        "_errors",
        "_failed",
        "_last_ms",
        "_latency",
        "_listeners",
        "_readopted",
        "_stale",
        "_started_ms",
    )

    def __init__(self, created_ms: int = 0) -> None:
        self._created_ms = created_ms
        self._latency = _Stat()
        self._completed = _Windowed()
        self._failed = _Windowed()
        self._listeners = {kind: _Stat() for kind in ListenerKind}
        self._last_ms: int | None = None
        self._started_ms: int | None = None
        self._errors = 0
        self._stale = 0
        self._readopted = 0

    def rebalance_started(self, now_ms: int) -> None:
        """A rebalance begins (join prepare); a later call while one runs keeps the first start."""
        if self._started_ms is None:
            self._started_ms = now_ms

    def rebalance_completed(self, now_ms: int) -> None:
        """The member applied the assignment of a new generation."""
        start = self._started_ms if self._started_ms is not None else now_ms
        self._latency.record(float(max(0, now_ms - start)))
        self._completed.record(now_ms)
        self._last_ms = now_ms
        self._started_ms = None

    def rebalance_failed(self, now_ms: int) -> None:
        """A JoinGroup / SyncGroup round failed (error, timeout, malformed answer). The
        rebalance is still considered running: its latency counts until it completes."""
        self._failed.record(now_ms)

    def rebalance_abandoned(self) -> None:
        """The member stopped rebalancing without completing (left the group, failed)."""
        self._started_ms = None

    def listener_completed(self, kind: ListenerKind, latency_ms: int) -> None:
        self._listeners[kind].record(float(max(0, latency_ms)))

    def error_reported(self) -> None:
        self._errors += 1

    def stale_response(self) -> None:
        self._stale += 1

    def readopted(self) -> None:
        """A lapsed generation's assignment was taken back without a rebalance (:mod:`.readopt`)."""
        self._readopted += 1

    def snapshot(self, now_ms: int) -> Mapping[str, float]:
        """Every metric by its Kafka name, plus ``errors-reported-total``,
        ``stale-responses-total`` and ``lapsed-assignments-taken-back-total`` (streamtasks' own)."""
        out: dict[str, float] = {
            "rebalance-latency-avg": self._latency.avg,
            "rebalance-latency-max": self._latency.maximum,
            "rebalance-latency-total": self._latency.total,
            "rebalance-total": float(self._completed.total),
            "rebalance-rate-per-hour": self._completed.per_hour(now_ms, self._created_ms),
            "failed-rebalance-total": float(self._failed.total),
            "failed-rebalance-rate-per-hour": self._failed.per_hour(now_ms, self._created_ms),
            "last-rebalance-seconds-ago": (
                -1.0 if self._last_ms is None else max(0, now_ms - self._last_ms) / 1000.0
            ),
        }
        for kind, prefix in _LISTENER_PREFIX.items():
            stat = self._listeners[kind]
            out[f"{prefix}-avg"] = stat.avg
            out[f"{prefix}-max"] = stat.maximum
        out["errors-reported-total"] = float(self._errors)
        out["stale-responses-total"] = float(self._stale)
        out["lapsed-assignments-taken-back-total"] = float(self._readopted)
        return dict(sorted(out.items()))
