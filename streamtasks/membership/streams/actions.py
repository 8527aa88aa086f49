"""The actions a streams member asks its driver to take, besides the common ones
(:mod:`streamtasks.membership.common.actions`: ``FindCoordinator``, ``ErrorReported``). A list
runs in order."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from streamtasks.membership.common.actions import ErrorReported, FindCoordinator
from streamtasks.membership.streams.records import Task
from streamtasks.protocol.streams_group import (
    EndpointToPartitions,
    StreamsGroupHeartbeatRequest,
    TopicInfo,
)

__all__ = [
    "Action",
    "CreateInternalTopics",
    "EndpointsChanged",
    "ErrorReported",
    "FindCoordinator",
    "InvokeTasksListener",
    "SendRequest",
    "ShutdownApplication",
    "TasksListenerKind",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class SendRequest:
    """Send ``request`` to the group coordinator; answer with ``ResponseReceived`` or
    ``RequestFailed``."""

    request_id: int
    request: StreamsGroupHeartbeatRequest


class TasksListenerKind(enum.Enum):
    """Kafka Streams' ``StreamsRebalanceListener`` callbacks."""

    REVOKED = "on_tasks_revoked"
    ASSIGNED = "on_tasks_assigned"
    LOST = "on_all_tasks_lost"


@dataclass(frozen=True, slots=True, kw_only=True)
class InvokeTasksListener:
    """Run the runtime's task callback; answer with ``TasksListenerCompleted(invocation_id)``.

    ``REVOKED``: close (commit) the active tasks in ``active``; ``ASSIGNED``: the member now
    owns exactly ``active`` / ``standby`` / ``warmup`` under ``member_epoch``; ``LOST``: drop
    every task without committing (fenced)."""

    invocation_id: int
    kind: TasksListenerKind
    member_epoch: int
    active: tuple[Task, ...] = ()
    standby: tuple[Task, ...] = ()
    warmup: tuple[Task, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateInternalTopics:
    """The broker reports MISSING_INTERNAL_TOPICS: create these (the topology's changelog and
    repartition topics; ``detail`` is the broker's status detail)."""

    topics: tuple[TopicInfo, ...]
    detail: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ShutdownApplication:
    """A member asked the whole group to shut down (status SHUTDOWN_APPLICATION)."""

    detail: str


@dataclass(frozen=True, slots=True, kw_only=True)
class EndpointsChanged:
    """Which endpoints host which partitions (interactive queries), as of ``epoch``."""

    epoch: int
    endpoints: tuple[EndpointToPartitions, ...]


Action = (
    SendRequest
    | FindCoordinator
    | ErrorReported
    | InvokeTasksListener
    | CreateInternalTopics
    | ShutdownApplication
    | EndpointsChanged
)
