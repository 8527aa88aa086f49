"""Actions a :class:`~streamtasks.membership.consumer.ConsumerMember` asks its driver to take.

Every member's actions (:mod:`streamtasks.membership.common.actions`), with the same rule
for running a list (:func:`streamtasks.membership.common.listener.execute`): in order, every
callback even after one raised, the assignment change standing. ``CommitOffsets.generation_id``
carries the member epoch; ``AssignmentChanged.generation`` the member epoch the partitions are
owned under and ``user_data`` the assignment metadata bytes a client-side assignor gave this
member. Defined here: :class:`SendRequest` for the KIP-848 RPCs.
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
from streamtasks.protocol.assignment_rpc import (
    ConsumerGroupInstallAssignmentRequest,
    ConsumerGroupPrepareAssignmentRequest,
)
from streamtasks.protocol.consumer_group import ConsumerGroupHeartbeatRequest

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
Request = (
    ConsumerGroupHeartbeatRequest
    | ConsumerGroupPrepareAssignmentRequest
    | ConsumerGroupInstallAssignmentRequest
)


@dataclass(frozen=True, slots=True, kw_only=True)
class SendRequest:
    """Send ``request`` to the group coordinator; answer with ``ResponseReceived(request_id,
    ...)`` or ``RequestFailed(request_id, ...)``. Ids increase by one per member."""

    request_id: int
    request: Request


#: Every action the member emits.
Action = SendRequest | FindCoordinator | CommitOffsets | InvokeListener | AssignmentChanged | ErrorReported
