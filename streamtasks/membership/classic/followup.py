"""The leader's step and KIP-429's follow-up rebalance, as a classic member keeps them:
:class:`FollowUp`.

A cooperative leader may withhold partitions another member still owns; the member that revokes
them rejoins, and that rejoin is the follow-up rebalance that hands them over. When nobody starts
it (the member was replaced without a rebalance, or had nothing left to revoke), the leader does,
a heartbeat interval after its assignment and never twice in a row. A KIP-814 leader told to
skip the assignment cannot know what its previous incarnation withheld: it asks DescribeGroups
whether the partitions nobody claimed are assigned. A member that lost what its JoinGroup
claimed (a missed generation) rejoins at once, since the leader may wait for it.

:class:`FollowUp` is the one owner of what the leader learnt (:class:`.records.LeaderView`), the
follow-up's time and whether the leader forced the rebalance under way; the
:class:`~streamtasks.membership.classic.machine.ClassicMember` holds one and acts on what it
answers (:class:`Applied`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from streamtasks.membership.classic import phases as P
from streamtasks.membership.classic.config import MemberConfig
from streamtasks.membership.classic.records import LeaderView
from streamtasks.protocol.classic_group import DescribeGroupResponse, JoinGroupResponse, SyncGroupAssignment
from topology.ids import TopicPartition

__all__ = ["Applied", "FollowUp"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Applied:
    """What follows an applied assignment: the rejoins to ask for (their reasons, in order),
    whether to ask DescribeGroups, whether to join at once."""

    rejoin: tuple[str, ...] = ()
    describe: bool = False
    join_now: bool = False


class FollowUp:
    """The leader's view and the follow-up rebalance; see the module's docstring."""

    __slots__ = ("_config", "_due_ms", "_forced", "_stale_claims", "_view")

    def __init__(self, config: MemberConfig) -> None:
        self._config = config
        self._view = LeaderView()
        self._new_round()

    def _new_round(self) -> None:
        #: Leader, STABLE: rejoin at this time unless a rebalance started (None: not armed).
        self._due_ms: int | None = None
        #: Leader: the rebalance in flight is one it forced (at most one in a row).
        self._forced = False
        #: What this round's JoinGroup claimed and the member then lost (a missed generation).
        self._stale_claims: frozenset[TopicPartition] = frozenset()

    @property
    def view(self) -> LeaderView:
        return self._view

    @property
    def due_ms(self) -> int | None:
        return self._due_ms

    def reset(self) -> None:
        """A new round (reset, failed, closed): no follow-up armed, nothing forced or claimed."""
        self._new_round()

    def rejoining(self) -> None:
        """A rejoin starts: the group's topics are learnt again if this member leads."""
        self._view = replace(self._view, group_topics=())

    def join_sent(self) -> None:
        """The JoinGroup sent is the follow-up."""
        self._due_ms = None

    def claimed(self, lost: frozenset[TopicPartition]) -> None:
        """What the JoinGroup the leader answers claimed and this member has lost since."""
        self._stale_claims = lost

    def lead(
        self, protocol_name: str | None, metadata: Mapping[str, int] | None, resp: JoinGroupResponse
    ) -> tuple[tuple[SyncGroupAssignment, ...], tuple[str, ...]]:
        """The leader's step: the SyncGroup assignments and the problems to report."""
        step = P.leader_step(self._config, protocol_name, metadata, resp)
        self._view = step.view
        return step.assignments, step.problems

    def applied(
        self,
        assigned: frozenset[TopicPartition],
        revoked: frozenset[TopicPartition],
        leader: bool,
        metadata: Mapping[str, int] | None,
        now_ms: int,
    ) -> Applied:
        """An assignment was applied (``revoked``: what it took away first)."""
        lost_claims = bool(self._stale_claims - assigned)
        reasons: list[str] = []
        if revoked:
            reasons.append("partitions revoked: follow-up rebalance")
        elif lost_claims:
            # Lost after a missed generation, yet claimed in this round's JoinGroup: the leader
            # withholds them from their new owner until this member revokes them and rejoins.
            # Nothing is left to revoke; rejoining is what the leader waits for.
            reasons.append("partitions claimed in JoinGroup were lost: follow-up rebalance")
        # KIP-814: a leader told to skip the assignment cannot know what its previous process
        # withheld; partitions nobody claims and it was not given may be such.
        unclaimed = self._view.unclaimed - assigned if leader else frozenset()
        if leader and (self._view.followup_needed or unclaimed) and not self._forced:
            # KIP-429: the member that revokes the withheld partitions starts the follow-up;
            # if none has started one heartbeat interval from now (that member was replaced
            # without a rebalance, or had nothing left to revoke), the leader does. Never twice
            # in a row: if its own follow-up withheld again, the claimant is a member that does
            # not rejoin (a dead static member); its session timeout decides, not a storm.
            self._due_ms = now_ms + self._config.heartbeat_interval_ms
        self._forced = False
        if leader and self.metadata_changed(metadata):
            reasons.append("leader saw a partition count change")
        # Every member's current assignment tells a withheld partition from one a previous
        # generation handed out fresh: only the first needs the follow-up.
        describe = bool(unclaimed) and self._due_ms is not None
        return Applied(rejoin=tuple(reasons), describe=describe, join_now=bool(revoked) or lost_claims)

    def described(self, resp: DescribeGroupResponse, now_ms: int) -> str | None:
        """The skip-assignment leader's check: cancel the follow-up when every partition it
        could not account for is assigned to some member; start it now when one is not. A
        string: why the answer cannot tell (the follow-up is kept)."""
        if self._due_ms is None:
            return None  # a rebalance came since: it is the follow-up
        unassigned = P.unassigned_partitions(self._view.unclaimed, resp)
        if isinstance(unassigned, str):
            return f"DescribeGroups: {unassigned}; follow-up rebalance kept"
        if unassigned:
            self._due_ms = now_ms
        elif not self._view.followup_needed:
            self._due_ms = None
        return None

    def force(self, now_ms: int) -> bool:
        """Whether the leader starts the follow-up itself now (it is due and nobody did)."""
        if self._due_ms is None or now_ms < self._due_ms:
            return False
        self._due_ms, self._forced = None, True
        return True

    def metadata_changed(self, metadata: Mapping[str, int] | None) -> bool:
        """Leader: has a partition count of a group topic changed since the assignment?"""
        changed, self._view = P.metadata_changed(self._view, metadata)
        return changed
