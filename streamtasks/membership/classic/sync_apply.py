"""The SyncGroup step of a classic member: :class:`SyncApply`.

After a JoinGroup answer the member sends SyncGroup (a leader's carries the group's assignment,
:meth:`.FollowUp.lead`) and reads the assignment the answer carries. Once the commit before any
revocation is done, the member applies what SyncGroup gave it:
the listener calls in KIP-429's order and the new holding (:class:`~streamtasks.membership.
common.holdings.Holdings`, with the assignment's user data and the sticky memory KIP-341 sends
with the next JoinGroup), the rebalance's latency, an early heartbeat for a cooperative member
(a follow-up rebalance is heard of soon) and the leader's follow-up (:class:`.followup.FollowUp`).
:class:`SyncApply` does that through the components the
:class:`~streamtasks.membership.classic.machine.ClassicMember` holds; the machine acts on the
:class:`.followup.Applied` it answers (rejoin, describe, join now).
"""

from __future__ import annotations

from collections.abc import Mapping

from assignors.partition.types import RebalanceProtocol
from streamtasks.membership.classic import phases as P
from streamtasks.membership.classic.config import MemberConfig
from streamtasks.membership.classic.followup import Applied, FollowUp
from streamtasks.membership.classic.metrics import RebalanceMetrics
from streamtasks.membership.classic.records import Link, Membership, Ownership
from streamtasks.membership.common.holdings import Holdings
from streamtasks.membership.common.link import CoordinatorLink
from streamtasks.protocol.classic_group import (
    JoinGroupResponse,
    SyncGroupAssignment,
    SyncGroupRequest,
    SyncGroupResponse,
)
from topology.ids import TopicPartition

__all__ = ["SyncApply"]


class SyncApply:
    """Applies an assignment; holds no state of its own (each component it moves owns its)."""

    __slots__ = ("_config", "_followup", "_held", "_link", "_metrics")

    def __init__(
        self,
        config: MemberConfig,
        held: Holdings[Ownership],
        followup: FollowUp,
        link: CoordinatorLink[Link],
        metrics: RebalanceMetrics,
    ) -> None:
        self._config = config
        self._held = held
        self._followup = followup
        self._link = link
        self._metrics = metrics

    def request(
        self, membership: Membership, metadata: Mapping[str, int] | None, resp: JoinGroupResponse
    ) -> tuple[SyncGroupRequest, tuple[str, ...]]:
        """The SyncGroup to send after ``resp`` (joined as ``membership``), and the leader's
        problems to report."""
        assignments: tuple[SyncGroupAssignment, ...] = ()
        problems: tuple[str, ...] = ()
        if membership.is_leader:
            assignments, problems = self._followup.lead(membership.protocol_name, metadata, resp)
        return P.sync_request(self._config, membership, assignments), problems

    def read(
        self, resp: SyncGroupResponse, membership: Membership, topics: tuple[str, ...], now_ms: int
    ) -> tuple[frozenset[TopicPartition], bytes] | str:
        """The assignment (partitions, user data) a successful SyncGroup answer carries, or why
        it is unusable (the rebalance failed)."""
        read = P.read_assignment(resp, membership.protocol_name, topics)
        if isinstance(read, str):
            self._metrics.rebalance_failed(now_ms)
        else:
            self._link.heard(now_ms)
        return read

    def apply(
        self,
        assigned: frozenset[TopicPartition],
        revoked: frozenset[TopicPartition],
        now_ms: int,
        user_data: bytes,
        membership: Membership,
        *,
        metadata: Mapping[str, int] | None,
        readopted: bool = False,
    ) -> Applied:
        """KIP-429 listener order: revoked (if any) → assignment → assigned (always).
        ``user_data``: the assignment's user data, carried by the AssignmentChanged;
        ``readopted``: a lapsed generation's assignment taken back, no rebalance (:mod:`.readopt`)."""
        generation = membership.generation
        self._held.assign(
            assigned,
            generation,
            now_ms,
            revoked=revoked,
            user_data=user_data,
            previous=P.sorted_tps(assigned),
            previous_generation=generation,
        )
        if readopted:
            self._metrics.readopted()
        else:
            self._metrics.rebalance_completed(now_ms)
        probe = self._config.followup_heartbeat_ms
        if probe and self._config.protocol is RebalanceProtocol.COOPERATIVE:
            # Hear of a follow-up rebalance (another member revoked and rejoined) soon, not an
            # interval from now: the follow-up's join waits for every member.
            self._link.beat_by(now_ms + probe)
        return self._followup.applied(assigned, revoked, membership.is_leader, metadata, now_ms)
