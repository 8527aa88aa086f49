"""Audits for live drills, fed from every member's rebalance callbacks and consumed records.

:class:`OwnershipAudit` keeps who owns each partition over (injected) time and records a
:class:`DoubleOwnership` whenever a partition is handed to a member while another still holds
it. The times are each member's own (when it was assigned or let go), while the calls come in
the order a harness read them from several processes: a holder's release that arrives after
another member's claim but happened before it withdraws that violation (an eager member
revokes everything before its JoinGroup, so before anyone is given its partitions in the next
generation, yet a loaded harness may read its revocation last). It also measures how long
partitions went without an owner. :class:`RecordAudit` compares produced and consumed record
ids: duplicates are allowed (at-least-once), losses are not.
:func:`first_commits_past` tells, for each lost record, which member's offset commit first
moved its partition past it (the member that skipped it: every later owner resumed after it).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from topology.ids import TopicPartition

__all__ = [
    "CommitMark",
    "DoubleOwnership",
    "FaultMark",
    "LedgerReport",
    "OwnershipAudit",
    "RecordAudit",
    "first_commits_past",
    "offset_id",
    "offset_runs",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class DoubleOwnership:
    partition: TopicPartition
    holder: str
    claimant: str
    at_ms: int


@dataclass(frozen=True, slots=True, kw_only=True)
class LedgerReport:
    assignments: int
    revocations: int
    losses: int
    longest_unowned_ms: int
    unowned_partition_ms: int
    violations: tuple[DoubleOwnership, ...]


class OwnershipAudit:
    """Who owns which partition, and since when. Every call takes the caller's ``now_ms``."""

    def __init__(self, partitions: Iterable[TopicPartition], start_ms: int) -> None:
        self._owner: dict[TopicPartition, str | None] = dict.fromkeys(sorted(partitions))
        self._unowned_since: dict[TopicPartition, int | None] = dict.fromkeys(self._owner, start_ms)
        self._longest = 0
        self._total = 0
        self._assignments = 0
        self._revocations = 0
        self._losses = 0
        self._violations: list[DoubleOwnership] = []
        self._gaps: list[tuple[int, int]] = []

    def _release(self, member: str, partitions: Iterable[TopicPartition], now_ms: int) -> int:
        released = 0
        for tp in partitions:
            if self._owner.get(tp) == member:
                self._owner[tp] = None
                self._unowned_since[tp] = now_ms
                released += 1
            elif self._withdraw(tp, member, now_ms):
                released += 1
        return released

    def _withdraw(self, tp: TopicPartition, member: str, now_ms: int) -> bool:
        """``member`` let ``tp`` go at ``now_ms``, reported after another member claimed it: if
        that was before the claim, the violation recorded then was none (the gap between
        the two counts as unowned time)."""
        for i, v in enumerate(self._violations):
            if v.partition == tp and v.holder == member and now_ms < v.at_ms:
                del self._violations[i]
                self._count_gap(now_ms, v.at_ms)
                return True
        return False

    def _count_gap(self, since: int, until: int) -> None:
        gap = until - since
        self._longest = max(self._longest, gap)
        self._total += gap
        self._gaps.append((since, until))

    def assigned(self, member: str, partitions: Iterable[TopicPartition], now_ms: int) -> None:
        for tp in partitions:
            holder = self._owner.get(tp)
            if holder is not None and holder != member:
                self._violations.append(
                    DoubleOwnership(partition=tp, holder=holder, claimant=member, at_ms=now_ms)
                )
            since = self._unowned_since.get(tp)
            if since is not None:
                self._count_gap(since, now_ms)
            self._owner[tp] = member
            self._unowned_since[tp] = None
            self._assignments += 1

    def revoked(self, member: str, partitions: Iterable[TopicPartition], now_ms: int) -> None:
        self._revocations += self._release(member, partitions, now_ms)

    def lost(self, member: str, partitions: Iterable[TopicPartition], now_ms: int) -> None:
        self._losses += self._release(member, partitions, now_ms)

    def member_gone(self, member: str, now_ms: int) -> None:
        """A member process died: whatever it held is released now (it can no longer process)."""
        self._release(member, [tp for tp, m in self._owner.items() if m == member], now_ms)

    def longest_unowned_between(self, start_ms: int, end_ms: int) -> int:
        """The longest stretch without an owner among those that ended in ``[start_ms, end_ms]``
        or are still open at ``end_ms`` (a partition nobody owns yet counts from its release)."""
        closed = [end - begin for begin, end in self._gaps if start_ms <= end <= end_ms]
        open_now = [end_ms - s for s in self._unowned_since.values() if s is not None]
        return max([0, *closed, *open_now])

    def owners(self) -> dict[TopicPartition, str | None]:
        return dict(self._owner)

    def report(self, now_ms: int) -> LedgerReport:
        open_gaps = [now_ms - s for s in self._unowned_since.values() if s is not None]
        return LedgerReport(
            assignments=self._assignments,
            revocations=self._revocations,
            losses=self._losses,
            longest_unowned_ms=max([self._longest, *open_gaps]),
            unowned_partition_ms=self._total + sum(open_gaps),
            violations=tuple(self._violations),
        )


class RecordAudit:
    """Produced versus consumed record ids: duplicates are counted, losses are listed."""

    def __init__(self) -> None:
        self._produced: set[str] = set()
        self._consumed: Counter[str] = Counter()

    def produced(self, record_id: str) -> None:
        self._produced.add(record_id)

    def consumed(self, record_id: str) -> None:
        self._consumed[record_id] += 1

    @property
    def produced_count(self) -> int:
        return len(self._produced)

    @property
    def consumed_count(self) -> int:
        return sum(self._consumed.values())

    def duplicates(self) -> int:
        return sum(n - 1 for n in self._consumed.values() if n > 1)

    def lost(self) -> list[str]:
        return sorted(self._produced - set(self._consumed))

    def unexpected(self) -> list[str]:
        return sorted(set(self._consumed) - self._produced)


def offset_id(partition: int, offset: int) -> str:
    """A record's id in a per-offset audit: ``"<partition>:<offset>"`` as the broker acknowledged it."""
    return f"{partition}:{offset}"


def offset_runs(ids: Iterable[str]) -> list[str]:
    """Offset ids grouped into contiguous runs per partition: ``["3:[120..229]", "5:[7]"]``."""
    by_partition: dict[int, list[int]] = {}
    for rid in ids:
        part, offset = rid.split(":")
        by_partition.setdefault(int(part), []).append(int(offset))
    runs: list[str] = []
    for partition, offsets in sorted(by_partition.items()):
        offsets.sort()
        start = prev = offsets[0]
        for off in [*offsets[1:], None]:
            if off is not None and off == prev + 1:
                prev = off
                continue
            runs.append(f"{partition}:[{start}]" if start == prev else f"{partition}:[{start}..{prev}]")
            if off is not None:
                start = prev = off
    return runs


@dataclass(frozen=True, slots=True, kw_only=True)
class CommitMark:
    """One member's offset commit of one partition: ``offset`` is the next offset to read."""

    at_ms: int
    worker: str
    #: The library that committed (``"streamtasks"``, ``"faust"``, ...).
    by: str
    partition: int
    offset: int

    def describe(self, t0_ms: int) -> str:
        return (
            f"{self.worker} ({self.by}) committed offset {self.offset} of partition "
            f"{self.partition} at {(self.at_ms - t0_ms) / 1000:.3f}s"
        )


@dataclass(slots=True, kw_only=True)
class FaultMark:
    """One fault a broker drill caused (:mod:`streamtasks.drills.faults`): what, on which node,
    when (seconds since the drill started), how long until every partition processed a record
    acknowledged after it (None: not yet, or never), and how long until the cluster had
    acknowledged such a record on every partition (its own failover: no group can resume
    before; the difference is the members' share)."""

    label: str
    node: int
    at_s: float
    resumed_ms: int | None = None
    acked_ms: int | None = None


def first_commits_past(lost: Iterable[str], commits: Sequence[CommitMark]) -> dict[str, CommitMark | None]:
    """For each lost record id (``"<partition>:<offset>"``), the earliest commit (by time) of
    its partition at an offset past it; None when no commit passed it. A record is skipped
    by whoever first commits past it unprocessed: later owners start after that commit."""
    by_partition: dict[int, list[CommitMark]] = {}
    for mark in sorted(commits, key=lambda c: c.at_ms):
        by_partition.setdefault(mark.partition, []).append(mark)
    out: dict[str, CommitMark | None] = {}
    for rid in lost:
        part, offset = (int(x) for x in rid.split(":"))
        out[rid] = next((c for c in by_partition.get(part, ()) if c.offset > offset), None)
    return out
