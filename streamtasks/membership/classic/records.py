"""The classic member's state as frozen records.

:class:`~streamtasks.membership.classic.machine.ClassicMember` holds one of each and is the only
code that assigns them (h11's rule: everything that changes the state machine lives in one
place). Each record groups the fields that change together, so a reset is one assignment of a
fresh record; :mod:`~streamtasks.membership.classic.phases` computes over them without changing
anything. :class:`Gate`, :class:`Purpose`, :class:`InFlight` and :class:`Requests` are shared with
the KIP-848 member (:mod:`streamtasks.membership.common`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from streamtasks.membership.common import Gate, InFlight, Purpose, Requests
from streamtasks.protocol.classic_group import UNKNOWN_GENERATION, UNKNOWN_MEMBER_ID
from topology.ids import TopicPartition

__all__ = [
    "Gate",
    "InFlight",
    "LeaderView",
    "Link",
    "Membership",
    "Ownership",
    "Purpose",
    "Rejoin",
    "Requests",
    "Round",
    "Subscribed",
]

_EMPTY: Mapping[str, int | None] = MappingProxyType({})


@dataclass(frozen=True, slots=True, kw_only=True)
class Subscribed:
    """What the application asked for: the topics, and the cluster's partition counts."""

    topics: tuple[str, ...]
    metadata: Mapping[str, int] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Membership:
    """Who the member is in the group, as the last JoinGroup answer said."""

    member_id: str = UNKNOWN_MEMBER_ID
    generation: int = UNKNOWN_GENERATION
    protocol_name: str | None = None
    leader_id: str = UNKNOWN_MEMBER_ID
    is_leader: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Ownership:
    """What the member owns, and what it remembers of its last assignment."""

    owned: frozenset[TopicPartition] = frozenset()
    owned_generation: int = UNKNOWN_GENERATION
    #: User data of the SyncGroup assignment applied now (b"": none); see AssignmentChanged.
    user_data: bytes = b""
    previous: tuple[TopicPartition, ...] = ()  # sticky userdata memory (KIP-341)
    previous_generation: int = UNKNOWN_GENERATION


@dataclass(frozen=True, slots=True, kw_only=True)
class Rejoin:
    """A rejoin asked for while stable (KIP-568, a heartbeat's REBALANCE_IN_PROGRESS, ...).

    The reason is sent with the next JoinGroup; only sending it clears the reason."""

    needed: bool = False
    reason: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Round:
    """The rebalance the member takes part in; ``Round()`` is a member with none under way."""

    join_sent: bool = False
    needs_join_prepare: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderView:
    """What the leader learnt at its last step."""

    group_topics: tuple[str, ...] = ()
    #: Partition counts of the group's topics when it assigned.
    snapshot: Mapping[str, int | None] = field(default_factory=lambda: _EMPTY)
    snapshot_lazy: bool = False  # KIP-814: counts unknown at SkipAssignment are learnt, not compared
    #: Its assignment withheld partitions (KIP-429 follow-up needed).
    followup_needed: bool = False
    #: KIP-814 SkipAssignment under COOPERATIVE: partitions of the group's topics that no
    #: member's JoinGroup claimed. What a previous incarnation of this leader withheld is
    #: among them, and nobody remembers to start the follow-up for it.
    unclaimed: frozenset[TopicPartition] = frozenset()


@dataclass(frozen=True, slots=True, kw_only=True)
class Link:
    """The coordinator, and the member's timers towards it (held by
    :class:`~streamtasks.membership.common.link.CoordinatorLink`)."""

    coordinator_known: bool
    find_retry_ms: int
    #: FindCoordinator failures in a row (the lookup backs off with them).
    find_failures: int = 0
    join_retry_ms: int
    hb_next_ms: int
    hb_last_ok_ms: int
    #: When the coordinator last vouched for this membership (a JoinGroup, or a heartbeat it
    #: answered without fencing the member). Unlike ``hb_last_ok_ms`` a coordinator lookup does
    #: not renew it: once a session timeout has passed without one, the coordinator may have
    #: expired the member and given its partitions to others.
    session_ok_ms: int = 0

    @classmethod
    def starting(cls, now_ms: int) -> Link:
        return cls(
            coordinator_known=False,
            find_retry_ms=now_ms,
            join_retry_ms=now_ms,
            hb_next_ms=now_ms,
            hb_last_ok_ms=now_ms,
            session_ok_ms=now_ms,
        )
