"""Configuration of a KIP-848 consumer group member."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from assignors.partition.hooks import subscription_user_data
from assignors.partition.types import PartitionAssignor
from streamtasks.errors import ConfigError
from streamtasks.membership.common.config import check_instance_id, check_timings
from streamtasks.membership.consumer.events import AssignorMetadata
from topology.ids import TopicPartition

__all__ = ["UNRELEASED_WINDOW_INTERVALS", "ConsumerMemberConfig", "default_metadata", "metadata_from_hook"]

#: How long (in heartbeat intervals) a member waiting for unreleased partitions heartbeats
#: sooner (``ConsumerMemberConfig.unreleased_heartbeat_ms``); the normal interval after that.
UNRELEASED_WINDOW_INTERVALS = 3


def default_metadata(assignor: PartitionAssignor) -> AssignorMetadata:
    """Versions 0..``assignor.version``, written at ``assignor.version``, no bytes."""
    return AssignorMetadata(
        minimum_version=0, maximum_version=assignor.version, metadata_version=assignor.version
    )


def metadata_from_hook(
    assignor: PartitionAssignor,
    *,
    topics: tuple[str, ...],
    previous: tuple[TopicPartition, ...] = (),
    epoch: int | None = None,
) -> AssignorMetadata:
    """:func:`default_metadata` carrying the bytes the assignor writes itself (its
    ``subscription_user_data`` hook, :mod:`assignors.partition.hooks`, the one a classic member
    calls for JoinGroup): for ``ConsumerMemberConfig.assignor_metadata`` at start, and for an
    ``AssignorMetadataChanged`` when what the assignor writes changed. ``previous``/``epoch``:
    the member's assignment and the epoch it is owned under. The assignment's side of the same
    assignor is its ``on_assignment`` hook, fed ``AssignmentChanged.user_data`` (the metadata
    bytes the installing member's assignor gave this member)."""
    return AssignorMetadata(
        minimum_version=0,
        maximum_version=assignor.version,
        metadata_version=assignor.version,
        metadata_bytes=subscription_user_data(assignor, topics=topics, previous=previous, generation=epoch),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerMemberConfig:
    """Everything a :class:`ConsumerMember` needs to know up front.

    ``member_id``: KIP-848 v1 has the member generate its id (a UUID string); the driver makes
    one and keeps it across rejoins (the sans-IO member has no randomness).

    Assignment: ``server_assignor`` names a coordinator-side assignor (``None``: the
    coordinator's default); ``client_assignors`` (in preference order, exclusive with
    ``server_assignor``) are run by this member when the coordinator asks it to compute the
    group's assignment (seed KIP-848). ``assignor_metadata`` is what it advertises for each
    (default :func:`default_metadata`); ``AssignorMetadataChanged`` replaces it later.

    ``session_timeout_ms``: the coordinator's session timeout as the member assumes it until
    a ``SessionTimeoutKnown`` event gives the one the coordinator uses (the runtime reads the
    group's effective ``consumer.session.timeout.ms`` at start). When no heartbeat sent that
    long ago or later was answered, the coordinator may have removed it: its partitions are
    lost and it rejoins (the classic member's rule, kept here so that a member cut off from
    the coordinator gives up partitions that are being handed to others). Counted from the
    send time of the last answered heartbeat: the coordinator restarted its timer when it
    processed that heartbeat, after it was sent.

    ``unreleased_heartbeat_ms``: while the coordinator's latest assignment names partitions
    still owned by another member (the seed KIP's pending partitions), heartbeat this soon
    after each answer instead of after the interval, for at most
    ``UNRELEASED_WINDOW_INTERVALS`` heartbeat intervals from when they were first named, so
    the partitions arrive soon after their previous owner released them (0: off; a value not
    below the interval changes nothing). A coordinator that sends no pending partitions
    (Apache Kafka's) never triggers it. The same after ``enforce_rebalance`` (a client-side
    assignor's ``Reason``): heartbeat this soon until an answer moves the member past the epoch
    it asked at, within the same window from when it asked.
    """

    group_id: str
    member_id: str
    topics: tuple[str, ...]
    group_instance_id: str | None = None
    rack: str | None = None
    server_assignor: str | None = None
    client_assignors: tuple[PartitionAssignor, ...] = ()
    assignor_metadata: Mapping[str, AssignorMetadata] = field(default_factory=dict)
    rebalance_timeout_ms: int = 300_000
    session_timeout_ms: int = 45_000
    #: Until the coordinator's first answer says otherwise.
    heartbeat_interval_ms: int = 5_000
    retry_backoff_ms: int = 100
    #: The longest wait between coordinator lookups that keep failing (doubling from
    #: ``retry_backoff_ms``; Kafka's ``retry.backoff.max.ms``).
    retry_backoff_max_ms: int = 1_000
    request_timeout_ms: int = 30_000
    unreleased_heartbeat_ms: int = 100

    def __post_init__(self) -> None:
        object.__setattr__(self, "topics", tuple(sorted(set(self.topics))))
        object.__setattr__(self, "client_assignors", tuple(self.client_assignors))
        if not self.group_id:
            raise ConfigError("group_id must not be empty")
        if not self.member_id:
            raise ConfigError("member_id must not be empty (KIP-848 v1: the member generates it)")
        names = [a.name for a in self.client_assignors]
        if len(set(names)) != len(names):
            raise ConfigError(f"client assignor names must be unique, got {names}")
        if self.server_assignor is not None and self.client_assignors:
            raise ConfigError("server_assignor and client_assignors can't be used together")
        unknown = sorted(set(self.assignor_metadata) - set(names))
        if unknown:
            raise ConfigError(f"assignor_metadata for assignors not configured: {unknown}")
        metadata = {
            a.name: self.assignor_metadata.get(a.name, default_metadata(a)) for a in self.client_assignors
        }
        for name, m in metadata.items():
            if not (
                -1 <= m.minimum_version <= m.metadata_version <= m.maximum_version and m.maximum_version >= 0
            ):
                raise ConfigError(f"assignor {name!r}: invalid metadata versions {m}")
        object.__setattr__(self, "assignor_metadata", MappingProxyType(metadata))
        check_timings(
            positive=(
                ("rebalance_timeout_ms", self.rebalance_timeout_ms),
                ("session_timeout_ms", self.session_timeout_ms),
                ("heartbeat_interval_ms", self.heartbeat_interval_ms),
                ("request_timeout_ms", self.request_timeout_ms),
            ),
            non_negative=(
                ("retry_backoff_ms", self.retry_backoff_ms),
                ("retry_backoff_max_ms", self.retry_backoff_max_ms),
                ("unreleased_heartbeat_ms", self.unreleased_heartbeat_ms),
            ),
        )
        check_instance_id(self.group_instance_id)

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def client_side(self) -> bool:
        return bool(self.client_assignors)
