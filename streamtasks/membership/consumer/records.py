"""The KIP-848 member's state as frozen records.

:class:`~streamtasks.membership.consumer.machine.ConsumerMember` holds one of each and is the
only code that assigns them (h11's rule). Each record groups the fields that change together,
so a reset is one assignment of a fresh record; :mod:`~streamtasks.membership.consumer.phases`
computes over them without changing anything. The commit gate (:class:`Gate`, :class:`Purpose`,
held by :class:`~streamtasks.membership.common.gate.CommitGate`) and the requests in flight
(:class:`Requests`) are every member's records (:mod:`streamtasks.membership.common`).
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from streamtasks.membership.common import Gate, InFlight, Purpose, Requests
from streamtasks.membership.consumer.events import AssignorMetadata
from streamtasks.protocol.assignment_rpc import (
    ConsumerGroupInstallAssignmentResponse,
    ConsumerGroupPrepareAssignmentResponse,
)
from streamtasks.protocol.classic_group import OffsetCommitResponse
from streamtasks.protocol.consumer_group import (
    ClientAssignor,
    ConsumerGroupHeartbeatResponse,
    TopicIdPartitions,
)
from topology.ids import TopicPartition

__all__ = [
    "ANSWERS",
    "Api",
    "Cluster",
    "Gate",
    "InFlight",
    "Job",
    "Link",
    "Membership",
    "Ownership",
    "Purpose",
    "Requests",
    "Round",
    "Sent",
    "Subscribed",
    "Target",
]


class Api(enum.Enum):
    """The coordinator APIs the member calls."""

    HEARTBEAT = "ConsumerGroupHeartbeat"
    PREPARE = "ConsumerGroupPrepareAssignment"
    INSTALL = "ConsumerGroupInstallAssignment"
    OFFSET_COMMIT = "OffsetCommit"


#: The response type that answers each API (the kernel checks every answer against it).
ANSWERS: Mapping[Api, type] = MappingProxyType(
    {
        Api.HEARTBEAT: ConsumerGroupHeartbeatResponse,
        Api.PREPARE: ConsumerGroupPrepareAssignmentResponse,
        Api.INSTALL: ConsumerGroupInstallAssignmentResponse,
        Api.OFFSET_COMMIT: OffsetCommitResponse,
    }
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Target:
    """An assignment the coordinator sent: what to own at ``epoch`` (topic ids, as received).
    ``unreleased``: the seed KIP's pending partitions, assigned to this member but still owned
    by their previous owner (given with a later heartbeat answer)."""

    epoch: int
    partitions: tuple[TopicIdPartitions, ...]
    unreleased: tuple[TopicIdPartitions, ...] = ()
    error: int = 0
    metadata_version: int = 0
    metadata_bytes: bytes = b""


@dataclass(frozen=True, slots=True, kw_only=True)
class Job:
    """The client-side assignment this member computes: ``prepare`` or ``install`` in flight
    (held by :class:`~streamtasks.membership.consumer.assignment_job.AssignmentJob`)."""

    phase: Api
    request_id: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Sent:
    """What the coordinator has from this member (the fields sent since the last full heartbeat)."""

    topics: tuple[str, ...]
    assignors: tuple[ClientAssignor, ...]
    owned: frozenset[TopicPartition]


@dataclass(frozen=True, slots=True, kw_only=True)
class Subscribed:
    """What the member tells the coordinator about itself: its topics, and per client-side
    assignor its metadata and the ``Reason`` that ``enforce_rebalance`` steps."""

    topics: tuple[str, ...]
    assignor_metadata: Mapping[str, AssignorMetadata] = field(default_factory=dict)
    reasons: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class Cluster:
    """The cluster's topics as the last ``MetadataUpdated`` said (KIP-848 names them by id)."""

    counts: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    ids: Mapping[str, uuid.UUID] = field(default_factory=lambda: MappingProxyType({}))
    names: Mapping[uuid.UUID, str] = field(default_factory=lambda: MappingProxyType({}))

    @classmethod
    def of(cls, counts: Mapping[str, int], topic_ids: Mapping[str, uuid.UUID]) -> Cluster:
        ids = dict(topic_ids)
        return cls(counts=dict(counts), ids=ids, names={topic_id: name for name, topic_id in ids.items()})


@dataclass(frozen=True, slots=True, kw_only=True)
class Membership:
    """Who the member is in the group: its epoch, whether the coordinator may know it (a
    heartbeat went out), and what the coordinator has heard from it."""

    epoch: int = 0
    in_group: bool = False
    sent: Sent | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Ownership:
    """What the member owns, and the assignment metadata it was given with it."""

    owned: frozenset[TopicPartition] = frozenset()
    owned_generation: int = 0  # the member epoch it was given them in
    user_data: bytes = b""
    error: int = 0
    version: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class Round:
    """The reconciliation under way; ``Round()`` is a member with none."""

    #: The latest assignment received and not yet applied; the last one applied.
    pending: Target | None = None
    last_target: Target | None = None
    revoked_this_round: bool = False
    #: The acknowledging heartbeat's request id (0: due, not sent yet; None: none owed).
    ack_rid: int | None = None
    #: Since when the coordinator's latest assignment names unreleased partitions (None: it
    #: names none); the member heartbeats sooner while it waits for them.
    unreleased_since_ms: int | None = None
    #: Since when the member waits for the new assignment its assignor's ``Reason`` asked for
    #: (``enforce_rebalance``; None: it waits for none), and its epoch when it asked: it
    #: heartbeats sooner until an answer moves it past that epoch.
    asked_since_ms: int | None = None
    asked_at_epoch: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class Link:
    """The coordinator, and the member's timers towards it (held by
    :class:`~streamtasks.membership.common.link.CoordinatorLink`)."""

    coordinator_known: bool
    find_retry_ms: int
    #: FindCoordinator failures in a row (the lookup backs off with them).
    find_failures: int = 0
    interval_ms: int
    hb_next_ms: int
    #: When the last answered heartbeat was SENT (the coordinator's session timer restarted
    #: when it processed it, later): the session deadline counts from here.
    hb_last_ok_ms: int
    #: When the heartbeat in flight was sent (one at a time).
    hb_sent_ms: int = 0

    @classmethod
    def starting(cls, now_ms: int, interval_ms: int) -> Link:
        return cls(
            coordinator_known=False,
            find_retry_ms=now_ms,
            interval_ms=interval_ms,
            hb_next_ms=now_ms,
            hb_last_ok_ms=now_ms,
        )
