"""What a drill run reports (:mod:`streamtasks.drills.rolling`, :mod:`streamtasks.drills.faults`):
its options, per-phase figures and the verdict with everything a report draws."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from streamtasks.drills.ledger import FaultMark

__all__ = ["DrillOptions", "DrillResult", "PhaseResult"]


@dataclass(frozen=True, slots=True, kw_only=True)
class DrillOptions:
    workers: int = 3
    partitions: int = 6
    rate: int = 200
    keys: int = 300
    settle_timeout_s: float = 120.0
    drain_timeout_s: float = 90.0
    #: A peer library's consumer in the group too (``kafka-python`` or ``confluent``; consumer
    #: drills whose stages have ``peer_args``), worker ``p1``, bounced after the others.
    peer: str | None = None
    #: Run the group on ``streamtasks coordinator`` (started in front of the cluster, the
    #: workers bootstrapped to it) instead of the cluster's own group coordinator.
    coordinator: bool = False


@dataclass(slots=True, kw_only=True)
class PhaseResult:
    name: str
    seconds: float = 0.0
    rebalances: int = 0
    revoked: int = 0
    longest_unowned_ms: int = 0
    double_owned: int = 0
    restores: int = 0


@dataclass(slots=True, kw_only=True)
class DrillResult:
    drill: str
    broker: str
    workers: int
    partitions: int
    rate: int
    #: The peer library in the group (DrillOptions.peer), if any.
    peer_client: str | None = None
    #: The address of the ``streamtasks coordinator`` the group ran on (DrillOptions.coordinator).
    coordinator: str | None = None
    phases: list[PhaseResult] = field(default_factory=list)
    double_owned: int = 0
    violations: list[str] = field(default_factory=list)
    #: (partition, seconds) of each double ownership, for the timeline
    violation_marks: list[tuple[int, float]] = field(default_factory=list)
    acknowledged: int = 0
    #: Acknowledged input offsets never processed, that no peer library committed past first.
    lost: int = 0
    lost_runs: list[str] = field(default_factory=list)
    #: Never processed, and first committed past by a peer library's worker (faust): its loss.
    peer_lost: int = 0
    peer_lost_runs: list[str] = field(default_factory=list)
    #: The peer commits that passed them (``CommitMark.describe``).
    peer_commits: list[str] = field(default_factory=list)
    duplicates: int = 0
    longest_unowned_ms: dict[int, int] = field(default_factory=dict)
    rebalances: int = 0
    revoked: int = 0
    restores: int = 0
    state_checked: bool = False
    #: Whether the latest-value store was checked too (App drills; faust's table has counts only).
    latest_checked: bool = False
    state_wrong_latest: int = 0
    state_counts_short: int = 0
    problems: list[str] = field(default_factory=list)
    #: (partition, worker, start s, end s) since the drill started; end None: still owned.
    ownership: list[tuple[int, str, float, float | None]] = field(default_factory=list)
    #: (seconds, acknowledged so far, processed so far)
    samples: list[tuple[float, int, int]] = field(default_factory=list)
    #: (seconds, label): bounces and group generations seen
    markers: list[tuple[float, str]] = field(default_factory=list)
    #: Broker drills (:mod:`streamtasks.drills.faults`): each fault, its resume time, and the
    #: library of the group's members (``streamtasks``, or a peer's reference group).
    faults: list[FaultMark] = field(default_factory=list)
    resume: str = ""
    members_client: str = "streamtasks"
    #: (seconds, worker, generation or epoch, partitions): a member whose session lapsed took
    #: that assignment back when the coordinator vouched for it (no rebalance; ``taken_back``).
    taken_back: list[tuple[float, str, int, int]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        state_ok = not self.state_checked or (self.state_wrong_latest == 0 and self.state_counts_short == 0)
        return self.double_owned == 0 and self.lost == 0 and not self.problems and state_ok

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["ok"] = self.ok
        out["longest_unowned_ms"] = {str(p): v for p, v in self.longest_unowned_ms.items()}
        return out
