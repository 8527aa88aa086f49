"""An example task assignor plug-in for streamtasks.

Install it next to streamtasks (``pip install examples/custom_assignor``) and select it by name:
``streamtasks assign scenario.yaml --assignor round_robin_tasks``. streamtasks finds it through
the entry point declared in this package's pyproject.toml::

    [project.entry-points."streamtasks.assignors"]
    round_robin_tasks = "streamtasks_example_assignor:RoundRobinTaskAssignor"

The algorithm is deliberately simple: deal the tasks, in task-id order, to the processes' thread
slots in process-id order; then give each stateful task ``num_standby_replicas`` standbys on the
next processes in the ring that do not run it. It ignores lags and the previous assignment, which
is exactly why it makes a good contrast to ``high_availability``.
"""

from __future__ import annotations

from typing import ClassVar

from assignors import ApplicationState, ProcessAssignment, TaskAssignment

__all__ = ["RoundRobinTaskAssignor"]


class RoundRobinTaskAssignor:
    name: ClassVar[str] = "round_robin_tasks"

    def assign(self, state: ApplicationState) -> TaskAssignment:
        processes = state.sorted_process_ids()
        slots = [pid for pid in processes for _ in range(state.clients[pid].capacity)]
        active = {pid: set() for pid in processes}
        standby = {pid: set() for pid in processes}
        for i, task in enumerate(state.sorted_task_ids()):
            owner = slots[i % len(slots)]
            active[owner].add(task)
            if not state.tasks[task].is_stateful:
                continue
            start = processes.index(owner)
            ring = processes[start + 1 :] + processes[:start]
            for pid in ring[: state.configs.num_standby_replicas]:
                standby[pid].add(task)
        return TaskAssignment(
            processes=tuple(
                ProcessAssignment(
                    process_id=pid, active=frozenset(active[pid]), standby=frozenset(standby[pid])
                )
                for pid in processes
            )
        )
