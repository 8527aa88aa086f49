"""The bounded event trace a failure report prints, and the violation record."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

__all__ = ["Trace", "Violation"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Violation:
    """An invariant that did not hold: which one, when, and what was seen."""

    invariant: str
    time_ms: int
    detail: str

    def __str__(self) -> str:
        return f"[{self.invariant}] t={self.time_ms}ms: {self.detail}"


class Trace:
    """The last ``limit`` lines of what happened (time-stamped), cheap to append to."""

    __slots__ = ("_lines", "enabled", "total")

    def __init__(self, limit: int = 300, *, enabled: bool = True) -> None:
        self._lines: deque[tuple[int, str]] = deque(maxlen=limit)
        self.enabled = enabled
        self.total = 0

    def add(self, time_ms: int, text: str) -> None:
        self.total += 1
        if self.enabled:
            self._lines.append((time_ms, text))

    def lines(self) -> list[str]:
        return [f"{t:>9} ms  {text}" for t, text in self._lines]
