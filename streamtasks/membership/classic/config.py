"""Configuration of a classic group member and the protocol it derives from its assignors."""

from __future__ import annotations

from dataclasses import dataclass

from assignors.partition.types import PartitionAssignor, RebalanceProtocol
from streamtasks.errors import ConfigError
from streamtasks.membership.common.config import check_instance_id, check_timings

__all__ = ["MemberConfig", "select_protocol"]


def select_protocol(assignors: tuple[PartitionAssignor, ...]) -> RebalanceProtocol:
    """KIP-429: the highest rebalance protocol supported by *every* configured assignor.

    Raises :class:`ConfigError` when there is none (or no assignor at all).
    """
    if not assignors:
        raise ConfigError("a classic group member needs at least one partition assignor")
    common = set(RebalanceProtocol)
    for assignor in assignors:
        common &= set(assignor.supported_protocols())
    if not common:
        names = ", ".join(a.name for a in assignors)
        raise ConfigError(f"the assignors [{names}] have no rebalance protocol in common")
    return max(common)


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberConfig:
    """Everything a :class:`ClassicMember` needs to know up front.

    ``assignors`` are tried in preference order: JoinGroup offers one protocol per assignor in
    this order and the coordinator picks one that every member offers. ``generation_marker``
    (KIP-341, default on): the member puts its generation in its subscription and, as leader,
    ignores owned-partition claims made under an older generation. Turning it off exists only
    so the simulator can demonstrate the duplicate ownership the marker prevents: with the
    eager ``sticky`` assignor the leader then runs a legacy pre-KIP-341 mode that trusts every
    claim (:func:`streamtasks.membership.classic.leader.legacy_trust_claims`).
    """

    group_id: str
    topics: tuple[str, ...]
    assignors: tuple[PartitionAssignor, ...]
    group_instance_id: str | None = None
    session_timeout_ms: int = 45_000
    rebalance_timeout_ms: int = 300_000
    heartbeat_interval_ms: int = 3_000
    retry_backoff_ms: int = 100
    #: The longest wait between coordinator lookups that keep failing (doubling from
    #: ``retry_backoff_ms``; Kafka's ``retry.backoff.max.ms``).
    retry_backoff_max_ms: int = 1_000
    #: Requests other than JoinGroup without an answer after this long count as failed
    #: (JoinGroup waits ``rebalance_timeout_ms + request_timeout_ms``).
    request_timeout_ms: int = 30_000
    rack: str | None = None
    generation_marker: bool = True
    #: Treat owned partitions as lost when a JoinGroup answer's generation is more than one
    #: above the previous one: a generation completed without this member (a static member
    #: paused past the rebalance timeout), and Apache Kafka's coordinator then answers its
    #: Heartbeat, SyncGroup and OffsetCommit with ILLEGAL_GENERATION, which is where Kafka's own
    #: consumer declares its partitions lost; this rule does the same when the member's first
    #: word after the gap is a JoinGroup. On Apache Kafka a member that took part in every
    #: generation never sees a gap (measured, docs/testing.md). Turn it off on Tansu, which
    #: skips generation numbers for members that took part (the embedded test broker and the
    #: demo do so there).
    lose_on_missed_generation: bool = True
    protocol_type: str = "consumer"
    #: COOPERATIVE only: heartbeat this long after each completed rebalance (then at the
    #: interval again; 0: off). A member that revoked partitions rejoins at once for KIP-429's
    #: follow-up, which then waits for every other member's next heartbeat; without this, one
    #: whole interval after the rebalance, the revoked partitions unowned all along
    #: (docs/simulation.md, "Where unowned time goes in a rolling bounce"). Timing only: an
    #: ordinary Heartbeat, one more per member per rebalance.
    followup_heartbeat_ms: int = 100

    def __post_init__(self) -> None:
        object.__setattr__(self, "topics", tuple(sorted(set(self.topics))))
        object.__setattr__(self, "assignors", tuple(self.assignors))
        if not self.group_id:
            raise ConfigError("group_id must not be empty")
        names = [a.name for a in self.assignors]
        if len(set(names)) != len(names):
            raise ConfigError(f"assignor names must be unique, got {names}")
        check_timings(
            positive=(
                ("session_timeout_ms", self.session_timeout_ms),
                ("rebalance_timeout_ms", self.rebalance_timeout_ms),
                ("heartbeat_interval_ms", self.heartbeat_interval_ms),
                ("request_timeout_ms", self.request_timeout_ms),
            ),
            non_negative=(
                ("retry_backoff_ms", self.retry_backoff_ms),
                ("followup_heartbeat_ms", self.followup_heartbeat_ms),
                ("retry_backoff_max_ms", self.retry_backoff_max_ms),
            ),
        )
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise ConfigError(
                f"heartbeat_interval_ms ({self.heartbeat_interval_ms}) must be lower than "
                f"session_timeout_ms ({self.session_timeout_ms})"
            )
        check_instance_id(self.group_instance_id)
        select_protocol(self.assignors)

    @property
    def protocol(self) -> RebalanceProtocol:
        """The rebalance protocol this member follows (see :func:`select_protocol`)."""
        return select_protocol(self.assignors)

    @property
    def is_static(self) -> bool:
        """KIP-345 static membership: a ``group_instance_id`` is configured."""
        return self.group_instance_id is not None
