"""A member whose session lapsed asks the coordinator under its epoch before rejoining at 0.

The session rule (``ConsumerMember.poll``) gives the partitions up as lost when no heartbeat
sent within the coordinator's session timeout was answered: the coordinator may have expired
the member and given its partitions to others, and a member that waited for the fencing answer
would own them twice while a hung coordinator stays silent. Often the coordinator has not: its
broker died, lookups named the dead broker until the controller fenced it, and the broker that
loads the group next schedules a fresh session for every member it loads (Apache Kafka's
``GroupMetadataManager.onLoaded``). A rejoin at epoch 0 would lose the member's place in the
target and make the group reconcile again, so the member keeps its id and epoch E and, once a
coordinator is found, sends a full heartbeat under E owning nothing (:data:`ASK`: FENCED to
JOINING, epoch E).

Apache Kafka's coordinator answers a heartbeat at E > 0 without ``UNKNOWN_MEMBER_ID`` only for
a member it holds, and without ``FENCED_MEMBER_EPOCH`` only when E is the member's epoch, or its
previous epoch with owned partitions that are a subset of its assignment (the empty set is);
it handles the heartbeat and the member's session expiry one after the other on the group's
partition, so the answer is authoritative. Its assignment names the partitions the member
holds at the answer's epoch, never one pending revocation nor one still pending assignment
(owned by another member): nobody else can hold them. The member reconciles to that answer as
to any first assignment (listeners: assigned, the committed offsets read again) and counts the
question answered (:attr:`Lapse.taken_back`). ``FENCED_MEMBER_EPOCH`` / ``UNKNOWN_MEMBER_ID``
fence as any heartbeat's do: the question is dropped, the member rejoins at epoch 0. A
coordinator error or a lost connection keeps E and asks the next coordinator.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from streamtasks.membership.common.states import IN_GROUP
from streamtasks.membership.common.states import MemberState as S

__all__ = ["ASK", "REJOIN", "Lapse", "answered", "asking", "lapsed", "trigger"]

#: FENCED -> JOINING under the lapsed epoch (``docs/membership.md``).
ASK = "session lapsed: ask under its epoch"
#: FENCED -> JOINING at epoch 0 (the heartbeat lifecycle's rejoin).
REJOIN = "rejoin at epoch 0"


@dataclass(frozen=True, slots=True, kw_only=True)
class Lapse:
    """The epoch a lapsed member asks under (0: none) and how often a coordinator vouched."""

    epoch: int = 0
    taken_back: int = 0


def lapsed(lapse: Lapse, state: S, epoch: int) -> Lapse:
    """The session lapsed in ``state`` at ``epoch``: a member in the group with an epoch asks
    under it (one already asking keeps asking under the same epoch); others rejoin at 0."""
    return replace(lapse, epoch=epoch if state in IN_GROUP and epoch > 0 else 0)


def trigger(lapse: Lapse) -> str:
    """How a FENCED member goes back to JOINING."""
    return ASK if lapse.epoch > 0 else REJOIN


def asking(lapse: Lapse, epoch: int) -> bool:
    """A heartbeat answered at ``epoch`` (sent under it) answers the lapsed member's question."""
    return lapse.epoch > 0 and epoch == lapse.epoch


def answered(lapse: Lapse, vouched: bool) -> Lapse:
    """The question answered: vouched (no error) counts; either way it is not asked again."""
    return Lapse(epoch=0, taken_back=lapse.taken_back + (1 if vouched else 0))
