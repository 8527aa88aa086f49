"""The commit before a revocation, as both members keep it: :class:`Gate` and its
:class:`Purpose`. Frozen records; the member that holds one is its only owner (h11's rule)."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from topology.ids import TopicPartition

__all__ = ["Gate", "Purpose"]


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

    def due(self, now_ms: int, coordinator_known: bool) -> bool:
        """Whether the commit is to be sent now: none in flight, the coordinator known, the
        retry time reached."""
        return self.commit_id is None and coordinator_known and now_ms >= self.retry_at_ms
