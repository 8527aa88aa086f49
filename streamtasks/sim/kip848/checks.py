"""The KIP-848 simulator's invariants, checked after every event (and every coordinator write):

* ``exclusive-ownership``: no partition is owned, per the listener calls, by two live
  processes that are both members of the coordinator's group;
* ``epoch-monotonic``: the group epoch and the assignment epoch never go back (fail-overs
  included), and a member's epoch never goes back between two joins at epoch 0;
* ``valid-assignment``: every installed client-side assignment is valid for the epoch it was
  prepared at (checked here independently of the coordinator), an assignment a member computed
  is never refused as invalid, and every server-side target gives each partition to one member;
* ``failover``: a coordinator that loads the log has exactly the state of the one it replaces,
  and resuming changes no member's current assignment;
* ``ledger-matches-member``: the listener calls gave each application what its member owns;
* ``convergence`` (world): once faults stop, the group reaches its target within the bound.
"""

from __future__ import annotations

from typing import Any, Protocol

from streamtasks.coordinator import (
    GroupCoordinator,
    PreparedAssignmentRecord,
    Result,
    TargetAssignmentMetadataRecord,
)
from streamtasks.protocol.assignment_rpc import (
    ConsumerGroupInstallAssignmentRequest,
    ConsumerGroupInstallAssignmentResponse,
)
from streamtasks.protocol.errors import KafkaErrorCode
from streamtasks.sim.kip848.process import WorldProcess
from streamtasks.sim.ledger import OwnershipLedger
from streamtasks.sim.trace import Violation
from topology.ids import TopicPartition

__all__ = ["CheckedGroup", "CheckedMembers", "Checks", "install_problems"]


class CheckedMembers(Protocol):
    """What the checks read of the world's processes (its
    :class:`~streamtasks.sim.host.MemberHost`), and where they report."""

    @property
    def procs(self) -> dict[str, WorldProcess]: ...

    @property
    def ledger(self) -> OwnershipLedger: ...

    @property
    def now(self) -> int: ...

    def existing(self) -> frozenset[TopicPartition]: ...

    def live(self) -> list[WorldProcess]: ...

    def anyone_alive(self) -> bool: ...

    def collect(self, found: list[Violation]) -> None: ...


class CheckedGroup(Protocol):
    """What the checks read of the coordinator's side: the group, and the ghosts of late joins."""

    @property
    def ghosts(self) -> set[str]: ...

    def group(self) -> Any: ...


def install_problems(
    request: ConsumerGroupInstallAssignmentRequest, prepared: PreparedAssignmentRecord
) -> list[str]:
    """Why ``request`` is not a valid assignment of what ``prepared`` showed (empty: valid)."""
    problems = []
    specs = {m.member_id: m for m in prepared.members}
    counts = {t.topic_id: t.num_partitions for t in prepared.topics}
    ids = [m.member_id for m in request.members]
    if sorted(ids) != sorted(specs):
        problems.append(f"members {sorted(ids)} != prepared {sorted(specs)}")
    owner: dict[tuple[Any, int], str] = {}
    for m in request.members:
        spec = specs.get(m.member_id)
        if spec is None:
            continue
        if not spec.minimum_version <= m.metadata_version <= spec.maximum_version:
            problems.append(f"{m.member_id}: metadata version {m.metadata_version} out of range")
        for item in m.topic_partitions:
            if item.topic_id not in spec.subscribed_topic_ids:
                problems.append(f"{m.member_id} got a topic it does not subscribe to")
            for p in item.partitions:
                key = (item.topic_id, p)
                if key in owner:
                    problems.append(f"partition {p} of {str(item.topic_id)[:8]} given twice")
                if not 0 <= p < counts.get(item.topic_id, 0):
                    problems.append(f"partition {p} of {str(item.topic_id)[:8]} does not exist")
                owner[key] = m.member_id
    subscribed = {t for s in prepared.members for t in s.subscribed_topic_ids}
    missing = [(t, p) for t in subscribed for p in range(counts.get(t, 0)) if (t, p) not in owner]
    if missing:
        problems.append(f"{len(missing)} partition(s) unassigned")
    return problems


class Checks:
    """The invariants of one world (module docstring)."""

    def __init__(self, world: CheckedMembers, side: CheckedGroup) -> None:
        self.world = world
        self.side = side
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.targets = 0

    def _violate(self, invariant: str, detail: str) -> None:
        self.world.collect([Violation(invariant=invariant, time_ms=self.world.now, detail=detail)])

    # -- after every event ---------------------------------------------------------------------

    def after_event(self) -> None:
        w = self.world
        group = self.side.group()
        for tp in sorted(w.ledger.contested):
            holders = [h for h in w.ledger.owners(tp) if self._current(h.conn, group)]
            if len(holders) > 1:
                shown = ", ".join(f"{h.conn} (epoch {h.generation}, since {h.since_ms})" for h in holders)
                self._violate("exclusive-ownership", f"{tp} owned by {shown}")

    def _current(self, conn: str, group: Any) -> bool:
        proc = self.world.procs.get(conn)
        return (
            proc is not None
            and proc.alive
            and group is not None
            and group.member(proc.member_id) is not None
            and proc.member_id not in self.side.ghosts
        )

    def after_actions(self, proc: WorldProcess) -> None:
        epoch = proc.epoch
        if epoch == 0:
            proc.max_epoch = 0
        elif epoch < proc.max_epoch:
            self._violate("epoch-monotonic", f"{proc.conn}: member epoch {proc.max_epoch} -> {epoch}")
        else:
            proc.max_epoch = epoch
        if proc.alive:
            held = self.world.ledger.owned_by(proc.conn)
            owned = proc.owned
            if held != owned:
                self._violate(
                    "ledger-matches-member",
                    f"{proc.conn}: listener calls gave {sorted(map(str, held))}, "
                    f"member owns {sorted(map(str, owned))}",
                )

    # -- after every coordinator write ---------------------------------------------------------

    def after_write(self, result: Result[Any]) -> None:
        group = self.side.group()
        if group is None:
            return
        if group.group_epoch < self.group_epoch or group.assignment_epoch < self.assignment_epoch:
            self._violate(
                "epoch-monotonic",
                f"group epoch {self.group_epoch} -> {group.group_epoch}, "
                f"assignment epoch {self.assignment_epoch} -> {group.assignment_epoch}",
            )
        self.group_epoch, self.assignment_epoch = group.group_epoch, group.assignment_epoch
        if any(isinstance(r, TargetAssignmentMetadataRecord) for r in result.records):
            self.targets += 1
            if group.prepared is None and group.client_request is None:
                self._server_target(group)

    def _server_target(self, group: Any) -> None:
        """A server-side target: every subscribed partition to exactly one subscribing member."""
        owner: dict[tuple[Any, int], str] = {}
        for member_id, target in group.targets.items():
            member = group.member(member_id)
            if member is None:
                self._violate("valid-assignment", f"target for {member_id}, not a member")
                continue
            for pair in target.partitions.pairs():
                if pair in owner:
                    self._violate("valid-assignment", f"{pair} targeted to {owner[pair]} and {member_id}")
                owner[pair] = member_id
        subscribed = {n for m in group.members.values() for n in m.subscribed_topic_names}
        for topic in group.partition_metadata:
            if topic.name not in subscribed:
                continue
            for p in range(topic.num_partitions):
                if (topic.topic_id, p) not in owner:
                    self._violate(
                        "valid-assignment", f"{topic.name}-{p} in no target at epoch {group.assignment_epoch}"
                    )
                    return

    def installed(
        self,
        request: ConsumerGroupInstallAssignmentRequest,
        prepared: PreparedAssignmentRecord | None,
        response: ConsumerGroupInstallAssignmentResponse,
    ) -> None:
        message = response.error_message or ""
        if response.error is KafkaErrorCode.NONE:
            if prepared is None:
                self._violate("valid-assignment", "an assignment was installed without a PrepareAssignment")
                return
            problems = install_problems(request, prepared)
            if problems:
                self._violate(
                    "valid-assignment", f"installed for epoch {prepared.group_epoch}: {problems[:3]}"
                )
        elif message.startswith("INVALID_ASSIGNMENT:") and "no PrepareAssignment" not in message:
            self._violate(
                "valid-assignment", f"a member computed an assignment the coordinator refused: {message}"
            )

    def failover_loaded(self, old: GroupCoordinator, fresh: GroupCoordinator) -> None:
        """The loaded coordinator has exactly the state of the one it replaces."""
        if fresh.snapshot() != old.snapshot():
            self._violate("failover", "the coordinator loaded from the log differs from the one it replaces")

    def failover_resumed(self, before: dict[str, Any]) -> None:
        """Resuming (metadata re-check, owed assignments) changed no member's current assignment."""
        group = self.side.group()
        after = {} if group is None else dict(group.current_assignments)
        if after != before:
            changed = sorted(m for m in set(before) | set(after) if before.get(m) != after.get(m))
            self._violate("failover", f"resuming after the fail-over changed the assignment of {changed}")

    # -- convergence -----------------------------------------------------------------------------

    def converged(self) -> bool:
        """``not convergence_gaps()``, answered at the first gap, the cheapest tests first (the
        world asks after every event once the steps are over: the gaps' list sorted every
        partition each time, partitions x events at a large group's end)."""
        w = self.world
        group = self.side.group()
        if w.anyone_alive() and (group is None or group.state.value != "Stable"):
            return False
        live = w.live()
        ids = {p.member_id for p in live}
        if ids != (set() if group is None else set(group.members)):
            return False
        if group is not None and ids:
            names = {t.topic_id: t.name for t in group.partition_metadata}
            for p in live:
                current, target = group.current(p.member_id), group.target(p.member_id)
                if (
                    not p.settled
                    or current is None
                    or p.epoch != group.group_epoch
                    or current.member_epoch != group.group_epoch
                    or p.owned != _partitions(target, names)
                ):
                    return False
        if not live:
            return True
        procs = w.procs
        return all(sum(1 for h in w.ledger.owners(tp) if procs[h.conn].alive) == 1 for tp in w.existing())

    def convergence_gaps(self) -> list[str]:
        w = self.world
        gaps: list[str] = []
        live = w.live()
        group = self.side.group()
        ids = {p.member_id for p in live}
        members = set() if group is None else set(group.members)
        if members != ids:
            gaps.append(f"group members {sorted(members)} != live {sorted(ids)}")
            return gaps
        if group is not None and ids:
            if group.state.value != "Stable":
                gaps.append(
                    f"group {group.state.value} at epoch {group.group_epoch}/{group.assignment_epoch}"
                )
            names = {t.topic_id: t.name for t in group.partition_metadata}
            for p in live:
                current, target = group.current(p.member_id), group.target(p.member_id)
                wanted = _partitions(target, names)
                if (
                    not p.settled
                    or current is None
                    or p.epoch != group.group_epoch
                    or current.member_epoch != group.group_epoch
                    or p.owned != wanted
                ):
                    gaps.append(
                        f"{p.conn} {p.state_name} epoch {p.epoch} owns "
                        f"{len(p.owned)} of {len(wanted)} targeted"
                    )
        for tp in sorted(w.existing()):
            owners = [h.conn for h in w.ledger.owners(tp) if w.procs[h.conn].alive]
            if len(owners) != 1 and live:
                gaps.append(f"{tp} owned by {owners}")
                break
        return gaps


def _partitions(target: Any, names: dict[Any, str]) -> frozenset[TopicPartition]:
    """A member's target as partitions of named topics (none without a target)."""
    return frozenset(
        TopicPartition(names[t], q) for t, q in (target.partitions.pairs() if target else ()) if t in names
    )
