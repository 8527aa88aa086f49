"""The streams layer, pure: the consumer-group partition assignor that runs a KIP-924 task
assignor (:class:`StreamsPartitionAssignor`), a member's task-set reconciliation
(:func:`plan_tasks`) and its lag-based rebalance triggers (:class:`LagTrigger`).

No IO, no clock: end offsets and time are handed in. ``docs/streams.md`` tells the story.
"""

from streamtasks.streams._table import LastTaskTable, TaskTable
from streamtasks.streams.assignor import AssignmentRead, StreamsPartitionAssignor
from streamtasks.streams.lag import LagTrigger, RebalanceTrigger, TriggerKind
from streamtasks.streams.plan import TaskKind, TaskPlan, plan_tasks

__all__ = [
    "AssignmentRead",
    "LagTrigger",
    "LastTaskTable",
    "RebalanceTrigger",
    "StreamsPartitionAssignor",
    "TaskKind",
    "TaskPlan",
    "TaskTable",
    "TriggerKind",
    "plan_tasks",
]
