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
    StreamsGroupCoordinator,
    StreamsGroupState,
    StreamsTargetMemberRecord,
)
from streamtasks.membership.streams.records import Task
from streamtasks.sim.streams.process import StreamsProcess
from streamtasks.sim.trace import Violation

__all__ = ["StreamsChecks"]


class CheckedHost(Protocol):
    @property
    def now(self) -> int: ...

    def live(self) -> list[StreamsProcess]: ...

    def collect(self, found: list[Violation]) -> None: ...


class StreamsChecks:
    def __init__(self, host: CheckedHost, group_id: str) -> None:
        self.host = host
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        # the last state each check read and what it found there (the checks are pure functions
        # of it: an event that changes neither finds the same again, without the O(tasks) walk)
        self._event_state: tuple[object, ...] | None = None
        self._event_found: list[tuple[str, str]] = []
        self._target_state: tuple[object, ...] | None = None
        self._target_found: list[tuple[str, str]] = []

    def _violate(self, invariant: str, detail: str) -> None:
        self.host.collect([Violation(invariant=invariant, time_ms=self.host.now, detail=detail)])

    def members(self, coordinator: StreamsGroupCoordinator) -> list[StreamsProcess]:
        """Live processes whose member is in the coordinator's group."""
        group = coordinator.group(self.group_id)
        if group is None:
            return []
        members = group.members  # once, not per process (every event walks every process)
        return [p for p in self.host.live() if p.config.member_id in members]

    def after_event(self, coordinator: StreamsGroupCoordinator) -> None:
        procs = self.members(coordinator)
        # what the check reads; unchanged since the last event, it finds what it found then
        seen_state = tuple((p.conn, p.config.process_id, p.active, p.standby, p.warmup) for p in procs)
        if seen_state != self._event_state:
            self._event_state, self._event_found = seen_state, self._owned_apart(procs)
        for invariant, detail in self._event_found:
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

    def after_write(self, coordinator: StreamsGroupCoordinator) -> None:
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
        targets = tuple(
            (mid, target, member.process_id if (member := group.member(mid)) else "")
            for mid, target in group.targets.items()
        )
        if targets != self._target_state:
            self._target_state, self._target_found = targets, self._targets_apart(targets)
        for invariant, detail in self._target_found:
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
