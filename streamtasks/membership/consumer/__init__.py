"""The KIP-848 consumer group member as a sans-IO state machine: ConsumerGroupHeartbeat,
reconciliation, fencing, static membership, and the seed KIP's client-side assignment
(PrepareAssignment → assignor → InstallAssignment).

Drive it with :meth:`ConsumerMember.handle` / :meth:`ConsumerMember.poll`; execute the returned
actions in order (the classic member's vocabulary and listener rule). See ``docs/membership.md``.
"""

from streamtasks.membership.common.states import MemberState
from streamtasks.membership.consumer.actions import Action, Request, SendRequest
from streamtasks.membership.consumer.client_assignment import (
    AssignmentProblem,
    TargetAssignor,
    compute_assignment,
    group_subscription,
)
from streamtasks.membership.consumer.config import ConsumerMemberConfig, default_metadata, metadata_from_hook
from streamtasks.membership.consumer.events import (
    ApplicationPolled,
    AssignorMetadata,
    AssignorMetadataChanged,
    Event,
    MetadataUpdated,
    PollTimerExpired,
    Response,
    ResponseReceived,
    SessionTimeoutKnown,
)
from streamtasks.membership.consumer.machine import ConsumerMember
from streamtasks.membership.consumer.transitions import TRANSITIONS

__all__ = [
    "TRANSITIONS",
    "Action",
    "ApplicationPolled",
    "AssignmentProblem",
    "AssignorMetadata",
    "AssignorMetadataChanged",
    "ConsumerMember",
    "ConsumerMemberConfig",
    "Event",
    "MemberState",
    "MetadataUpdated",
    "PollTimerExpired",
    "Request",
    "Response",
    "ResponseReceived",
    "SendRequest",
    "SessionTimeoutKnown",
    "TargetAssignor",
    "compute_assignment",
    "default_metadata",
    "metadata_from_hook",
    "group_subscription",
]
