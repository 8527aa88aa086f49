"""Measures of a task assignment's quality, used by the tests and the benchmarks."""

from __future__ import annotations

from fractions import Fraction

from assignors.types import ApplicationState, TaskAssignment

__all__ = ["active_spread", "colocated_standbys", "moved_actives", "warmup_count"]


def active_spread(state: ApplicationState, assignment: TaskAssignment) -> Fraction:
    """Max minus min of actives per thread over the processes of ``state`` (0 with none)."""
    loads = [
        Fraction(len(p.active), state.clients[p.process_id].capacity)
        for p in assignment.processes
        if p.process_id in state.clients
    ]
    return max(loads) - min(loads) if loads else Fraction(0)


def moved_actives(state: ApplicationState, assignment: TaskAssignment) -> int:
    """Tasks whose active now runs on a process that did not run it before.

    Tasks that no process ran as active before are not counted.
    """
    previous: dict[object, set[object]] = {}
    for client in state.clients.values():
        for task in client.previous_active:
            previous.setdefault(task, set()).add(client.process_id)
    return sum(
        1
        for p in assignment.processes
        for task in p.active
        if task in previous and p.process_id not in previous[task]
    )


def colocated_standbys(assignment: TaskAssignment) -> int:
    """Standby or warm-up replicas placed on the process that runs the same task as active."""
    return sum(len(p.active & (p.standby | p.warmup)) for p in assignment.processes)


def warmup_count(assignment: TaskAssignment) -> int:
    return sum(len(p.warmup) for p in assignment.processes)
