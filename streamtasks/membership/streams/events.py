"""The events a streams member consumes besides the common ones
(:mod:`streamtasks.membership.common.events`: ``RequestFailed``, ``CoordinatorDiscovered``,
``CoordinatorLost``, ``Leave``). Frozen, slotted, keyword-only values."""

from __future__ import annotations

from dataclasses import dataclass

from streamtasks.protocol.streams_group import StreamsGroupHeartbeatResponse, TaskOffset

__all__ = [
    "JoinStreamsGroup",
    "RequestShutdown",
    "ResponseReceived",
    "TaskOffsetsUpdated",
    "TasksListenerCompleted",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class JoinStreamsGroup:
    """The application starts: join with the configured topology."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ResponseReceived:
    """The answer to ``SendRequest(request_id)``."""

    request_id: int
    response: StreamsGroupHeartbeatResponse


@dataclass(frozen=True, slots=True, kw_only=True)
class TasksListenerCompleted:
    """The runtime ran ``InvokeTasksListener(invocation_id)`` (closed the revoked tasks and
    committed their offsets, opened the assigned ones, or dropped the lost ones). The member
    waits for it before it goes on: revoke before assign, assign before acknowledge."""

    invocation_id: int
    failed: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskOffsetsUpdated:
    """The runtime's cumulative changelog offsets and end offsets per task; the member sends
    the latest with the first heartbeat after each ``TaskOffsetIntervalMs``."""

    task_offsets: tuple[TaskOffset, ...]
    task_end_offsets: tuple[TaskOffset, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestShutdown:
    """The application asks every member of the group to shut down (Kafka Streams'
    ``SHUTDOWN_APPLICATION`` uncaught-exception response): sent with the next heartbeat."""

    reason: str = ""
