"""Timers as keyed writes (Kafka's ``CoordinatorTimer``): a write schedules or cancels a timer by
key; when a timer's deadline passes, the coordinator's ``on_timer(key, now_ms)`` is the write
that handles it. Timers are soft state, like Kafka's: not persisted, rearmed after loading."""

from __future__ import annotations

import enum
import heapq
from dataclasses import dataclass

__all__ = ["CancelTimer", "ScheduleTimer", "TimerKey", "TimerKind", "TimerOp", "Timers"]


class TimerKind(enum.Enum):
    #: A member that does not heartbeat within the session timeout is removed.
    SESSION = "session"
    #: A member that does not acknowledge a revocation within its rebalance timeout is removed.
    REVOCATION = "revocation"
    #: The member asked to compute the assignment did not install one within its rebalance
    #: timeout (counted from when it was told): another member is asked.
    ASSIGNMENT = "assignment"
    #: Batching (``CoordinatorConfig.assignment_interval_ms``): armed when a server-side
    #: target is computed; while it is armed a new group epoch waits, and when it fires the
    #: target is computed for the latest epoch if one is owed (Kafka's KIP-1263).
    ASSIGNMENT_INTERVAL = "assignment_interval"
    #: A classic member (``classic.py``): while its JoinGroup is parked, when the join is
    #: answered with what the member can have then; otherwise (it was told
    #: REBALANCE_IN_PROGRESS) the deadline to rejoin, after which it is removed. Both are the
    #: member's rebalance timeout (Kafka's consumer-group join timeout).
    JOIN = "join"
    #: A classic member whose JoinGroup was answered must send SyncGroup within its rebalance
    #: timeout, or it is removed (Kafka's consumer-group sync timeout).
    SYNC = "sync"
    #: A streams group's probing rebalance (``coordinator/streams``): the task assignor asked
    #: for a follow-up (KIP-441: warm-ups catching up); when it fires the group epoch is bumped.
    PROBING = "probing"
    #: A streams group's initial rebalance delay (``group.streams.initial.rebalance.delay.ms``):
    #: armed when a member joins the empty group; when it fires the owed target is computed.
    INITIAL_REBALANCE = "initial_rebalance"


@dataclass(frozen=True, slots=True)
class TimerKey:
    kind: TimerKind
    group_id: str
    member_id: str = ""

    def __lt__(self, other: object) -> bool:  # enum values are not ordered; keys are
        if not isinstance(other, TimerKey):
            return NotImplemented
        return (self.kind.value, self.group_id, self.member_id) < (
            other.kind.value,
            other.group_id,
            other.member_id,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ScheduleTimer:
    key: TimerKey
    deadline_ms: int


@dataclass(frozen=True, slots=True, kw_only=True)
class CancelTimer:
    key: TimerKey


TimerOp = ScheduleTimer | CancelTimer


class Timers:
    """Deadlines by key, with the earliest found in O(log n) (a heap with lazy deletion)."""

    __slots__ = ("_deadlines", "_heap", "_seq")

    def __init__(self) -> None:
        self._deadlines: dict[TimerKey, int] = {}
        self._heap: list[tuple[int, int, TimerKey]] = []
        self._seq = 0

    def __len__(self) -> int:
        return len(self._deadlines)

    def deadline(self, key: TimerKey) -> int | None:
        return self._deadlines.get(key)

    def is_armed(self, key: TimerKey) -> bool:
        return key in self._deadlines

    def apply(self, op: TimerOp) -> None:
        if isinstance(op, ScheduleTimer):
            self._deadlines[op.key] = op.deadline_ms
            self._seq += 1
            heapq.heappush(self._heap, (op.deadline_ms, self._seq, op.key))
            if len(self._heap) > 64 + 2 * len(self._deadlines):
                self._compact()
        else:
            self._deadlines.pop(op.key, None)

    def clear(self) -> None:
        self._deadlines.clear()
        self._heap.clear()

    def _compact(self) -> None:
        live = self._deadlines
        self._heap = [entry for entry in self._heap if live.get(entry[2]) == entry[0]]
        heapq.heapify(self._heap)

    def _drop_stale(self) -> None:
        heap, live = self._heap, self._deadlines
        while heap and live.get(heap[0][2]) != heap[0][0]:
            heapq.heappop(heap)

    def next_deadline_ms(self) -> int | None:
        self._drop_stale()
        return self._heap[0][0] if self._heap else None

    def expired(self, now_ms: int) -> list[TimerKey]:
        """Keys whose deadline is at or before ``now_ms``, earliest first (ties by key)."""
        first = self.next_deadline_ms()
        if first is None or first > now_ms:
            return []
        due = sorted((d, k) for k, d in self._deadlines.items() if d <= now_ms)
        return [k for _, k in due]
