"""Who owns which partition, according to the applications' rebalance listeners.

Every simulated application updates this ledger from the listener calls its member asks for
(``on_partitions_assigned`` adds, ``on_partitions_revoked`` / ``on_partitions_lost`` remove)
and when its process dies. The invariants read it; it also keeps the figures the summary
reports: partitions revoked, assigned, lost and moved between processes, and the
partition-milliseconds during which an existing partition had no owner at all, the longest
single such stretch, and a restore model: what a new owner replays from the changelog (one
changelog record per source record consumed) and how many hand-overs found local state.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace

from topology.ids import TopicPartition

__all__ = ["Holding", "OwnershipLedger", "Release", "ReleaseKind"]


class ReleaseKind(enum.Enum):
    """Why a process stopped owning a partition. ``LEFT``: revoked while leaving the group
    (``Leave``), counted apart from rebalance revocations."""

    REVOKED = "revoked"
    LEFT = "left"
    LOST = "lost"
    CRASHED = "crashed"
    CLOSED = "closed"


@dataclass(frozen=True, slots=True, kw_only=True)
class Holding:
    """``conn`` (process ``name``) owns the partition since ``since_ms``, starting to consume at
    ``start_offset``, under ``generation``."""

    conn: str
    name: str
    since_ms: int
    generation: int
    start_offset: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Release:
    conn: str
    name: str
    kind: ReleaseKind
    time_ms: int
    #: The offset the releasing process committed right before (``None``: no accepted commit).
    committed: int | None


class OwnershipLedger:
    """Partition → current holders, with the history the invariants and figures need."""

    def __init__(self) -> None:
        self.holders: dict[TopicPartition, dict[str, Holding]] = {}
        self.by_conn: dict[str, set[TopicPartition]] = {}
        self.last_release: dict[TopicPartition, Release] = {}
        self.last_owner_name: dict[TopicPartition, str] = {}
        self.existing: set[TopicPartition] = set()
        #: Partitions held by more than one process right now.
        self.contested: set[TopicPartition] = set()
        self._orphan_since: dict[TopicPartition, int] = {}
        self.orphan_ms = 0
        self.measuring = False
        self.revoked = 0
        self.assigned = 0
        self.lost = 0
        self.moved = 0
        #: Partitions a process revoked and then got back (revoked without moving).
        self.returned = 0
        #: The longest single stretch (ms) one partition had no owner, once measuring.
        self.longest_orphan_ms = 0
        #: Changelog records owners replayed on acquiring a partition: the whole prefix up to
        #: the start offset for a process that never owned it, the gap since it last released
        #: it otherwise (its local state).
        self.restore_records = 0
        #: Moves (the owning process changed) to a process that had local state for the
        #: partition: it owned the partition before, so it restores only the gap.
        self.warm_handovers = 0
        #: (partition, process name) → the offset its local state reached when it released.
        self._state_offset: dict[tuple[TopicPartition, str], int] = {}

    # -- topology -------------------------------------------------------------------------

    def set_partitions(self, partitions: frozenset[TopicPartition], now_ms: int) -> None:
        """The partitions that exist (metadata changes only add)."""
        for tp in sorted(partitions - self.existing):
            self.existing.add(tp)
            if not self.holders.get(tp):
                self._orphan_since[tp] = now_ms

    def start_measuring(self, now_ms: int) -> None:
        """Count orphan time from now on (the group has formed)."""
        if not self.measuring:
            self.measuring = True
            for tp in self._orphan_since:
                self._orphan_since[tp] = now_ms

    # -- changes --------------------------------------------------------------------------

    def acquire(
        self,
        conn: str,
        *,
        name: str,
        partitions: tuple[TopicPartition, ...],
        now_ms: int,
        generation: int,
        start_offsets: dict[TopicPartition, int],
    ) -> None:
        mine = self.by_conn.setdefault(conn, set())
        for tp in partitions:
            holders = self.holders.setdefault(tp, {})
            if conn in holders:
                continue
            if not holders:
                self._close_orphan(tp, now_ms)
            holders[conn] = Holding(
                conn=conn,
                name=name,
                since_ms=now_ms,
                generation=generation,
                start_offset=start_offsets.get(tp, 0),
            )
            mine.add(tp)
            if len(holders) > 1:
                self.contested.add(tp)
            self.assigned += 1
            previous = self.last_owner_name.get(tp)
            if previous is not None and previous != name:
                self.moved += 1
            start = start_offsets.get(tp, 0)
            local = self._state_offset.get((tp, name))
            self.restore_records += start if local is None else max(start - local, 0)
            if local is not None and previous is not None and previous != name:
                self.warm_handovers += 1
            release = self.last_release.get(tp)
            if release is not None and release.kind is ReleaseKind.REVOKED and release.name == name:
                self.returned += 1
            self.last_owner_name[tp] = name

    def release(
        self,
        conn: str,
        partitions: tuple[TopicPartition, ...],
        now_ms: int,
        kind: ReleaseKind,
        *,
        committed: dict[TopicPartition, int] | None = None,
    ) -> tuple[TopicPartition, ...]:
        """Drop ``conn``'s hold on ``partitions``; returns those it actually held."""
        mine = self.by_conn.get(conn, set())
        dropped = []
        for tp in partitions:
            holders = self.holders.get(tp, {})
            holding = holders.pop(conn, None)
            if holding is None:
                continue
            mine.discard(tp)
            dropped.append(tp)
            if len(holders) < 2:
                self.contested.discard(tp)
            self.last_release[tp] = Release(
                conn=conn,
                name=holding.name,
                kind=kind,
                time_ms=now_ms,
                committed=(committed or {}).get(tp),
            )
            done = (committed or {}).get(tp)
            self._state_offset[(tp, holding.name)] = done if done is not None else holding.start_offset
            if kind is ReleaseKind.REVOKED:
                self.revoked += 1
            elif kind is ReleaseKind.LOST:
                self.lost += 1
            if not holders and tp in self.existing:
                self._orphan_since[tp] = now_ms
        return tuple(dropped)

    def set_generation(self, conn: str, generation: int) -> None:
        """``conn`` now holds everything it holds under ``generation`` (a completed SyncGroup
        confirmed the partitions it kept)."""
        for tp in self.by_conn.get(conn, set()):
            holding = self.holders[tp][conn]
            if holding.generation != generation:
                self.holders[tp][conn] = replace(holding, generation=generation)

    def release_all(self, conn: str, now_ms: int, kind: ReleaseKind) -> tuple[TopicPartition, ...]:
        return self.release(conn, tuple(sorted(self.by_conn.get(conn, set()))), now_ms, kind)

    # -- reading --------------------------------------------------------------------------

    def owned_by(self, conn: str) -> frozenset[TopicPartition]:
        return frozenset(self.by_conn.get(conn, set()))

    def holding(self, conn: str, tp: TopicPartition) -> Holding | None:
        return self.holders.get(tp, {}).get(conn)

    def owners(self, tp: TopicPartition) -> tuple[Holding, ...]:
        return tuple(self.holders.get(tp, {}).values())

    def all_owned(self) -> bool:
        """Every existing partition has an owner (those without one are the open orphan
        stretches: O(1), not a pass over every partition)."""
        return not self._orphan_since

    def orphan_total_ms(self, now_ms: int) -> int:
        """Partition-milliseconds without an owner, since measuring started."""
        if not self.measuring:
            return 0
        return self.orphan_ms + sum(now_ms - since for since in self._orphan_since.values())

    def longest_orphan_stretch_ms(self, now_ms: int) -> int:
        """The longest single stretch one partition had no owner (open ones end at ``now_ms``),
        since measuring started."""
        if not self.measuring:
            return 0
        open_now = max((now_ms - since for since in self._orphan_since.values()), default=0)
        return max(self.longest_orphan_ms, open_now)

    def _close_orphan(self, tp: TopicPartition, now_ms: int) -> None:
        since = self._orphan_since.pop(tp, None)
        if since is not None and self.measuring:
            self.orphan_ms += now_ms - since
            self.longest_orphan_ms = max(self.longest_orphan_ms, now_ms - since)
