"""Assignors that own their whole wire format (a foreign group protocol such as faust's).

A classic member normally offers, per assignor, a consumer protocol v3 subscription, and its
leader decodes every member's subscription and encodes every assignment in that protocol
(:mod:`streamtasks.membership.classic.leader`). Some protocols an upgrade has to speak lay
their bytes out otherwise: faust's ``"faust"`` protocol (aiokafka's v0 layout under version 4,
a compressed JSON assignment whose partition order faust members check). An assignor that
implements :class:`ForeignProtocolAssignor` writes its own JoinGroup metadata and, as leader,
its own SyncGroup assignments; the member still reads what it is given with the consumer
protocol's assignment layout (the same in every version and in aiokafka's).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar, Protocol, runtime_checkable

from assignors.partition.types import RebalanceProtocol
from streamtasks.membership.classic.leader_result import LeaderResult
from streamtasks.protocol.classic_group import JoinGroupMember
from topology.ids import TopicPartition

__all__ = ["ForeignProtocolAssignor"]


@runtime_checkable
class ForeignProtocolAssignor(Protocol):
    """See the module docstring."""

    name: ClassVar[str]
    version: ClassVar[int]

    def supported_protocols(self) -> tuple[RebalanceProtocol, ...]: ...

    def join_metadata(self, topics: tuple[str, ...], previous: tuple[TopicPartition, ...]) -> bytes:
        """The JoinGroup metadata to offer, given the partitions held before this rebalance."""
        ...

    def lead_foreign(
        self, members: tuple[JoinGroupMember, ...], partitions_per_topic: Mapping[str, int]
    ) -> LeaderResult:
        """The leader step over the JoinGroup response's members (every one gets an entry)."""
        ...
