"""The streams-group coordinator: the writes (heartbeat, timers), StreamsGroupDescribe, and
the one change, :meth:`StreamsGroupCoordinator.replay`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import TypeVar

from assignors import registry
from assignors.types import TaskAssignor
from streamtasks.coordinator.streams.configured import configure
from streamtasks.coordinator.streams.describe import describe_group
from streamtasks.coordinator.streams.group import StreamsGroup, StreamsGroupState
from streamtasks.coordinator.streams.heartbeat import heartbeat
from streamtasks.coordinator.streams.records import (
    StreamsCurrentAssignmentRecord,
    StreamsCurrentAssignmentTombstone,
    StreamsGroupTombstone,
    StreamsMemberState,
    StreamsMemberTombstone,
    StreamsRecord,
    StreamsTargetMemberTombstone,
    StreamsTargetMetadataTombstone,
    StreamsTopologyTombstone,
)
from streamtasks.coordinator.streams.target import update_target
from streamtasks.coordinator.streams.write import StreamsCoordinatorConfig, StreamsResult, StreamsWrite
from streamtasks.coordinator.timers import CancelTimer, ScheduleTimer, TimerKey, TimerKind, Timers
from streamtasks.coordinator.types import MetadataImage
from streamtasks.protocol.consumer_group import LEAVE_GROUP_STATIC_MEMBER_EPOCH
from streamtasks.protocol.errors import KafkaErrorCode
from streamtasks.protocol.streams_group import (
    StreamsGroupDescribeRequest,
    StreamsGroupDescribeResponse,
    StreamsGroupHeartbeatRequest,
    StreamsGroupHeartbeatResponse,
)

__all__ = ["StreamsGroupCoordinator"]

R = TypeVar("R")
#: The tombstones a group this coordinator does not hold ignores on replay (a compacted log
#: may keep a deleted group's tombstones).
_TOMBSTONES = (
    StreamsGroupTombstone,
    StreamsTopologyTombstone,
    StreamsMemberTombstone,
    StreamsTargetMetadataTombstone,
    StreamsTargetMemberTombstone,
    StreamsCurrentAssignmentTombstone,
)


class StreamsGroupCoordinator:
    """Streams groups, sans-IO. Writes return :class:`StreamsResult` and change nothing;
    :meth:`apply` replays a result's records and applies its timers (a server appends the
    records to its log first). ``assignor``: a task assignor instance, else the registry's
    (``config.assignor``: a built-in or any plug-in of the entry-point group; a group named in
    ``config.group_assignors`` gets its own)."""

    def __init__(
        self,
        config: StreamsCoordinatorConfig | None = None,
        *,
        assignor: TaskAssignor | None = None,
        image: MetadataImage | None = None,
    ) -> None:
        self._config = config or StreamsCoordinatorConfig()
        self._assignor = assignor if assignor is not None else registry.get(self._config.assignor)
        self._group_assignors = {gid: registry.get(name) for gid, name in self._config.group_assignors}
        self._image = image or MetadataImage()
        self._groups: dict[str, StreamsGroup] = {}
        self._timers = Timers()

    # -- reading --------------------------------------------------------------------------------

    @property
    def config(self) -> StreamsCoordinatorConfig:
        return self._config

    @property
    def image(self) -> MetadataImage:
        return self._image

    @property
    def groups(self) -> Mapping[str, StreamsGroup]:
        return MappingProxyType(self._groups)

    def group(self, group_id: str) -> StreamsGroup | None:
        return self._groups.get(group_id)

    def group_state(self, group_id: str) -> StreamsGroupState:
        group = self._groups.get(group_id)
        if group is None:
            return StreamsGroupState.DEAD
        return group.state(ready=configure(group.topology, self._image).ready)

    def assignor(self, group_id: str) -> TaskAssignor:
        """The task assignor that computes ``group_id``'s targets."""
        return self._group_assignors.get(group_id, self._assignor)

    def timer_deadline(self, key: TimerKey) -> int | None:
        return self._timers.deadline(key)

    def next_deadline_ms(self) -> int | None:
        return self._timers.next_deadline_ms()

    def expired_timers(self, now_ms: int) -> list[TimerKey]:
        return self._timers.expired(now_ms)

    def snapshot(self) -> dict[str, tuple[object, ...]]:
        return {gid: g.snapshot() for gid, g in sorted(self._groups.items())}

    def describe(self, request: StreamsGroupDescribeRequest) -> StreamsGroupDescribeResponse:
        return StreamsGroupDescribeResponse(
            groups=tuple(
                describe_group(gid, self._groups.get(gid), self._image, self.assignor(gid).name)
                for gid in request.group_ids
            )
        )

    # -- writes ---------------------------------------------------------------------------------

    def _write(self, group_id: str, now_ms: int) -> StreamsWrite:
        return StreamsWrite(
            self._groups.get(group_id),
            group_id,
            config=self._config,
            assignor=self.assignor(group_id),
            image=self._image,
            now_ms=now_ms,
            initial_delay=self._timers.deadline(TimerKey(TimerKind.INITIAL_REBALANCE, group_id)) is not None,
        )

    def heartbeat(
        self,
        request: StreamsGroupHeartbeatRequest,
        now_ms: int,
        *,
        client_id: str = "",
        client_host: str = "",
    ) -> StreamsResult[StreamsGroupHeartbeatResponse]:
        return heartbeat(
            self._write(request.group_id, now_ms), request, client_id=client_id, client_host=client_host
        )

    def set_image(self, image: MetadataImage) -> None:
        """The cluster's topics changed: groups see it at their next heartbeat (a new epoch when
        a topic of their topology was created, deleted or repartitioned)."""
        self._image = image

    def on_timer(self, key: TimerKey, now_ms: int) -> StreamsResult[None]:
        """A timer fired: a member that missed its session or did not revoke in time is removed;
        a probing rebalance bumps the epoch (the target is computed at the next heartbeat); the
        end of the initial rebalance delay computes the owed target (Kafka's
        ``computeDelayedTargetAssignment``, the assignment interval permitting)."""
        w = self._write(key.group_id, now_ms)
        g = w.g
        if key.kind is TimerKind.INITIAL_REBALANCE:
            if g.members and g.epoch > g.target_epoch:
                update_target(w, w.configured())
        elif key.kind is TimerKind.PROBING:
            if g.meta is not None and g.members:
                w.bump()
        elif key.kind is TimerKind.SESSION and g.member(key.member_id) is not None:
            w.remove_member(key.member_id)
        elif key.kind is TimerKind.REVOCATION:
            current = g.current(key.member_id)
            if current is not None and current.state is StreamsMemberState.UNREVOKED_TASKS:
                w.remove_member(key.member_id)
        return w.result(None)

    def delete_group(self, group_id: str, now_ms: int) -> StreamsResult[KafkaErrorCode]:
        """Delete an empty group (every record of it tombstoned, the group's last), as Apache
        Kafka deletes an empty streams group a classic JoinGroup takes over: NON_EMPTY_GROUP while
        it has members (a static member that left with epoch -2 is still one),
        GROUP_ID_NOT_FOUND for an id it does not hold."""
        w = self._write(group_id, now_ms)
        g = w.g
        if group_id not in self._groups:
            return w.result(KafkaErrorCode.GROUP_ID_NOT_FOUND)
        if g.members:
            return w.result(KafkaErrorCode.NON_EMPTY_GROUP)
        for mid in sorted(g.targets):
            w.emit(StreamsTargetMemberTombstone(group_id=group_id, member_id=mid))
        for mid in sorted(g.currents):
            w.emit(StreamsCurrentAssignmentTombstone(group_id=group_id, member_id=mid))
        if g.target_meta is not None:
            w.emit(StreamsTargetMetadataTombstone(group_id=group_id))
        if g.topology is not None:
            w.emit(StreamsTopologyTombstone(group_id=group_id))
        w.emit(StreamsGroupTombstone(group_id=group_id))
        for kind in (TimerKind.PROBING, TimerKind.INITIAL_REBALANCE):
            w.timers.append(CancelTimer(key=TimerKey(kind, group_id)))
        return w.result(KafkaErrorCode.NONE)

    def poll(self, now_ms: int, held: frozenset[str] = frozenset()) -> list[StreamsResult[None]]:
        """Fire every due timer (each applied before the next fires); those of the ``held``
        groups stay armed for a later poll."""
        out = []
        for key in self._timers.expired(now_ms):
            if key.group_id in held or self._timers.deadline(key) is None:
                continue  # cancelled by a timer handled before it
            self._timers.apply(CancelTimer(key=key))
            result = self.on_timer(key, now_ms)
            self.apply(result)
            out.append(result)
        return out

    # -- the one change -------------------------------------------------------------------------

    def replay(self, record: StreamsRecord) -> None:
        gid = record.group_id
        group = self._groups.get(gid)
        if group is None:
            if isinstance(record, _TOMBSTONES):
                return
            group = self._groups[gid] = StreamsGroup(gid)
        group.replay(record)
        if isinstance(record, StreamsGroupTombstone):
            del self._groups[gid]

    def apply(self, result: StreamsResult[R]) -> R:
        for record in result.records:
            self.replay(record)
        for op in result.timers:
            self._timers.apply(op)
        return result.response

    def load(self, records: Iterable[StreamsRecord], now_ms: int) -> None:
        """Rebuild from the log (replaying), then arm the soft-state timers: every member's
        session, revocations under way, and probing rebalances owed."""
        for record in records:
            self.replay(record)
        self._timers.clear()
        for gid, g in self._groups.items():
            for mid in g.members:
                self._timers.apply(
                    ScheduleTimer(
                        key=TimerKey(TimerKind.SESSION, gid, mid),
                        deadline_ms=now_ms + self._config.session_timeout_ms,
                    )
                )
                current = g.current(mid)
                if _revoking(current):
                    member = g.members[mid]
                    self._timers.apply(
                        ScheduleTimer(
                            key=TimerKey(TimerKind.REVOCATION, gid, mid),
                            deadline_ms=now_ms + member.rebalance_timeout_ms,
                        )
                    )
            followup = g.target_meta.followup_ms if g.target_meta is not None else None
            if followup is not None:
                self._timers.apply(ScheduleTimer(key=TimerKey(TimerKind.PROBING, gid), deadline_ms=followup))


def _revoking(current: StreamsCurrentAssignmentRecord | None) -> bool:
    return (
        current is not None
        and current.state is StreamsMemberState.UNREVOKED_TASKS
        and current.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH
    )
