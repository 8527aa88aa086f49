"""Pluggable, pure assignors: task assignors (KIP-924 shaped) and partition assignors."""

from assignors.partition.types import (
    GroupAssignment,
    GroupSubscription,
    MemberId,
    PartitionAssignor,
    RebalanceProtocol,
    Subscription,
)
from assignors.registry import (
    available,
    available_partition_assignors,
    get,
    get_partition_assignor,
)
from assignors.types import (
    RUNNING_LAG,
    ApplicationState,
    AssignmentConfigs,
    AssignmentError,
    ClientState,
    ProcessAssignment,
    ProcessId,
    TaskAssignment,
    TaskAssignor,
    TaskSpec,
)
from assignors.validate import validate_task_assignment

__all__ = [
    "RUNNING_LAG",
    "ApplicationState",
    "AssignmentConfigs",
    "AssignmentError",
    "ClientState",
    "GroupAssignment",
    "GroupSubscription",
    "MemberId",
    "PartitionAssignor",
    "ProcessAssignment",
    "ProcessId",
    "RebalanceProtocol",
    "Subscription",
    "TaskAssignment",
    "TaskAssignor",
    "TaskSpec",
    "available",
    "available_partition_assignors",
    "get",
    "get_partition_assignor",
    "validate_task_assignment",
]
