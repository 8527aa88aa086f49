"""Taking a lapsed generation's assignment back: :class:`Lapsed` and the pure rules on it.

The session rule (:func:`.phases.session_lapsed`) gives the partitions up as lost when the
coordinator has not vouched for the member within a session timeout: it (or the broker the
group moved to) may have expired the member and handed them to others. Often it has not: the
coordinator's broker died, FindCoordinator named the dead broker until the controller fenced
it, and the broker that loads the group next gives every member of the loaded (Stable)
generation a fresh session. Before rejoining, the member asks that coordinator with a Heartbeat
under the generation it lapsed in. Apache Kafka's classic group answers a heartbeat NONE only
for a known member of the group's current generation while that generation is Stable (or
CompletingRebalance, which a member that applied the generation's assignment cannot see again:
generations only grow), and it handles the heartbeat and the member's session expiry one after
the other on the group's partition, so the answer is authoritative: NONE says nobody else can
hold what that generation gave this member, and it takes the assignment back without a
rebalance; REBALANCE_IN_PROGRESS, UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION mean a rejoin as
before (with the partitions lost), FENCED_INSTANCE_ID fails the member as any heartbeat's does,
and a coordinator error means a new lookup and the same question to the next coordinator.
"""

from __future__ import annotations

from dataclasses import dataclass

from streamtasks.membership.classic.records import Membership, Ownership
from streamtasks.membership.classic.states import MemberState as S
from topology.ids import TopicPartition

__all__ = ["Lapsed", "lapsed"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Lapsed:
    """The membership the session rule ended and the assignment it had applied."""

    membership: Membership
    assignment: frozenset[TopicPartition]
    user_data: bytes


def lapsed(state: S, membership: Membership, ownership: Ownership) -> Lapsed | None:
    """What a member whose session lapsed may take back (``None``: nothing, it rejoins).

    Only a STABLE member's: it owns exactly what its generation assigned it. A member in the
    middle of a revocation (PREPARING, REVOKING) or leaving has asked for a rebalance or holds
    partitions another generation assigned, so it rejoins as before."""
    m = membership
    if state is not S.STABLE or not m.member_id or m.generation < 0:
        return None
    if ownership.owned_generation != m.generation:
        return None
    return Lapsed(membership=m, assignment=ownership.owned, user_data=ownership.user_data)
