"""What a classic leader step returns, whoever computes it: the consumer-protocol leader
(:mod:`streamtasks.membership.classic.leader`) or an assignor that owns its wire format
(:mod:`streamtasks.membership.classic.foreign`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from assignors.partition.types import MemberId
from streamtasks.protocol.classic_group import SyncGroupAssignment
from topology.ids import TopicPartition

__all__ = ["LeaderResult"]


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderResult:
    """What the leader sends in SyncGroup, and what it learnt."""

    assignments: tuple[SyncGroupAssignment, ...]
    #: Partitions per member (every JoinGroup member, sorted), as encoded.
    assignment: Mapping[MemberId, tuple[TopicPartition, ...]]
    group_topics: tuple[str, ...]
    followup_needed: bool
    problems: tuple[str, ...]
