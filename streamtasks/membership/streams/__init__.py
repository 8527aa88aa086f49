"""A sans-IO streams-group member (KIP-1071) on the shared kernel of
:mod:`streamtasks.membership.common`: :class:`StreamsMember` and its vocabulary.
docs/streams-groups.md ("The member machine") has the transition table."""

from streamtasks.membership.common.states import MemberState
from streamtasks.membership.streams.actions import (
    Action,
    CreateInternalTopics,
    EndpointsChanged,
    InvokeTasksListener,
    SendRequest,
    ShutdownApplication,
    TasksListenerKind,
)
from streamtasks.membership.streams.config import StreamsMemberConfig
from streamtasks.membership.streams.events import (
    JoinStreamsGroup,
    RequestShutdown,
    ResponseReceived,
    TaskOffsetsUpdated,
    TasksListenerCompleted,
)
from streamtasks.membership.streams.machine import Event, StreamsMember
from streamtasks.membership.streams.records import Task, Tasks
from streamtasks.membership.streams.transitions import TABLE, TRANSITIONS

__all__ = [
    "TABLE",
    "TRANSITIONS",
    "Action",
    "CreateInternalTopics",
    "EndpointsChanged",
    "Event",
    "InvokeTasksListener",
    "JoinStreamsGroup",
    "RequestShutdown",
    "ResponseReceived",
    "SendRequest",
    "ShutdownApplication",
    "StreamsMember",
    "StreamsMemberConfig",
    "MemberState",
    "Task",
    "Tasks",
    "TaskOffsetsUpdated",
    "TasksListenerCompleted",
    "TasksListenerKind",
]
