"""The KIP-848 group coordinator, sans-IO: the groups of one ``__consumer_offsets`` partition.

Writes (:meth:`GroupCoordinator.heartbeat`, :meth:`~GroupCoordinator.prepare_assignment`,
:meth:`~GroupCoordinator.install_assignment`, :meth:`~GroupCoordinator.on_timer`,
:meth:`~GroupCoordinator.on_metadata_image`, :meth:`~GroupCoordinator.delete_group`) return a
:class:`~.result.Result` and change nothing; :meth:`~GroupCoordinator.replay` is the only
change to group state and :meth:`~GroupCoordinator.apply` replays a result's records and applies
its timer operations. The host persists the records before it sends the response (Kafka's
order); a new coordinator :meth:`~GroupCoordinator.load`\\ s them. Time is ``now_ms``, handed in.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import TypeVar

from assignors.partition.range import RangeAssignor
from assignors.partition.types import PartitionAssignor
from assignors.partition.uniform import UniformAssignor
from streamtasks.coordinator import classic, client_assignment, heartbeat
from streamtasks.coordinator.group import ConsumerGroup
from streamtasks.coordinator.parked import JoinOp, ParkedJoin, ParkedJoins
from streamtasks.coordinator.records import (
    ClientAssignmentRequestTombstone,
    CurrentMemberAssignmentTombstone,
    GroupEpochTombstone,
    MemberMetadataTombstone,
    PartitionMetadataTombstone,
    PreparedAssignmentTombstone,
    Record,
    TargetAssignmentMemberTombstone,
    TargetAssignmentMetadataTombstone,
)
from streamtasks.coordinator.result import Result
from streamtasks.coordinator.timers import CancelTimer, ScheduleTimer, TimerKey, TimerKind, TimerOp, Timers
from streamtasks.coordinator.types import (
    CoordinatorConfig,
    GroupState,
    MemberState,
    MetadataImage,
    TopicPartitionSet,
)
from streamtasks.coordinator.update import GroupUpdate, WriteContext
from streamtasks.errors import ConfigError
from streamtasks.protocol.assignment_rpc import (
    ConsumerGroupInstallAssignmentRequest,
    ConsumerGroupInstallAssignmentResponse,
    ConsumerGroupPrepareAssignmentRequest,
    ConsumerGroupPrepareAssignmentResponse,
)
from streamtasks.protocol.classic_group import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from streamtasks.protocol.consumer_group import (
    AUTHORIZED_OPERATIONS_OMITTED,
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    DescribedAssignment,
    DescribedGroup,
    DescribedMember,
    DescribedTopicPartitions,
)
from streamtasks.protocol.errors import KafkaErrorCode

__all__ = ["GroupCoordinator", "default_assignors"]

R = TypeVar("R")

_TOMBSTONES = (
    GroupEpochTombstone,
    PartitionMetadataTombstone,
    MemberMetadataTombstone,
    TargetAssignmentMetadataTombstone,
    TargetAssignmentMemberTombstone,
    CurrentMemberAssignmentTombstone,
    ClientAssignmentRequestTombstone,
    PreparedAssignmentTombstone,
)


def default_assignors() -> dict[str, PartitionAssignor]:
    """KIP-848's two server-side assignors: ``uniform`` (the default) and ``range``."""
    return {"uniform": UniformAssignor(), "range": RangeAssignor()}


class GroupCoordinator:
    """Consumer groups, their records and their timers. See the module docstring."""

    __slots__ = ("_assignors", "_config", "_groups", "_image", "_parked", "_timers")

    def __init__(
        self,
        config: CoordinatorConfig | None = None,
        *,
        assignors: Mapping[str, PartitionAssignor] | None = None,
        image: MetadataImage | None = None,
    ) -> None:
        self._config = config or CoordinatorConfig()
        self._assignors = MappingProxyType(dict(default_assignors() if assignors is None else assignors))
        missing = [n for n in self._config.server_assignors if n not in self._assignors]
        if missing:
            raise ConfigError(f"coordinator: no assignor object for {missing}")
        self._image = image or MetadataImage()
        self._groups: dict[str, ConsumerGroup] = {}
        self._timers = Timers()
        self._parked = ParkedJoins()

    # -- reads -------------------------------------------------------------------------------------

    @property
    def config(self) -> CoordinatorConfig:
        return self._config

    @property
    def image(self) -> MetadataImage:
        return self._image

    @property
    def assignors(self) -> Mapping[str, PartitionAssignor]:
        """The server-side assignor objects by name."""
        return self._assignors

    @property
    def groups(self) -> Mapping[str, ConsumerGroup]:
        return MappingProxyType(self._groups)

    def group(self, group_id: str) -> ConsumerGroup | None:
        return self._groups.get(group_id)

    def group_state(self, group_id: str) -> GroupState:
        group = self._groups.get(group_id)
        return GroupState.DEAD if group is None else group.state

    def timer_deadline(self, key: TimerKey) -> int | None:
        return self._timers.deadline(key)

    def next_deadline_ms(self) -> int | None:
        return self._timers.next_deadline_ms()

    def expired_timers(self, now_ms: int) -> list[TimerKey]:
        return self._timers.expired(now_ms)

    def parked_joins(self, group_id: str) -> Mapping[str, ParkedJoin]:
        """The classic members of the group whose JoinGroup is parked (``parked.py``)."""
        return self._parked.in_group(group_id)

    def snapshot(self) -> dict[str, tuple[object, ...]]:
        """Every group's whole state as comparable values (what replay must reproduce)."""
        return {gid: g.snapshot() for gid, g in sorted(self._groups.items())}

    def describe(self, request: ConsumerGroupDescribeRequest) -> ConsumerGroupDescribeResponse:
        return ConsumerGroupDescribeResponse(groups=tuple(self._describe(gid) for gid in request.group_ids))

    def _describe(self, group_id: str) -> DescribedGroup:
        group = self._groups.get(group_id)
        if group is None:
            return DescribedGroup(
                error=KafkaErrorCode.GROUP_ID_NOT_FOUND,
                error_message=f"Group {group_id!r} not found.",
                group_id=group_id,
                group_state=GroupState.DEAD.value,
            )

        def topics(partitions: TopicPartitionSet) -> tuple[DescribedTopicPartitions, ...]:
            out = []
            for item in partitions.to_wire():
                topic = group.topic_by_id(item.topic_id) or self._image.by_id.get(item.topic_id)
                name = "" if topic is None else topic.name
                out.append(
                    DescribedTopicPartitions(
                        topic_id=item.topic_id, topic_name=name, partitions=item.partitions
                    )
                )
            return tuple(out)

        members = []
        for member_id, member in sorted(group.members.items()):
            current = group.current(member_id)
            target = group.target(member_id)
            assignment = DescribedAssignment(topic_partitions=())
            if current is not None:
                assignment = DescribedAssignment(
                    topic_partitions=topics(current.assigned),
                    error=current.error,
                    metadata_version=current.metadata_version,
                    metadata_bytes=current.metadata_bytes,
                )
            members.append(
                DescribedMember(
                    member_id=member_id,
                    member_epoch=0 if current is None else current.member_epoch,
                    client_id=member.client_id,
                    client_host=member.client_host,
                    instance_id=member.instance_id,
                    rack_id=member.rack_id,
                    subscribed_topic_names=member.subscribed_topic_names,
                    assignment=assignment,
                    target_assignment=DescribedAssignment(topic_partitions=())
                    if target is None
                    else DescribedAssignment(
                        topic_partitions=topics(target.partitions),
                        error=target.error,
                        metadata_version=target.metadata_version,
                        metadata_bytes=target.metadata_bytes,
                    ),
                    member_type=1 if member.classic is None else 0,  # 0: classic protocol
                )
            )
        return DescribedGroup(
            error=KafkaErrorCode.NONE,
            group_id=group_id,
            group_state=group.state.value,
            group_epoch=group.group_epoch,
            assignment_epoch=group.assignment_epoch,
            assignor_name=group.assignor_name,
            members=tuple(members),
            authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
        )

    # -- writes ------------------------------------------------------------------------------------

    def _ctx(self, now_ms: int, image: MetadataImage | None = None) -> WriteContext:
        return WriteContext(
            config=self._config,
            assignors=self._assignors,
            image=self._image if image is None else image,
            timers=self._timers,
            parked=self._parked,
            now_ms=now_ms,
        )

    def heartbeat(
        self,
        request: ConsumerGroupHeartbeatRequest,
        now_ms: int,
        *,
        client_id: str = "",
        client_host: str = "",
    ) -> Result[ConsumerGroupHeartbeatResponse]:
        """ConsumerGroupHeartbeat. ``client_id`` / ``client_host`` come from the request header
        and the connection (ConsumerGroupDescribe reports them)."""
        return heartbeat.heartbeat(
            self._groups.get(request.group_id),
            request,
            self._ctx(now_ms),
            client_id=client_id,
            client_host=client_host,
        )

    def prepare_assignment(
        self, request: ConsumerGroupPrepareAssignmentRequest, now_ms: int
    ) -> Result[ConsumerGroupPrepareAssignmentResponse]:
        return client_assignment.prepare_assignment(
            self._groups.get(request.group_id), request, self._ctx(now_ms)
        )

    def install_assignment(
        self, request: ConsumerGroupInstallAssignmentRequest, now_ms: int
    ) -> Result[ConsumerGroupInstallAssignmentResponse]:
        return client_assignment.install_assignment(
            self._groups.get(request.group_id), request, self._ctx(now_ms)
        )

    def join_group(
        self,
        request: JoinGroupRequest,
        now_ms: int,
        *,
        new_member_id: str,
        api_version: int = 9,
        client_id: str = "",
        client_host: str = "",
    ) -> Result[JoinGroupResponse | None]:
        """A classic member's JoinGroup (``classic.py``); None: parked, answered by a later
        write's ``Result.joins``. ``new_member_id``: the id a member without one gets."""
        return classic.join_group(
            self._groups.get(request.group_id),
            request,
            self._ctx(now_ms),
            new_member_id=new_member_id,
            api_version=api_version,
            client_id=client_id,
            client_host=client_host,
        )

    def sync_group(self, request: SyncGroupRequest, now_ms: int) -> Result[SyncGroupResponse]:
        return classic.sync_group(self._groups.get(request.group_id), request, self._ctx(now_ms))

    def classic_heartbeat(self, request: HeartbeatRequest, now_ms: int) -> Result[HeartbeatResponse]:
        return classic.heartbeat(self._groups.get(request.group_id), request, self._ctx(now_ms))

    def leave_group(
        self, request: classic.LeaveGroupsRequest, now_ms: int
    ) -> Result[classic.LeaveGroupsResponse]:
        return classic.leave_group(self._groups.get(request.group_id), request, self._ctx(now_ms))

    def on_metadata_image(self, image: MetadataImage, now_ms: int) -> Result[None]:
        """The cluster's topics changed: every group whose subscribed topics' metadata differs
        bumps its epoch (partitions added, topics created or re-created). Applying the result
        makes ``image`` the coordinator's."""
        return self._resume(now_ms, image)

    def resume(self, now_ms: int) -> Result[None]:
        """After loading (the seed's fail-over duties): re-check every group's topic metadata
        and compute, or ask for, any assignment still owed (group epoch > assignment epoch)."""
        return self._resume(now_ms, None)

    def _resume(self, now_ms: int, image: MetadataImage | None) -> Result[None]:
        ctx = self._ctx(now_ms, image)
        records: list[Record] = []
        timers: list[TimerOp] = []
        joins: list[JoinOp] = []
        for group_id, group in sorted(self._groups.items()):
            u = GroupUpdate(group, group_id, ctx)
            if u.refresh_partition_metadata():
                u.bump()
            u.assign()
            done = u.result(None)  # (a new target may let parked joins go on)
            records += done.records
            timers += done.timers
            joins += done.joins
        return Result(
            records=tuple(records), response=None, timers=tuple(timers), image=image, joins=tuple(joins)
        )

    def on_timer(self, key: TimerKey, now_ms: int) -> Result[None]:
        """The write run when ``key``'s deadline has passed (a no-op if it has not)."""
        deadline = self._timers.deadline(key)
        if deadline is None or deadline > now_ms:
            return Result(records=(), response=None)
        group = self._groups.get(key.group_id)
        u = GroupUpdate(group, key.group_id, self._ctx(now_ms))
        u.timers.append(CancelTimer(key=key))
        if group is not None:
            current = group.current(key.member_id)
            expired = key.kind is TimerKind.SESSION and group.member(key.member_id) is not None
            unrevoked = (
                key.kind is TimerKind.REVOCATION
                and current is not None
                and current.state is MemberState.UNREVOKED_PARTITIONS
            )
            if expired or unrevoked:
                u.remove_member(key.member_id)
                u.bump()
                u.assign()
            elif key.kind is TimerKind.ASSIGNMENT and group.client_request is not None:
                u.ask_member(previous=group.client_request.member_id, skip_previous=True)
            elif key.kind is TimerKind.ASSIGNMENT_INTERVAL:
                u.interval_timer_armed = False  # cancelled above; the interval is over
                u.assign()
            elif key.kind in (TimerKind.JOIN, TimerKind.SYNC):
                classic.on_classic_timer(u, key.member_id, join=key.kind is TimerKind.JOIN)
        return u.result(None)

    def delete_group(self, group_id: str, now_ms: int) -> Result[KafkaErrorCode]:
        """DeleteGroups for one group: only an empty group can go; it becomes Dead."""
        group = self._groups.get(group_id)
        u = GroupUpdate(group, group_id, self._ctx(now_ms))
        if group is None:
            return u.result(KafkaErrorCode.GROUP_ID_NOT_FOUND)
        if group.members:
            return u.result(KafkaErrorCode.NON_EMPTY_GROUP)
        u.drop_client_request()
        u.cancel(u.interval_timer)
        for member_id in sorted(group.targets):
            u.emit(TargetAssignmentMemberTombstone(group_id=group_id, member_id=member_id))
        for member_id in sorted(group.current_assignments):
            u.emit(CurrentMemberAssignmentTombstone(group_id=group_id, member_id=member_id))
        u.emit(TargetAssignmentMetadataTombstone(group_id=group_id))
        u.emit(PartitionMetadataTombstone(group_id=group_id))
        u.emit(GroupEpochTombstone(group_id=group_id))
        return u.result(KafkaErrorCode.NONE)

    # -- the only mutations ------------------------------------------------------------------------

    def replay(self, record: Record) -> None:
        """Apply one record (the only way group state changes)."""
        group_id = record.group_id
        if isinstance(record, GroupEpochTombstone):
            self._groups.pop(group_id, None)
            return
        group = self._groups.get(group_id)
        if group is None:
            if isinstance(record, _TOMBSTONES):
                return
            group = self._groups[group_id] = ConsumerGroup(group_id)
        group.replay(record)

    def apply(self, result: Result[R]) -> R:
        """Replay a write's records, apply its timer operations and image; its response."""
        for record in result.records:
            self.replay(record)
        for op in result.timers:
            self._timers.apply(op)
        for join in result.joins:
            self._parked.apply(join)
        if result.image is not None:
            self._image = result.image
        return result.response

    def load(self, records: Iterable[Record], now_ms: int) -> Result[None]:
        """Rebuild from a log: replay every record, rearm the timers (sessions restart now; a
        member still revoking, and a member asked to compute the assignment, get their
        rebalance timeout from now), and return :meth:`resume`'s write for the host to apply."""
        self._groups.clear()
        self._timers.clear()
        self._parked.clear()
        for record in records:
            self.replay(record)
        for group_id, group in self._groups.items():
            for member_id, member in group.members.items():
                session_ms = (
                    self._config.session_timeout_ms
                    if member.classic is None
                    else member.classic.session_timeout_ms
                )
                self._timers.apply(
                    ScheduleTimer(
                        key=TimerKey(TimerKind.SESSION, group_id, member_id),
                        deadline_ms=now_ms + session_ms,
                    )
                )
                current = group.current(member_id)
                if current is not None and current.state is MemberState.UNREVOKED_PARTITIONS:
                    self._timers.apply(
                        ScheduleTimer(
                            key=TimerKey(TimerKind.REVOCATION, group_id, member_id),
                            deadline_ms=now_ms + member.rebalance_timeout_ms,
                        )
                    )
            request = group.client_request
            chosen = None if request is None else group.member(request.member_id)
            if chosen is not None:
                self._timers.apply(
                    ScheduleTimer(
                        key=TimerKey(TimerKind.ASSIGNMENT, group_id),
                        deadline_ms=now_ms + chosen.rebalance_timeout_ms,
                    )
                )
        return self.resume(now_ms)

    # -- conveniences --------------------------------------------------------------------------------

    def handle_heartbeat(
        self,
        request: ConsumerGroupHeartbeatRequest,
        now_ms: int,
        *,
        client_id: str = "",
        client_host: str = "",
    ) -> ConsumerGroupHeartbeatResponse:
        """:meth:`heartbeat` applied at once (for hosts that persist nothing)."""
        return self.apply(self.heartbeat(request, now_ms, client_id=client_id, client_host=client_host))

    def poll(self, now_ms: int, held: frozenset[str] = frozenset()) -> list[Result[None]]:
        """Run and apply the write of every timer due at ``now_ms``, earliest first; the results
        (whose records the host persists). Timers of the ``held`` groups stay armed and fire at
        a later poll (a forwarded transactional commit is in flight: ``txn_commits.py``)."""
        done = []
        for key in self._timers.expired(now_ms):
            if key.group_id in held:
                continue
            result = self.on_timer(key, now_ms)
            self.apply(result)
            done.append(result)
        return done
