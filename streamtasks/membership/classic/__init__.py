"""The classic group member as a sans-IO state machine (KIP-429, KIP-341, KIP-568, KIP-814).

Drive it with :meth:`ClassicMember.handle` / :meth:`ClassicMember.poll`; execute the returned
actions in order. See ``docs/membership.md``.
"""

from streamtasks.membership.classic.actions import (
    Action,
    AssignmentChanged,
    CommitOffsets,
    ErrorReported,
    FindCoordinator,
    InvokeListener,
    ListenerKind,
    Request,
    SendRequest,
)
from streamtasks.membership.classic.config import MemberConfig, select_protocol
from streamtasks.membership.classic.events import (
    CoordinatorDiscovered,
    CoordinatorLost,
    EnforceRebalance,
    Event,
    Leave,
    ListenerCompleted,
    MetadataUpdated,
    RequestFailed,
    Response,
    ResponseReceived,
    Subscribe,
)
from streamtasks.membership.classic.machine import ClassicMember
from streamtasks.membership.classic.states import MemberState
from streamtasks.membership.common.listener import RebalanceListener, execute

__all__ = [
    "Action",
    "AssignmentChanged",
    "ClassicMember",
    "CommitOffsets",
    "CoordinatorDiscovered",
    "CoordinatorLost",
    "EnforceRebalance",
    "ErrorReported",
    "Event",
    "FindCoordinator",
    "InvokeListener",
    "Leave",
    "ListenerCompleted",
    "ListenerKind",
    "MemberConfig",
    "MemberState",
    "MetadataUpdated",
    "RebalanceListener",
    "Request",
    "RequestFailed",
    "Response",
    "ResponseReceived",
    "SendRequest",
    "Subscribe",
    "execute",
    "select_protocol",
]
