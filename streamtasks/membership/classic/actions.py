"""Actions a :class:`~streamtasks.membership.classic.ClassicMember` asks its driver to take.

The listener calls, the commit before a revocation, the coordinator lookup, the bookkeeping
and the error reports are every member's (:mod:`streamtasks.membership.common.actions`, with
the rule for running a list); defined here: :class:`SendRequest` for the classic group RPCs.
"""

from __future__ import annotations

from dataclasses import dataclass

from streamtasks.membership.common.actions import (
    AssignmentChanged,
    CommitOffsets,
    ErrorReported,
    FindCoordinator,
    InvokeListener,
    ListenerKind,
)
from streamtasks.protocol.classic_group import (
    DescribeGroupRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    SyncGroupRequest,
)

__all__ = [
    "Action",
    "AssignmentChanged",
    "CommitOffsets",
    "ErrorReported",
    "FindCoordinator",
    "InvokeListener",
    "ListenerKind",
    "Request",
    "SendRequest",
]

#: Every request the member sends through :class:`SendRequest`.
Request = JoinGroupRequest | SyncGroupRequest | HeartbeatRequest | LeaveGroupRequest | DescribeGroupRequest


@dataclass(frozen=True, slots=True, kw_only=True)
class SendRequest:
    """Send ``request`` to the group coordinator; answer with ``ResponseReceived(request_id,
    ...)`` or ``RequestFailed(request_id, ...)``. Ids increase by one per member."""

    request_id: int
    request: Request


#: Every action the member emits.
Action = SendRequest | FindCoordinator | CommitOffsets | InvokeListener | AssignmentChanged | ErrorReported
