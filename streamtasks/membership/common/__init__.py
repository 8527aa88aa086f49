"""What every group member shares, whatever its protocol: the vocabulary and the kernel.

* :mod:`.events` and :mod:`.actions`: the application's calls, the transport's news and the
  actions a member emits (each protocol adds its ``ResponseReceived`` and ``SendRequest``);
  :mod:`.listener` runs an action list by KIP-429's listener rule.
* :mod:`.transitions`: a protocol's legal moves as an h11-style table, (state, trigger) -> next.
* :mod:`.kernel`: the component every member holds: state, actions to return, requests in flight;
  :mod:`.gate`: the commit before a revocation (:class:`CommitGate`), and :mod:`.link`: the
  coordinator, its lookup and the heartbeat timers (:class:`CoordinatorLink`), held beside it;
  :mod:`.holdings`: what it owns (:class:`Holdings`), and :mod:`.view`: its read-only
  properties, one line each (:class:`ReadOnly`).
* :mod:`.records` and :mod:`.requests`: frozen records (the commit gate, the requests) and the
  pure functions over them.
"""

from streamtasks.membership.common.actions import (
    AssignmentChanged,
    CommitOffsets,
    CommonAction,
    ErrorReported,
    FindCoordinator,
    InvokeListener,
    ListenerKind,
    assignment_changed,
    listener_call,
    sorted_tps,
)
from streamtasks.membership.common.events import (
    CoordinatorDiscovered,
    CoordinatorLost,
    EnforceRebalance,
    Leave,
    ListenerCompleted,
    RequestFailed,
    Subscribe,
)
from streamtasks.membership.common.gate import CommitGate
from streamtasks.membership.common.holdings import Holdings
from streamtasks.membership.common.kernel import Kernel
from streamtasks.membership.common.link import CoordinatorLink
from streamtasks.membership.common.listener import RebalanceListener, execute
from streamtasks.membership.common.records import Gate, Purpose
from streamtasks.membership.common.requests import (
    MAX_OPEN_INVOCATIONS,
    InFlight,
    Requests,
    answered,
    check_issued,
    lookup_answered,
    lookup_backoff_ms,
)
from streamtasks.membership.common.states import MemberState
from streamtasks.membership.common.transitions import Transitions
from streamtasks.membership.common.view import ReadOnly

__all__ = [
    "AssignmentChanged",
    "CommitGate",
    "CommitOffsets",
    "CommonAction",
    "CoordinatorDiscovered",
    "CoordinatorLink",
    "CoordinatorLost",
    "EnforceRebalance",
    "ErrorReported",
    "FindCoordinator",
    "Gate",
    "Holdings",
    "InFlight",
    "InvokeListener",
    "Kernel",
    "Leave",
    "ListenerCompleted",
    "ListenerKind",
    "MAX_OPEN_INVOCATIONS",
    "MemberState",
    "Purpose",
    "ReadOnly",
    "RebalanceListener",
    "RequestFailed",
    "Requests",
    "Subscribe",
    "Transitions",
    "answered",
    "assignment_changed",
    "check_issued",
    "execute",
    "listener_call",
    "lookup_answered",
    "lookup_backoff_ms",
    "sorted_tps",
]
