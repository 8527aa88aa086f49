"""The streams-group simulator's invariants, checked after every event and coordinator write:

* ``exclusive-active``: no task is active, in the members' own view (their task callbacks), on
  two live processes that are both members of the coordinator's group;
* ``standby-apart``: no process holds a standby or warm-up of a task it runs as active (in the
  members' view), and no target of the coordinator puts one on the process of the task's
  active;
* ``epoch-monotonic``: the group epoch and the assignment epoch never go back (fail-overs
  included);
* ``failover``: a coordinator that loads the log has exactly the state of the one it replaces;
* ``convergence`` (world): once the faults stop, every task is active on a member and the group
  is stable within the bound.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from streamtasks.coordinator.streams import (
    StreamsCurrentAssignmentRecord,
    StreamsCurrentAssignmentTombstone,
    StreamsGroupCoordinator,
    StreamsGroupState,
    StreamsGroupTombstone,
    StreamsMemberRecord,
    StreamsMemberTombstone,
    StreamsRecord,
    StreamsTargetMemberRecord,
)
from streamtasks.membership.streams.records import Task
from streamtasks.sim.streams.ownership import Holding, OwnershipIndex
from streamtasks.sim.streams.process import StreamsProcess
from streamtasks.sim.trace import Violation

__all__ = ["StreamsChecks"]


class CheckedHost(Protocol):
    @property
    def now(self) -> int: ...

    @property
    def current(self) -> dict[str, StreamsProcess]: ...

    def live(self) -> list[StreamsProcess]: ...

    def collect(self, found: list[Violation]) -> None: ...


class StreamsChecks:
    """The invariants (module docstring). After an event only what it could have changed is
    looked at again: the processes it touched (:meth:`touched`: their callbacks ran, they started
    or stopped) and the members the coordinator's writes named (:meth:`after_write`); two
    :class:`~streamtasks.sim.streams.ownership.OwnershipIndex` keep the tasks of the live members'
    processes and of the targets. Only a run that breaks an invariant walks them all, to say how."""

    def __init__(self, host: CheckedHost, group_id: str) -> None:
        self.host = host
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self._coordinator: StreamsGroupCoordinator | None = None  # the one the indexes follow
        self._procs = OwnershipIndex()  # by process name: the live members' processes
        self._targets = OwnershipIndex()  # by member id: the coordinator's targets
        self._names: dict[str, str] = {}  # member id -> the name of its process
        self._lagging: set[str] = set()  # live processes that keep the group from converging
        self._live: set[str] = set()
        self._dirty_names: set[str] = set()
        self._dirty_members: set[str] = set()  # their processes (member, current assignment)
        self._dirty_targets: set[str] = set()  # their targets (target, process id)

    def _violate(self, invariant: str, detail: str) -> None:
        self.host.collect([Violation(invariant=invariant, time_ms=self.host.now, detail=detail)])

    def members(self, coordinator: StreamsGroupCoordinator) -> list[StreamsProcess]:
        """Live processes whose member is in the coordinator's group."""
        group = coordinator.group(self.group_id)
        if group is None:
            return []
        members = group.members  # once, not per process
        return [p for p in self.host.live() if p.config.member_id in members]

    def touched(self, proc: StreamsProcess) -> None:
        """``proc`` ran (its tasks or state may have changed), started or stopped."""
        self._dirty_names.add(proc.name)

    # -- keeping up -----------------------------------------------------------------------------

    def _follow(self, coordinator: StreamsGroupCoordinator) -> None:
        """Bring the indexes up to date (all of it for a coordinator they have not seen)."""
        if coordinator is not self._coordinator:
            self._coordinator = coordinator
            self._dirty_names.update(self.host.current)
            self._dirty_targets.update(self._targets.keys())
            group = coordinator.group(self.group_id)
            if group is not None:
                self._dirty_targets.update(group.targets)
        if self._dirty_members:
            names = self._names
            self._dirty_names.update(names[m] for m in self._dirty_members if m in names)
            self._dirty_members.clear()
        for name in self._dirty_names:
            self._look_at(name, coordinator)
        self._dirty_names.clear()
        for member_id in self._dirty_targets:
            self._look_at_target(member_id, coordinator)
        self._dirty_targets.clear()

    def _look_at(self, name: str, coordinator: StreamsGroupCoordinator) -> None:
        p = self.host.current.get(name)
        if p is None or not p.alive:
            self._procs.put(name, None)
            self._live.discard(name)
            self._lagging.discard(name)
            return
        member_id = p.config.member_id
        self._names[member_id] = name
        self._live.add(name)
        group = coordinator.group(self.group_id)
        if group is None or group.member(member_id) is None:
            self._procs.put(name, None)
            self._lagging.add(name)
            return
        self._procs.put(name, Holding(p.config.process_id, p.active, p.standby | p.warmup))
        current = group.current(member_id)
        behind = current is not None and (current.active != p.active or current.standby != p.standby)
        if behind or not p.settled:
            self._lagging.add(name)
        else:
            self._lagging.discard(name)

    def _look_at_target(self, member_id: str, coordinator: StreamsGroupCoordinator) -> None:
        group = coordinator.group(self.group_id)
        target = None if group is None else group.target(member_id)
        if target is None or group is None:
            self._targets.put(member_id, None)
            return
        member = group.member(member_id)
        pid = member.process_id if member else ""
        self._targets.put(member_id, Holding(pid, target.active, target.standby | target.warmup))

    # -- the checks -----------------------------------------------------------------------------

    def clean(self, coordinator: StreamsGroupCoordinator) -> bool:
        """The indexes find no ``exclusive-active`` or ``standby-apart`` (``not walk(...)``)."""
        self._follow(coordinator)
        return self._procs.clean and self._targets.clean

    def walk(self, coordinator: StreamsGroupCoordinator) -> list[tuple[str, str]]:
        """What the walk of every live member's process and every target finds."""
        return self._owned_apart(self.members(coordinator)) + self._targets_apart(
            self._target_rows(coordinator)
        )

    def _target_rows(
        self, coordinator: StreamsGroupCoordinator
    ) -> tuple[tuple[str, StreamsTargetMemberRecord, str], ...]:
        group = coordinator.group(self.group_id)
        if group is None:
            return ()
        return tuple(
            (mid, target, member.process_id if (member := group.member(mid)) else "")
            for mid, target in group.targets.items()
        )

    def after_event(self, coordinator: StreamsGroupCoordinator) -> None:
        self._follow(coordinator)
        if not self._procs.clean:  # something is wrong: the walk that words it
            for invariant, detail in self._owned_apart(self.members(coordinator)):
                self._violate(invariant, detail)

    @staticmethod
    def _owned_apart(procs: list[StreamsProcess]) -> list[tuple[str, str]]:
        found: list[tuple[str, str]] = []
        seen: dict[Task, str] = {}
        active_by_process: dict[str, set[Task]] = {}
        for p in procs:
            for task in p.active:
                if task in seen:
                    found.append(("exclusive-active", f"task {task} active on {seen[task]} and {p.conn}"))
                seen[task] = p.conn
            active_by_process.setdefault(p.config.process_id, set()).update(p.active)
        for p in procs:
            both = (p.standby | p.warmup) & active_by_process.get(p.config.process_id, set())
            if both:
                found.append(
                    ("standby-apart", f"{p.conn} holds standby/warm-up {sorted(both)} of its own actives")
                )
        return found

    def after_write(self, coordinator: StreamsGroupCoordinator, records: Iterable[StreamsRecord]) -> None:
        """After the coordinator applied ``records``: the epochs, and the targets."""
        for record in records:
            if isinstance(record, StreamsGroupTombstone):
                self._coordinator = None  # every process and target looked at again
            member_id = getattr(record, "member_id", None)
            if member_id is None:
                continue
            if isinstance(record, (StreamsMemberRecord, StreamsMemberTombstone)):
                self._dirty_members.add(member_id)
                self._dirty_targets.add(member_id)
            elif isinstance(record, (StreamsCurrentAssignmentRecord, StreamsCurrentAssignmentTombstone)):
                self._dirty_members.add(member_id)
            else:
                self._dirty_targets.add(member_id)
        group = coordinator.group(self.group_id)
        if group is None:
            return
        if group.epoch < self.group_epoch or group.target_epoch < self.assignment_epoch:
            self._violate(
                "epoch-monotonic",
                f"group epoch {group.epoch} / assignment epoch {group.target_epoch} after "
                f"{self.group_epoch} / {self.assignment_epoch}",
            )
        self.group_epoch, self.assignment_epoch = group.epoch, group.target_epoch
        self._follow(coordinator)
        if not self._targets.clean:  # something is wrong: the walk that words it
            for invariant, detail in self._targets_apart(self._target_rows(coordinator)):
                self._violate(invariant, detail)

    @staticmethod
    def _targets_apart(
        targets: tuple[tuple[str, StreamsTargetMemberRecord, str], ...],
    ) -> list[tuple[str, str]]:
        found: list[tuple[str, str]] = []
        active: dict[Task, str] = {}
        for _, target, pid in targets:
            for task in target.active:
                if task in active:
                    found.append(("exclusive-active", f"target gives {task} to two members"))
                active[task] = pid
        for mid, target, pid in targets:
            wrong = [t for t in target.standby | target.warmup if active.get(t) == pid]
            if wrong:
                found.append(
                    ("standby-apart", f"target of {mid} has standbys {sorted(wrong)} beside their active")
                )
        return found

    def failover_loaded(self, old: StreamsGroupCoordinator, fresh: StreamsGroupCoordinator) -> None:
        if old.snapshot() != fresh.snapshot():
            self._violate("failover", "the coordinator that loaded the log differs from the one it replaces")

    def converged(self, coordinator: StreamsGroupCoordinator, tasks: frozenset[Task]) -> bool:
        """``not gaps(coordinator, tasks)``, from the indexes (the group's state read last)."""
        self._follow(coordinator)
        if not self._live:
            return True
        if self._lagging:
            return False
        self._procs.expect(tasks)
        if self._procs.missing:
            return False
        return coordinator.group_state(self.group_id) is StreamsGroupState.STABLE

    def gaps(self, coordinator: StreamsGroupCoordinator, tasks: Iterable[Task]) -> list[str]:
        """Why the group has not converged (empty: it has)."""
        out = []
        state = coordinator.group_state(self.group_id)
        procs = self.members(coordinator)
        live = self.host.live()
        if live and state is not StreamsGroupState.STABLE:
            out.append(f"group {state.value}")
        for p in live:
            if p not in procs:
                out.append(f"{p.conn} not a member ({p.state_name})")
            elif not p.settled:
                out.append(f"{p.conn} {p.state_name}")
        group = coordinator.group(self.group_id)
        for p in procs:
            current = group.current(p.member_id) if group else None
            if current is not None and (current.active != p.active or current.standby != p.standby):
                out.append(f"{p.conn} owns other tasks than the coordinator gave it")
        if live:
            owned = {t for p in procs for t in p.active}
            missing = sorted(set(tasks) - owned)
            if missing:
                out.append(f"tasks {missing[:6]} not active anywhere")
        return out
