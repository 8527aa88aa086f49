"""The classic member's read-only view: :class:`MemberView`.

What :class:`~streamtasks.membership.classic.machine.ClassicMember` shows of its records (its
member id, generation, what it owns, whether the coordinator is known), one
:class:`~streamtasks.membership.common.view.ReadOnly` line a value, kept apart from the machine
that assigns those records.
"""

from __future__ import annotations

from collections.abc import Mapping

from assignors.partition.types import RebalanceProtocol
from streamtasks.membership.classic.config import MemberConfig
from streamtasks.membership.classic.metrics import RebalanceMetrics
from streamtasks.membership.classic.states import MemberState as S
from streamtasks.membership.common.view import ReadOnly
from topology.ids import TopicPartition

__all__ = ["MemberView"]


class MemberView:
    """The read-only properties of a classic member (the machine holds the records)."""

    __slots__ = ()

    _config: MemberConfig
    _protocol: RebalanceProtocol
    _metrics: RebalanceMetrics

    state = ReadOnly[S]("_k.state")
    member_id = ReadOnly[str]("_membership.member_id", "The coordinator's id for it ('': not joined yet).")
    generation = ReadOnly[int]("_membership.generation", "Of the last JoinGroup that succeeded (-1: none).")
    owned_generation = ReadOnly[int]("_held.record.owned_generation", "The generation of what it owns (-1).")
    protocol_name = ReadOnly[str | None]("_membership.protocol_name", "The assignor the coordinator chose.")
    owned_partitions = ReadOnly[frozenset[TopicPartition]]("_held.record.owned")
    assignment_user_data = ReadOnly[bytes]("_held.record.user_data", "Of the assignment it owns (b'': none).")
    is_leader = ReadOnly[bool]("_membership.is_leader", "The last JoinGroup answer named it the leader.")
    leader_id = ReadOnly[str]("_membership.leader_id", "The leader the last JoinGroup answer named.")
    group_topics = ReadOnly[tuple[str, ...]]("_followup.view.group_topics", "Leader: the group's topics.")
    subscription = ReadOnly[tuple[str, ...]]("_sub.topics")
    rejoin_needed = ReadOnly[bool]("_rejoin.needed", "A rejoin was asked for and is not sent yet.")
    coordinator_known = ReadOnly[bool]("_link.known")

    @property
    def config(self) -> MemberConfig:  # a property: the runtime's LoopMember protocol reads it
        return self._config

    @property
    def protocol(self) -> RebalanceProtocol | None:
        """The rebalance protocol this member follows; ``None`` once it left the group."""
        return None if self.state is S.CLOSED else self._protocol

    def metrics(self, now_ms: int) -> Mapping[str, float]:
        """KIP-429's rebalance metrics by name (see :mod:`.metrics`)."""
        return self._metrics.snapshot(now_ms)
