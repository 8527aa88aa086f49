"""JoinGroup (v0-v9), SyncGroup (v0-v5), Heartbeat (v0-v4) and LeaveGroup (v0-v5) on kio's
generated classes: requests read into the coordinator's classic-member values, responses
written at the request's version (fields a version lacks are left out), and the parked joins:
a JoinGroup the coordinator parks waits here, keyed by (group, member), until a write's
``Result.joins`` answers it and that write's records are durable."""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Iterable
from typing import Any

from kio.schema.errors import ErrorCode

from streamtasks.coordinator.classic import LeaveGroupMember, LeaveGroupsRequest, LeaveGroupsResponse
from streamtasks.coordinator.parked import AnswerJoin, JoinOp
from streamtasks.protocol.classic_group import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    ProtocolMetadata,
    SyncGroupRequest,
    SyncGroupResponse,
)
from streamtasks.server.offset_api import element, make
from streamtasks.server.wire import kio_response_class

__all__ = [
    "HEARTBEAT",
    "JOIN_GROUP",
    "LEAVE_GROUP",
    "SYNC_GROUP",
    "VERSIONS",
    "ParkedJoinFutures",
    "heartbeat_request",
    "heartbeat_response",
    "join_request",
    "join_response",
    "leave_request",
    "leave_response",
    "sync_request",
    "sync_response",
]

JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP = 11, 12, 13, 14
#: What kio's generated classes cover (every version Apache Kafka 4.x defines).
VERSIONS: dict[int, tuple[int, int]] = {
    JOIN_GROUP: (0, 9),
    HEARTBEAT: (0, 4),
    LEAVE_GROUP: (0, 5),
    SYNC_GROUP: (0, 5),
}
_ZERO = datetime.timedelta(0)
_MS = datetime.timedelta(milliseconds=1)


def _ms(value: Any) -> int:
    return int(value / _MS) if isinstance(value, datetime.timedelta) else int(value)


def join_request(request: Any) -> JoinGroupRequest:
    session_ms = _ms(request.session_timeout)
    rebalance = getattr(request, "rebalance_timeout", None)  # v0 has none: the session timeout
    return JoinGroupRequest(
        group_id=str(request.group_id),
        member_id=str(request.member_id),
        group_instance_id=getattr(request, "group_instance_id", None),
        session_timeout_ms=session_ms,
        rebalance_timeout_ms=session_ms if rebalance is None else _ms(rebalance),
        protocol_type=str(request.protocol_type),
        protocols=tuple(
            ProtocolMetadata(name=str(p.name), metadata=bytes(p.metadata)) for p in request.protocols
        ),
        reason=getattr(request, "reason", None),
    )


def join_response(response: JoinGroupResponse, version: int) -> Any:
    cls = kio_response_class(JOIN_GROUP, version)
    name = response.protocol_name
    return make(
        cls,
        throttle_time=_ZERO,
        error_code=ErrorCode(int(response.error)),
        generation_id=response.generation_id,
        protocol_type=response.protocol_type,
        protocol_name=name if name is not None or version >= 7 else "",
        leader=response.leader,
        skip_assignment=response.skip_assignment,
        member_id=response.member_id,
        members=(),
    )


def sync_request(request: Any) -> SyncGroupRequest:
    return SyncGroupRequest(
        group_id=str(request.group_id),
        generation_id=int(request.generation_id),
        member_id=str(request.member_id),
        group_instance_id=getattr(request, "group_instance_id", None),
        protocol_type=getattr(request, "protocol_type", None),
        protocol_name=getattr(request, "protocol_name", None),
    )


def sync_response(response: SyncGroupResponse, version: int) -> Any:
    return make(
        kio_response_class(SYNC_GROUP, version),
        throttle_time=_ZERO,
        error_code=ErrorCode(int(response.error)),
        protocol_type=response.protocol_type,
        protocol_name=response.protocol_name,
        assignment=response.assignment,
    )


def heartbeat_request(request: Any) -> HeartbeatRequest:
    return HeartbeatRequest(
        group_id=str(request.group_id),
        generation_id=int(request.generation_id),
        member_id=str(request.member_id),
        group_instance_id=getattr(request, "group_instance_id", None),
    )


def heartbeat_response(response: HeartbeatResponse, version: int) -> Any:
    return make(
        kio_response_class(HEARTBEAT, version), throttle_time=_ZERO, error_code=ErrorCode(int(response.error))
    )


def leave_request(request: Any) -> LeaveGroupsRequest:
    """v0-v2 name one member id; v3+ list members (with instance ids)."""
    members = getattr(request, "members", None)
    listed: tuple[LeaveGroupMember, ...]
    if members is None:
        listed = (LeaveGroupMember(member_id=str(request.member_id)),)
    else:
        listed = tuple(
            LeaveGroupMember(member_id=str(m.member_id), instance_id=m.group_instance_id) for m in members
        )
    return LeaveGroupsRequest(group_id=str(request.group_id), members=listed)


def leave_response(response: LeaveGroupsResponse, version: int) -> Any:
    cls = kio_response_class(LEAVE_GROUP, version)
    error = response.error
    if version < 3 and response.members and response.members[0].error != 0:
        error = response.members[0].error  # one member: its error is the request's
    if version < 3:
        return make(cls, throttle_time=_ZERO, error_code=ErrorCode(int(error)))
    member_cls = element(cls, "members")
    return make(
        cls,
        throttle_time=_ZERO,
        error_code=ErrorCode(int(error)),
        members=tuple(
            member_cls(
                member_id=m.member_id, group_instance_id=m.instance_id, error_code=ErrorCode(int(m.error))
            )
            for m in response.members
        ),
    )


class ParkedJoinFutures:
    """The JoinGroup requests waiting for their answer, by (group, member)."""

    __slots__ = ("_waiting",)

    def __init__(self) -> None:
        self._waiting: dict[tuple[str, str], list[asyncio.Future[JoinGroupResponse]]] = {}

    def __len__(self) -> int:
        return sum(len(w) for w in self._waiting.values())

    def wait(self, group_id: str, member_id: str) -> asyncio.Future[JoinGroupResponse]:
        future: asyncio.Future[JoinGroupResponse] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault((group_id, member_id), []).append(future)
        return future

    def answer_when_durable(self, joins: Iterable[JoinOp], durable: asyncio.Future[None]) -> None:
        """Answer the joins ``joins`` answers once ``durable`` (their write's log append) is done
        (a failed append fails them: the server stops)."""
        answers = [op for op in joins if isinstance(op, AnswerJoin)]
        if not answers:
            return
        waiting = [(op, self._waiting.pop((op.group_id, op.member_id), [])) for op in answers]

        def done(appended: asyncio.Future[None]) -> None:
            failure = None if appended.cancelled() else appended.exception()
            for op, futures in waiting:
                for future in futures:
                    if future.done():
                        continue
                    if failure is not None:
                        future.set_exception(failure)
                    else:
                        future.set_result(op.response)

        durable.add_done_callback(done)
