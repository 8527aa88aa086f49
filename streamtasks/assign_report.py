"""What ``streamtasks assign`` shows: per-process tables, moves, follow-up, validation."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from assignors import ApplicationState, AssignmentError, TaskAssignment
from assignors.validate import validate_task_assignment
from topology import TaskId

__all__ = ["AssignmentReport", "Move", "build_report", "render_text"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Move:
    """A task whose active owner changed (``kind='active'``), or a replica that appeared."""

    task: TaskId
    kind: str
    source: str | None
    target: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ProcessRow:
    name: str
    capacity: int
    rack: str | None
    active: tuple[TaskId, ...]
    standby: tuple[TaskId, ...]
    warmup: tuple[TaskId, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class AssignmentReport:
    assignor: str
    rows: tuple[ProcessRow, ...]
    moves: tuple[Move, ...]
    followup_rebalance_ms: int | None
    now_ms: int
    validation: AssignmentError
    unassigned: tuple[TaskId, ...]

    def to_json(self) -> dict[str, object]:
        return {
            "assignor": self.assignor,
            "valid": self.validation is AssignmentError.NONE and not self.unassigned,
            "validation": self.validation.value,
            "unassigned_tasks": [str(t) for t in self.unassigned],
            "processes": [
                {
                    "name": r.name,
                    "capacity": r.capacity,
                    "rack": r.rack,
                    "active": [str(t) for t in r.active],
                    "standby": [str(t) for t in r.standby],
                    "warmup": [str(t) for t in r.warmup],
                }
                for r in self.rows
            ],
            "moves": [
                {"task": str(m.task), "kind": m.kind, "from": m.source, "to": m.target} for m in self.moves
            ],
            "followup_rebalance": {
                "due": self.followup_rebalance_ms is not None,
                "at_ms": self.followup_rebalance_ms,
                "in_ms": None
                if self.followup_rebalance_ms is None
                else self.followup_rebalance_ms - self.now_ms,
            },
        }


def build_report(
    state: ApplicationState,
    assignment: TaskAssignment,
    names: Mapping[uuid.UUID, str],
    assignor: str,
) -> AssignmentReport:
    def name(pid: uuid.UUID) -> str:
        return names.get(pid, str(pid))

    prev_active: dict[TaskId, uuid.UUID] = {}
    prev_replica: dict[TaskId, set[uuid.UUID]] = {}
    for pid in state.sorted_process_ids():
        client = state.clients[pid]
        for t in client.previous_active:
            prev_active[t] = pid
        for t in client.previous_standby:
            prev_replica.setdefault(t, set()).add(pid)

    rows: list[ProcessRow] = []
    moves: list[Move] = []
    assigned: set[TaskId] = set()
    ordered = sorted(assignment.processes, key=lambda p: (name(p.process_id), p.process_id))
    for proc in ordered:
        known = state.clients.get(proc.process_id)
        rows.append(
            ProcessRow(
                name=name(proc.process_id),
                capacity=known.capacity if known else 0,
                rack=known.rack if known else None,
                active=tuple(sorted(proc.active)),
                standby=tuple(sorted(proc.standby)),
                warmup=tuple(sorted(proc.warmup)),
            )
        )
        assigned.update(proc.active)
        for t in sorted(proc.active):
            before = prev_active.get(t)
            if before != proc.process_id:
                moves.append(
                    Move(
                        task=t,
                        kind="active",
                        source=None if before is None else name(before),
                        target=name(proc.process_id),
                    )
                )
        for kind, tasks in (("standby", proc.standby), ("warmup", proc.warmup)):
            for t in sorted(tasks):
                had = prev_replica.get(t, set()) | ({prev_active[t]} if t in prev_active else set())
                if proc.process_id not in had:
                    moves.append(Move(task=t, kind=kind, source=None, target=name(proc.process_id)))
    moves.sort(key=lambda m: (m.kind != "active", m.task, m.target))
    return AssignmentReport(
        assignor=assignor,
        rows=tuple(rows),
        moves=tuple(moves),
        followup_rebalance_ms=assignment.followup_rebalance_ms,
        now_ms=state.now_ms,
        validation=validate_task_assignment(state, assignment),
        unassigned=tuple(t for t in state.sorted_task_ids() if t not in assigned),
    )


def _tasks(tasks: Iterable[TaskId]) -> str:
    text = " ".join(str(t) for t in tasks)
    return text or "-"


def render_text(report: AssignmentReport) -> str:
    """A plain-text table per process, the moves, and the follow-up verdict."""
    headers = ("process", "capacity", "rack", "active", "standby", "warm-up")
    table = [
        (r.name, str(r.capacity), r.rack or "-", _tasks(r.active), _tasks(r.standby), _tasks(r.warmup))
        for r in report.rows
    ]
    widths = [max(len(h), *(len(row[i]) for row in table)) for i, h in enumerate(headers)]
    line = "  ".join(f"{{:<{w}}}" for w in widths)
    out = [f"assignor: {report.assignor}", "", line.format(*headers), line.format(*("-" * w for w in widths))]
    out += [line.format(*row) for row in table]
    out.append("")
    active_moves = [m for m in report.moves if m.kind == "active"]
    out.append(f"moves: {len(active_moves)} active, {len(report.moves) - len(active_moves)} new replicas")
    for m in report.moves:
        src = m.source or "(none)"
        out.append(f"  {m.kind:<8} {m.task!s:<7} {src} -> {m.target}")
    out.append("")
    if report.followup_rebalance_ms is None:
        out.append("follow-up rebalance: not needed")
    else:
        wait = report.followup_rebalance_ms - report.now_ms
        out.append(f"follow-up rebalance: due at {report.followup_rebalance_ms} ms (in {wait} ms)")
    verdict = "ok" if report.validation is AssignmentError.NONE else report.validation.value
    if report.unassigned:
        verdict += f"; {len(report.unassigned)} task(s) without an active: {_tasks(report.unassigned)}"
    out.append(f"validation: {verdict}")
    return "\n".join(out)
