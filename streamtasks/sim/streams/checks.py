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

from streamtasks.coordinator.streams import StreamsGroup, StreamsGroupCoordinator, StreamsGroupState
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

    def _violate(self, invariant: str, detail: str) -> None:
        self.host.collect([Violation(invariant=invariant, time_ms=self.host.now, detail=detail)])

    def members(self, coordinator: StreamsGroupCoordinator) -> list[StreamsProcess]:
        """Live processes whose member is in the coordinator's group."""
        group = coordinator.group(self.group_id)
        if group is None:
            return []
        return [p for p in self.host.live() if p.member_id in group.members]

    def after_event(self, coordinator: StreamsGroupCoordinator) -> None:
        seen: dict[Task, str] = {}
        procs = self.members(coordinator)
        active_by_process: dict[str, set[Task]] = {}
        for p in procs:
            for task in p.active:
                if task in seen:
                    self._violate("exclusive-active", f"task {task} active on {seen[task]} and {p.conn}")
                seen[task] = p.conn
            active_by_process.setdefault(p.config.process_id, set()).update(p.active)
        for p in procs:
            both = (p.standby | p.warmup) & active_by_process.get(p.config.process_id, set())
            if both:
                self._violate(
                    "standby-apart", f"{p.conn} holds standby/warm-up {sorted(both)} of its own actives"
                )

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
        self._targets_apart(group)

    def _targets_apart(self, group: StreamsGroup) -> None:
        active: dict[Task, str] = {}
        for mid, target in group.targets.items():
            member = group.member(mid)
            for task in target.active:
                if task in active:
                    self._violate("exclusive-active", f"target gives {task} to two members")
                active[task] = member.process_id if member else ""
        for mid, target in group.targets.items():
            member = group.member(mid)
            pid = member.process_id if member else ""
            wrong = [t for t in target.standby | target.warmup if active.get(t) == pid]
            if wrong:
                self._violate(
                    "standby-apart", f"target of {mid} has standbys {sorted(wrong)} beside their active"
                )

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
