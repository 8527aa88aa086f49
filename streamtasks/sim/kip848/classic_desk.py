"""The coordinator's classic-protocol side in the KIP-848 world (a mixed group).

A classic member's JoinGroup / SyncGroup / Heartbeat / LeaveGroup go to the real
:class:`~streamtasks.coordinator.GroupCoordinator`'s classic writes, each persisted in the
world's log and applied as every write is (``ConsumerWorld.write``). A JoinGroup the coordinator
parks gets no answer yet: its connection and request id wait here, keyed by member id, until a
later write's ``Result.joins`` answers the member (:meth:`ClassicDesk.answered`, called for
every write), as the server's parked futures do. A fail-over answers the waiting joins
NOT_COORDINATOR (the old coordinator's connections are gone; the new one has no parked joins).
"""

from __future__ import annotations

from typing import Any, Protocol

from streamtasks.coordinator import GroupCoordinator, Result
from streamtasks.coordinator.classic import LeaveGroupMember, LeaveGroupsRequest, LeaveGroupsResponse
from streamtasks.coordinator.parked import AnswerJoin, ParkJoin
from streamtasks.membership.classic import Request as ClassicRequest
from streamtasks.protocol.classic_group import (
    DescribeGroupRequest,
    DescribeGroupResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from streamtasks.protocol.errors import KafkaErrorCode

__all__ = ["ClassicDesk", "ClassicResponse", "DeskWorld"]

ClassicResponse = (
    JoinGroupResponse | SyncGroupResponse | HeartbeatResponse | LeaveGroupResponse | DescribeGroupResponse
)


class DeskWorld(Protocol):
    """What the desk uses of its side (:class:`~streamtasks.sim.kip848.side.ConsumerSide`):
    the coordinator, whether it is up, the clock, the log and the members' connections."""

    @property
    def coordinator(self) -> GroupCoordinator: ...

    @property
    def available(self) -> bool: ...

    @property
    def now(self) -> int: ...

    def write(self, result: Result[Any]) -> Any: ...

    def reply(self, conn: str, request_id: int, response: ClassicResponse) -> None: ...


#: The JoinGroup version the simulated members speak (v4+: MEMBER_ID_REQUIRED first).
JOIN_VERSION = 9


class ClassicDesk:
    """Serves one world's classic members; holds the parked joins' connections."""

    def __init__(self, world: DeskWorld) -> None:
        self.world = world
        #: Member id → the (connection, request id) of each of its parked JoinGroups.
        self.waiting: dict[str, list[tuple[str, int]]] = {}
        self.parked = 0
        self._ids = 0

    def serve(self, conn: str, request_id: int, request: ClassicRequest) -> ClassicResponse | None:
        """The answer to send now, or None: the join is parked (or nothing to answer)."""
        w = self.world
        down = KafkaErrorCode.NOT_COORDINATOR
        c = w.coordinator
        if isinstance(request, JoinGroupRequest):
            if not w.available:
                return JoinGroupResponse(error=down, member_id=request.member_id)
            self._ids += 1
            result = c.join_group(
                request, w.now, new_member_id=f"{conn}-{self._ids}", api_version=JOIN_VERSION
            )
            joined: JoinGroupResponse | None = w.write(result)
            if joined is None:
                for op in result.joins:
                    if isinstance(op, ParkJoin):
                        self.waiting.setdefault(op.parked.member_id, []).append((conn, request_id))
                        self.parked += 1
            return joined
        if isinstance(request, SyncGroupRequest):
            if not w.available:
                return SyncGroupResponse(error=down)
            synced: SyncGroupResponse = w.write(c.sync_group(request, w.now))
            return synced
        if isinstance(request, HeartbeatRequest):
            if not w.available:
                return HeartbeatResponse(error=down)
            beat: HeartbeatResponse = w.write(c.classic_heartbeat(request, w.now))
            return beat
        if isinstance(request, DescribeGroupRequest):
            # Never asked here (this coordinator computes the assignment: no SkipAssignment);
            # not modelled, so the member keeps its follow-up.
            return DescribeGroupResponse(error=KafkaErrorCode.GROUP_ID_NOT_FOUND)
        return self._leave(request)

    def _leave(self, request: LeaveGroupRequest) -> LeaveGroupResponse:
        w = self.world
        if not w.available:
            return LeaveGroupResponse(error=KafkaErrorCode.NOT_COORDINATOR)
        who = LeaveGroupMember(member_id=request.member_id, instance_id=request.group_instance_id)
        left: LeaveGroupsResponse = w.write(
            w.coordinator.leave_group(LeaveGroupsRequest(group_id=request.group_id, members=(who,)), w.now)
        )
        error = left.error
        if error is KafkaErrorCode.NONE and left.members:
            error = left.members[0].error  # one member: its error is the request's
        return LeaveGroupResponse(error=error)

    def answered(self, result: Result[Any]) -> None:
        """A write's answers to parked joins go out on their connections."""
        for op in result.joins:
            if isinstance(op, AnswerJoin):
                for conn, request_id in self.waiting.pop(op.member_id, []):
                    self.world.reply(conn, request_id, op.response)

    def unload(self, error: KafkaErrorCode = KafkaErrorCode.NOT_COORDINATOR) -> None:
        """The coordinator fails over: every parked join is answered ``error``."""
        waiting, self.waiting = self.waiting, {}
        for member_id, requests in sorted(waiting.items()):
            for conn, request_id in requests:
                answer = JoinGroupResponse(error=error, member_id=member_id)
                self.world.reply(conn, request_id, answer)
