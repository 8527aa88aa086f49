"""Partition assignor input and output for plain consumer groups (KIP-429's
``ConsumerPartitionAssignor`` shape, without IO)."""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import ClassVar, Protocol, runtime_checkable

from topology.ids import TopicPartition

__all__ = [
    "GroupAssignment",
    "GroupSubscription",
    "MemberId",
    "PartitionAssignor",
    "PartitionNumbers",
    "RebalanceProtocol",
    "Subscription",
]

MemberId = str


class RebalanceProtocol(enum.IntEnum):
    """KIP-429's ``RebalanceProtocol``; higher is newer. The group uses the highest one that
    every configured assignor supports."""

    EAGER = 0
    COOPERATIVE = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class Subscription:
    """One member's subscription as the leader decodes it (consumer protocol v0-v3)."""

    topics: tuple[str, ...]
    owned_partitions: tuple[TopicPartition, ...] = ()
    generation: int = -1
    rack: str | None = None
    group_instance_id: str | None = None
    user_data: bytes = b""


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupSubscription:
    """All members' subscriptions plus the partition count of every subscribed topic."""

    members: Mapping[MemberId, Subscription]
    partitions_per_topic: Mapping[str, int]
    #: Rack of each partition's replicas, for rack-aware assignors; empty when unknown.
    partition_racks: Mapping[TopicPartition, frozenset[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "members", MappingProxyType(dict(self.members)))
        object.__setattr__(self, "partitions_per_topic", MappingProxyType(dict(self.partitions_per_topic)))
        object.__setattr__(self, "partition_racks", MappingProxyType(dict(self.partition_racks)))


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionNumbers:
    """A :class:`GroupAssignment` as the partition numbers an assignor computed it on.

    Topic ``t``'s partition ``p`` (``0 <= p < counts[t]``) is number ``starts[t] + p``, and
    ascending numbers are ascending partitions. ``members[i]`` holds, sorted, the numbers of the
    ``i``-th member of ``GroupAssignment.members``; no number appears twice. The assignor
    vouches that they are the assignment's partitions: :func:`assignors.cooperative.assign`
    then works on them instead of reading and checking every partition again."""

    starts: Mapping[str, int]
    counts: Mapping[str, int]
    members: Sequence[Sequence[int]]


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupAssignment:
    """Partitions per member. ``followup_needed``: a cooperative round withheld partitions
    that move between owners, so the group must rebalance once more to hand them over.

    ``user_data``: the assignment user data per member (the consumer protocol's
    ``Assignment.UserData``); a member without an entry gets none. An assignor that returns
    user data describes in it what each member runs, so it must be cooperative-safe itself
    (see :func:`assignors.cooperative.assign`)."""

    members: Mapping[MemberId, tuple[TopicPartition, ...]]
    followup_needed: bool = False
    user_data: Mapping[MemberId, bytes] = field(default_factory=dict)
    #: The same assignment as partition numbers, when :meth:`from_sorted` was given them.
    numbers: PartitionNumbers | None = field(default=None, init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(
            self,
            "members",
            MappingProxyType({m: tuple(sorted(p)) for m, p in sorted(self.members.items())}),
        )
        object.__setattr__(self, "user_data", MappingProxyType(dict(sorted(self.user_data.items()))))

    @classmethod
    def from_sorted(
        cls,
        members: Mapping[MemberId, tuple[TopicPartition, ...]],
        *,
        followup_needed: bool = False,
        user_data: Mapping[MemberId, bytes] | None = None,
        numbers: PartitionNumbers | None = None,
    ) -> GroupAssignment:
        """Build from ``members`` that are *already* in member-id order with every tuple sorted,
        skipping the sort (which dominates for 100k partitions). The caller guarantees the
        order; assignors that compute on sorted partition numbers use this, and hand the
        numbers over too (:class:`PartitionNumbers`)."""
        self = object.__new__(cls)
        object.__setattr__(self, "members", MappingProxyType(dict(members)))
        object.__setattr__(self, "followup_needed", followup_needed)
        object.__setattr__(self, "user_data", MappingProxyType(dict(sorted((user_data or {}).items()))))
        object.__setattr__(self, "numbers", numbers)
        return self


@runtime_checkable
class PartitionAssignor(Protocol):
    """A pluggable partition assignor. Implementations must be deterministic and pure."""

    name: ClassVar[str]
    version: ClassVar[int]

    def supported_protocols(self) -> tuple[RebalanceProtocol, ...]: ...

    def assign(self, group: GroupSubscription) -> GroupAssignment: ...
