"""The invariants the simulator checks after every event, and the convergence test.

* ``exclusive-ownership`` — no partition is owned (per the ledger) by two processes that are
  both *current*: alive, in the coordinator's group under their member id, and at the
  coordinator's generation (the member's generation: from its last JoinGroup response). A
  fenced zombie may still think it owns a partition (that is what generation-checked commits
  are for); two members of the live generation may not, not even between their JoinGroup and
  SyncGroup responses.
* ``eager-revoke-before-join`` — an EAGER member sends JoinGroup owning nothing, so no
  partition is owned while a rebalance hands it over.
* ``generation-monotonic`` — the coordinator's generation never decreases except when a new
  coordinator reloads the last persisted one; a process's generation only increases between
  resets (fencing drops it to -1).
* ``commit-before-handover`` — a partition revoked cleanly, whose offsets were committed, is
  picked up by its next owner at (at least) that committed offset.
* ``commit-fencing`` — an offset the coordinator accepts comes from a process that owns the
  partition and no other current process owns it; accepted offsets never go backwards.
* ``ledger-matches-member`` — what the listener calls told the application equals what the
  member machine says it owns.
* ``convergence`` — checked once faults and changes stop: see :func:`convergence_gaps`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from streamtasks.membership.classic import MemberState
from streamtasks.sim.coordinator import AcceptedCommit, ClassicGroupCoordinator
from streamtasks.sim.group_model import GroupState
from streamtasks.sim.ledger import Holding, OwnershipLedger, ReleaseKind
from streamtasks.sim.process import SimProcess
from streamtasks.sim.trace import Violation
from topology.ids import TopicPartition

__all__ = ["Invariants", "convergence_gaps", "has_converged", "is_current"]


def is_current(proc: SimProcess, coordinator: ClassicGroupCoordinator) -> bool:
    """Alive, in the group under its member id, at the group's generation."""
    return (
        proc.alive
        and proc.member.generation == coordinator.generation
        and proc.member.member_id in coordinator.group.members
    )


class Invariants:
    """Stateful checks; each method returns the violations it found (usually none)."""

    def __init__(self) -> None:
        self.last_offset: dict[TopicPartition, int] = {}
        self.coordinator_generation = 0
        self.handover_without_commit = 0

    def exclusive_ownership(
        self, now_ms: int, ledger: OwnershipLedger, current: Callable[[Holding], bool]
    ) -> list[Violation]:
        out = []
        for tp in sorted(ledger.contested):
            holders = ledger.holders[tp]
            live = sorted(conn for conn, holding in holders.items() if current(holding))
            if len(live) > 1:
                detail = ", ".join(
                    f"{c} (gen {holders[c].generation}, since {holders[c].since_ms})" for c in live
                )
                out.append(
                    Violation(
                        invariant="exclusive-ownership", time_ms=now_ms, detail=f"{tp} owned by {detail}"
                    )
                )
        return out

    def eager_join(self, now_ms: int, proc: SimProcess, ledger: OwnershipLedger) -> list[Violation]:
        owned = ledger.owned_by(proc.conn)
        if not owned:
            return []
        return [
            Violation(
                invariant="eager-revoke-before-join",
                time_ms=now_ms,
                detail=f"{proc.conn} sent JoinGroup still owning {sorted(owned)}",
            )
        ]

    def coordinator_generation_seen(self, now_ms: int, generation: int, *, reloaded: bool) -> list[Violation]:
        previous = self.coordinator_generation
        self.coordinator_generation = generation
        if generation < previous and not reloaded:
            return [
                Violation(
                    invariant="generation-monotonic",
                    time_ms=now_ms,
                    detail=f"coordinator generation went from {previous} to {generation}",
                )
            ]
        return []

    def process_generation_seen(self, now_ms: int, proc: SimProcess) -> list[Violation]:
        generation = proc.member.generation
        previous = proc.last_generation
        if generation == previous:
            return []
        proc.last_generation = generation
        if generation >= 0 and previous >= 0 and generation < previous:
            return [
                Violation(
                    invariant="generation-monotonic",
                    time_ms=now_ms,
                    detail=f"{proc.conn} went from generation {previous} to {generation} without a reset",
                )
            ]
        return []

    def handover(
        self,
        now_ms: int,
        conn: str,
        ledger: OwnershipLedger,
        partitions: Iterable[TopicPartition],
        start_offsets: Mapping[TopicPartition, int],
    ) -> list[Violation]:
        out = []
        for tp in partitions:
            release = ledger.last_release.get(tp)
            if release is None or release.kind not in (ReleaseKind.REVOKED, ReleaseKind.LEFT):
                continue
            if release.committed is None:
                self.handover_without_commit += 1
                continue
            start = start_offsets.get(tp, 0)
            if start < release.committed:
                out.append(
                    Violation(
                        invariant="commit-before-handover",
                        time_ms=now_ms,
                        detail=(
                            f"{conn} took {tp} at offset {start} but {release.conn} revoked it "
                            f"at {release.time_ms} ms after committing {release.committed}"
                        ),
                    )
                )
        return out

    def accepted_commit(
        self,
        commit: AcceptedCommit,
        ledger: OwnershipLedger,
        procs: Mapping[str, SimProcess],
        current: Callable[[Holding], bool],
        *,
        duplicate: bool = False,
    ) -> list[Violation]:
        """``duplicate``: a second copy of a request the network duplicated; only the offset
        order is checked for it (the first copy was judged when it arrived)."""
        out = []
        tp = commit.partition
        proc = procs.get(commit.conn)
        others = [h.conn for h in ledger.owners(tp) if h.conn != commit.conn and current(h)]
        if duplicate:
            others = []
        elif proc is not None and proc.alive and ledger.holding(commit.conn, tp) is None:
            out.append(
                Violation(
                    invariant="commit-fencing",
                    time_ms=commit.time_ms,
                    detail=f"accepted a commit of {tp} from {commit.conn}, which does not own it",
                )
            )
        if others:
            out.append(
                Violation(
                    invariant="commit-fencing",
                    time_ms=commit.time_ms,
                    detail=f"accepted a commit of {tp} from {commit.conn} while {', '.join(others)} own it",
                )
            )
        previous = self.last_offset.get(tp)
        if previous is not None and commit.offset < previous:
            out.append(
                Violation(
                    invariant="commit-fencing",
                    time_ms=commit.time_ms,
                    detail=(
                        f"committed offset of {tp} went back from {previous} to {commit.offset} "
                        f"({commit.conn})"
                    ),
                )
            )
        self.last_offset[tp] = max(commit.offset, previous or 0)
        return out

    @staticmethod
    def ledger_matches(
        now_ms: int,
        proc: SimProcess,
        ledger: OwnershipLedger,
        believed: frozenset[TopicPartition] | None = None,
    ) -> list[Violation]:
        """``believed``: what the member owns of the partitions the ledger follows (default:
        everything it owns)."""
        if not proc.alive:
            return []
        if believed is None:
            believed = proc.member.owned_partitions
        told = ledger.owned_by(proc.conn)
        if believed == told:
            return []
        return [
            Violation(
                invariant="ledger-matches-member",
                time_ms=now_ms,
                detail=(
                    f"{proc.conn}: member owns {sorted(believed - told)} without an assigned call, "
                    f"listener kept {sorted(told - believed)} the member dropped"
                ),
            )
        ]


def convergence_gaps(
    coordinator: ClassicGroupCoordinator,
    procs: Iterable[SimProcess],
    ledger: OwnershipLedger,
    subscribed: frozenset[TopicPartition],
    exempt: frozenset[TopicPartition] = frozenset(),
) -> list[str]:
    """Why the group has not converged yet (empty: it has). Converged means: the coordinator
    is available and Stable; its members are exactly the live processes, each Stable at the
    group's generation; every existing partition (but ``exempt`` ones) is owned by exactly one
    live process."""
    gaps: list[str] = []
    if not coordinator.available:
        return ["coordinator unavailable"]
    live = [p for p in procs if p.alive]
    if live and coordinator.state is not GroupState.STABLE:
        gaps.append(f"group is {coordinator.state.value}")
    ids = {p.member.member_id for p in live}
    if ids != set(coordinator.group.members):
        gaps.append(f"group members {sorted(coordinator.group.members)} vs live {sorted(ids)}")
    for p in live:
        if p.member.state is not MemberState.STABLE or p.member.generation != coordinator.generation:
            gaps.append(f"{p.conn} is {p.member.state.value} at generation {p.member.generation}")
        elif p.member.rejoin_needed:
            gaps.append(f"{p.conn} is about to rejoin")
    if live:
        for tp in sorted(subscribed - exempt):
            owners = [h.conn for h in ledger.owners(tp)]
            if len(owners) != 1:
                gaps.append(f"{tp} owned by {owners}")
                break
    return gaps


def has_converged(
    coordinator: ClassicGroupCoordinator,
    procs: Iterable[SimProcess],
    ledger: OwnershipLedger,
    subscribed: frozenset[TopicPartition],
    exempt: frozenset[TopicPartition] = frozenset(),
) -> bool:
    """``not convergence_gaps(...)``, answered at the first gap, the cheapest tests first. The
    world asks after every event once the steps are over; :func:`convergence_gaps` lists every
    gap (it sorted every partition each time: partitions x events at a large group's end)."""
    if not coordinator.available:
        return False
    live = [p for p in procs if p.alive]
    if not live:
        return not coordinator.group.members
    if coordinator.state is not GroupState.STABLE:
        return False
    if {p.member.member_id for p in live} != set(coordinator.group.members):
        return False
    generation = coordinator.generation
    for p in live:
        member = p.member
        if member.state is not MemberState.STABLE or member.generation != generation or member.rejoin_needed:
            return False
    holders = ledger.holders
    return all(len(holders.get(tp, ())) == 1 for tp in subscribed - exempt)
