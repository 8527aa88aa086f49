"""KIP-924's check of a task assignment (Kafka's ``TaskAssignmentUtils.validateTaskAssignment``).

The first problem found decides the verdict, checked in this order (processes in process-id
order, tasks in task-id order):

- ``UNKNOWN_TASK_ID``: a process is given a task (active, standby or warm-up) the application
  does not have;
- ``ACTIVE_TASK_ASSIGNED_MULTIPLE_TIMES``: two processes run the same task as active;
- ``INVALID_STANDBY_TASK``: a standby or warm-up of a stateless task, or -- because here one
  process's active, standby and warm-up sets are separate -- a standby or warm-up on the process
  that runs the task as active, or a standby and a warm-up of the same task on one process;
- ``MISSING_PROCESS_ID``: a process of the application has no entry in the assignment;
- ``UNKNOWN_PROCESS_ID``: the assignment has an entry for a process the application does not
  have.

A process listed more than once counts as one process holding the union of its entries. As in
Kafka, a task that no process runs is not an error of this check.
"""

from __future__ import annotations

from assignors.types import ApplicationState, AssignmentError, ProcessId, TaskAssignment
from topology.ids import TaskId

__all__ = ["validate_task_assignment"]


def _task_key(task: TaskId) -> tuple[int, int]:
    return (task.subtopology, task.partition)


def validate_task_assignment(state: ApplicationState, assignment: TaskAssignment) -> AssignmentError:
    """The KIP-924 verdict on ``assignment`` for ``state``: :attr:`AssignmentError.NONE` if valid."""
    tasks = state.tasks
    entries = sorted(assignment.processes, key=lambda e: e.process_id.int)
    active_owner: dict[TaskId, ProcessId] = {}
    for entry in entries:
        for task in sorted(entry.active | entry.standby | entry.warmup, key=_task_key):
            if task not in tasks:
                return AssignmentError.UNKNOWN_TASK_ID
        for task in sorted(entry.active, key=_task_key):
            previous = active_owner.setdefault(task, entry.process_id)
            if previous != entry.process_id:
                return AssignmentError.ACTIVE_TASK_ASSIGNED_MULTIPLE_TIMES

    held: dict[ProcessId, tuple[set[TaskId], set[TaskId]]] = {}
    for entry in entries:
        standby, warmup = held.setdefault(entry.process_id, (set(), set()))
        standby |= entry.standby
        warmup |= entry.warmup
    for pid, (standby, warmup) in held.items():
        for task in standby | warmup:
            if not tasks[task].is_stateful or active_owner.get(task) == pid:
                return AssignmentError.INVALID_STANDBY_TASK
        if standby & warmup:
            return AssignmentError.INVALID_STANDBY_TASK

    if any(pid not in held for pid in state.clients):
        return AssignmentError.MISSING_PROCESS_ID
    if any(pid not in state.clients for pid in held):
        return AssignmentError.UNKNOWN_PROCESS_ID
    return AssignmentError.NONE
