"""What every streams-group write shares: the records it returns, replayed on a copy of the
group as they are made (so the write reads its own changes and the coordinator's group is
left untouched until :meth:`StreamsGroupCoordinator.apply`), its timer operations, and the
coordinator's settings."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Generic, TypeVar

from assignors.types import AssignmentConfigs, TaskAssignor
from streamtasks.coordinator.streams.configured import ConfiguredTopology, configure, topic_fingerprint
from streamtasks.coordinator.streams.group import StreamsGroup
from streamtasks.coordinator.streams.records import (
    StreamsCurrentAssignmentTombstone,
    StreamsGroupRecord,
    StreamsMemberTombstone,
    StreamsRecord,
    StreamsTargetMemberTombstone,
)
from streamtasks.coordinator.timers import CancelTimer, TimerKey, TimerKind, TimerOp
from streamtasks.coordinator.types import MetadataImage
from streamtasks.errors import ConfigError

__all__ = ["StreamsCoordinatorConfig", "StreamsResult", "StreamsWrite"]

R = TypeVar("R")


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsResult(Generic[R]):
    """A write's outcome: ``records`` to append and replay in order, then ``timers``."""

    records: tuple[StreamsRecord, ...]
    response: R
    timers: tuple[TimerOp, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsCoordinatorConfig:
    """Broker-side settings of streams groups (``group.streams.*``) and the task assignor's.

    ``assignor``: the task assignor's name in the registry (``assignors.registry``):
    ``sticky`` places as Apache Kafka's broker does (no warm-ups), ``high_availability`` adds
    KIP-441 warm-ups and the lag-triggered hand-over. ``group_assignors``: (group id, name)
    pairs, a group's own assignor instead of ``assignor``."""

    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 5_000
    assignor: str = "sticky"
    num_standby_replicas: int = 0
    acceptable_recovery_lag: int = 10_000
    max_warmup_replicas: int = 2
    probing_rebalance_interval_ms: int = 600_000
    task_offset_interval_ms: int = 60_000
    max_group_size: int | None = None
    group_assignors: tuple[tuple[str, str], ...] = ()
    #: Kafka's ``group.streams.initial.rebalance.delay.ms`` (Apache Kafka's default 3,000): the
    #: first target of a group that a member joins empty waits this long for more members
    #: (heartbeats meanwhile answer ASSIGNMENT_DELAYED with no tasks). 0: none.
    initial_rebalance_delay_ms: int = 0
    #: Kafka's ``group.streams.assignment.interval.ms`` (Apache Kafka's default 1,000): a new
    #: target is computed at most once per interval, by the first heartbeat after it that finds
    #: one owed (ASSIGNMENT_DELAYED until then). 0: at every epoch bump.
    assignment_interval_ms: int = 0

    def assignor_name(self, group_id: str) -> str:
        """The task assignor's name for ``group_id``."""
        return dict(self.group_assignors).get(group_id, self.assignor)

    def __post_init__(self) -> None:
        if self.heartbeat_interval_ms <= 0 or self.session_timeout_ms <= self.heartbeat_interval_ms:
            raise ConfigError("streams coordinator: need 0 < heartbeat_interval_ms < session_timeout_ms")
        if self.task_offset_interval_ms <= 0:
            raise ConfigError("streams coordinator: task_offset_interval_ms must be > 0")
        if self.initial_rebalance_delay_ms < 0 or self.assignment_interval_ms < 0:
            raise ConfigError(
                "streams coordinator: initial_rebalance_delay_ms and assignment_interval_ms must be >= 0"
            )
        if self.max_group_size is not None and self.max_group_size < 1:
            raise ConfigError("streams coordinator: max_group_size must be >= 1")
        self.assignment_configs()  # the assignor's bounds, checked once here

    def assignment_configs(self) -> AssignmentConfigs:
        return AssignmentConfigs(
            num_standby_replicas=self.num_standby_replicas,
            acceptable_recovery_lag=self.acceptable_recovery_lag,
            max_warmup_replicas=self.max_warmup_replicas,
            probing_rebalance_interval_ms=self.probing_rebalance_interval_ms,
        )


class StreamsWrite:
    """One write in progress on one group."""

    __slots__ = (
        "_start_epoch",
        "assignor",
        "config",
        "g",
        "image",
        "initial_delay",
        "now_ms",
        "records",
        "timers",
    )

    def __init__(
        self,
        group: StreamsGroup | None,
        group_id: str,
        *,
        config: StreamsCoordinatorConfig,
        assignor: TaskAssignor,
        image: MetadataImage,
        now_ms: int,
        initial_delay: bool = False,
    ) -> None:
        self.g = group.copy() if group is not None else StreamsGroup(group_id)
        self.config, self.assignor, self.image, self.now_ms = config, assignor, image, now_ms
        #: The group's initial rebalance delay is running (its timer armed, or armed by this write).
        self.initial_delay = initial_delay
        self.records: list[StreamsRecord] = []
        self.timers: list[TimerOp] = []
        self._start_epoch: int | None = None  # the epoch before this write's bump, once bumped

    def emit(self, record: StreamsRecord) -> None:
        self.records.append(record)
        self.g.replay(record)

    def result(self, response: R) -> StreamsResult[R]:
        return StreamsResult(records=tuple(self.records), response=response, timers=tuple(self.timers))

    def configured(self) -> ConfiguredTopology:
        return configure(self.g.topology, self.image)

    def bump(self, **changes: object) -> None:
        """A new group epoch (a new target is owed), with any other change of the group record;
        one write moves the epoch once however many things changed."""
        meta = self.g.meta or StreamsGroupRecord(group_id=self.g.group_id, epoch=0)
        epoch = self._start_epoch + 1 if self._start_epoch is not None else meta.epoch + 1
        self._start_epoch = meta.epoch if self._start_epoch is None else self._start_epoch
        nxt = replace(meta, epoch=epoch, **changes)  # type: ignore[arg-type]
        if nxt != meta:
            self.emit(nxt)

    def check_metadata(self) -> None:
        """Bump the epoch when the topology's topics changed since they were last seen."""
        seen = topic_fingerprint(self.g.topology, self.image)
        if self.g.meta is not None and seen != self.g.meta.metadata:
            self.bump(metadata=seen)

    def remove_member(self, member_id: str) -> None:
        """The member is gone (left, or its session or rebalance timed out): its records go, the
        epoch moves."""
        gid = self.g.group_id
        if self.g.current(member_id) is not None:
            self.emit(StreamsCurrentAssignmentTombstone(group_id=gid, member_id=member_id))
        if self.g.target(member_id) is not None:
            self.emit(StreamsTargetMemberTombstone(group_id=gid, member_id=member_id))
        if self.g.member(member_id) is not None:
            self.emit(StreamsMemberTombstone(group_id=gid, member_id=member_id))
        meta = self.g.meta
        if meta is not None and meta.shutdown_requested_by == member_id:
            self.bump(shutdown_requested_by=None)
        else:
            self.bump()
        for kind in (TimerKind.SESSION, TimerKind.REVOCATION):
            self.timers.append(CancelTimer(key=TimerKey(kind, gid, member_id)))
