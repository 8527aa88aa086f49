"""GROUP_AUTHORIZATION_FAILED answers, one per group API, shaped as Apache Kafka answers a
principal without the right on the group (``docs/security.md``). The check itself is
:meth:`streamtasks.server.guard.Access.allows`; these only build the responses."""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any

from kio.schema.errors import ErrorCode

from streamtasks.coordinator.classic import LeaveGroupsResponse
from streamtasks.protocol import assignment_rpc as rpc
from streamtasks.protocol import consumer_group_codec as codec
from streamtasks.protocol.classic_group import HeartbeatResponse, JoinGroupResponse, SyncGroupResponse
from streamtasks.protocol.consumer_group import (
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatResponse,
    DescribedGroup,
)
from streamtasks.protocol.errors import KafkaErrorCode
from streamtasks.server import classic_api, offset_api
from streamtasks.server.wire import encode_kio_response, kio_response_class, response_frame

__all__ = [
    "DENIED",
    "denied_classic",
    "denied_commit",
    "denied_heartbeat",
    "denied_install",
    "denied_offset_fetch",
    "denied_prepare",
    "filter_describe",
    "filter_offset_fetch",
]

DENIED = KafkaErrorCode.GROUP_AUTHORIZATION_FAILED
_ZERO = datetime.timedelta(0)
_MESSAGE = "not authorized for this group"


def denied_heartbeat(version: int, correlation_id: int) -> bytes:
    response = ConsumerGroupHeartbeatResponse(
        error=DENIED, error_message=_MESSAGE, member_epoch=-1, heartbeat_interval_ms=0
    )
    return response_frame(
        correlation_id, codec.encode_heartbeat_response(response, version), flexible_header=True
    )


def denied_prepare(version: int, correlation_id: int) -> bytes:
    response = rpc.ConsumerGroupPrepareAssignmentResponse(error=DENIED, error_message=_MESSAGE)
    return response_frame(
        correlation_id, rpc.encode_prepare_response(response, version), flexible_header=True
    )


def denied_install(version: int, correlation_id: int) -> bytes:
    response = rpc.ConsumerGroupInstallAssignmentResponse(error=DENIED, error_message=_MESSAGE)
    return response_frame(
        correlation_id, rpc.encode_install_response(response, version), flexible_header=True
    )


def denied_classic(api: int, version: int, correlation_id: int, member_id: str) -> bytes:
    """JoinGroup, SyncGroup, Heartbeat or LeaveGroup."""
    entity: Any
    if api == classic_api.JOIN_GROUP:
        entity = classic_api.join_response(JoinGroupResponse(error=DENIED, member_id=member_id), version)
    elif api == classic_api.SYNC_GROUP:
        entity = classic_api.sync_response(SyncGroupResponse(error=DENIED), version)
    elif api == classic_api.HEARTBEAT:
        entity = classic_api.heartbeat_response(HeartbeatResponse(error=DENIED), version)
    else:
        entity = classic_api.leave_response(LeaveGroupsResponse(error=DENIED), version)
    return encode_kio_response(entity, correlation_id)


def denied_commit(request: Any, version: int, correlation_id: int) -> bytes:
    """Every partition of the commit answered GROUP_AUTHORIZATION_FAILED, nothing written."""
    cls = kio_response_class(offset_api.OFFSET_COMMIT, version)
    topic_cls = offset_api.element(cls, "topics")
    partition_cls = offset_api.element(topic_cls, "partitions")
    error = ErrorCode(int(DENIED))
    topics = tuple(
        offset_api.make(
            topic_cls,
            name=t.name,
            partitions=tuple(
                offset_api.make(partition_cls, partition_index=p.partition_index, error_code=error)
                for p in t.partitions
            ),
        )
        for t in request.topics
    )
    return encode_kio_response(offset_api.make(cls, throttle_time=_ZERO, topics=topics), correlation_id)


def denied_offset_fetch(version: int, correlation_id: int) -> bytes:
    """OffsetFetch below v8 (one group): the request's error, no partitions."""
    cls = kio_response_class(offset_api.OFFSET_FETCH, version)
    response = offset_api.make(cls, throttle_time=_ZERO, topics=(), error_code=ErrorCode(int(DENIED)))
    return encode_kio_response(response, correlation_id)


def filter_offset_fetch(response: Any, denied: set[str]) -> Any:
    """An OffsetFetch v8+ response with each denied group's entry an error without topics."""
    if not denied:
        return response
    groups = tuple(
        dataclasses.replace(g, topics=(), error_code=ErrorCode(int(DENIED)))
        if str(g.group_id) in denied
        else g
        for g in response.groups
    )
    return dataclasses.replace(response, groups=groups)


def filter_describe(
    response: ConsumerGroupDescribeResponse, denied: set[str]
) -> ConsumerGroupDescribeResponse:
    """A ConsumerGroupDescribe response with each denied group answered with the error only."""
    if not denied:
        return response
    groups = tuple(
        DescribedGroup(error=DENIED, group_id=g.group_id, error_message=_MESSAGE)
        if g.group_id in denied
        else g
        for g in response.groups
    )
    return dataclasses.replace(response, groups=groups)
