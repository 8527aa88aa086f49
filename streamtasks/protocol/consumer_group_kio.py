"""The decoded ConsumerGroupHeartbeat / ConsumerGroupDescribe messages to and from kio's generated
entities (``kio.schema.consumer_group_heartbeat`` / ``consumer_group_describe``, v0 and v1), for
a runtime that frames requests with kio when it talks to an Apache Kafka broker.

kio's entities carry only Apache's fields: the streamtasks tagged fields (client assignors,
``ShouldComputeAssignment``, pending partitions, assignment metadata) are dropped on the way to
kio and default on the way back. Use :mod:`streamtasks.protocol.consumer_group_codec` for bytes
that keep them. Only kio's schema classes are imported here, never its (asyncio-aware) serializer.
"""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.consumer_group_describe import v0 as describe_v0
from kio.schema.consumer_group_describe import v1 as describe_v1
from kio.schema.consumer_group_heartbeat import v0 as heartbeat_v0
from kio.schema.consumer_group_heartbeat import v1 as heartbeat_v1
from kio.schema.errors import ErrorCode
from kio.static.primitive import i8, i32, i32Timedelta

from streamtasks.errors import LocalProtocolError
from streamtasks.protocol.consumer_group import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    DescribedAssignment,
    DescribedGroup,
    DescribedMember,
    DescribedTopicPartitions,
    HeartbeatAssignment,
    TopicIdPartitions,
)
from streamtasks.protocol.errors import KafkaErrorCode

__all__ = [
    "describe_request_from_kio",
    "describe_request_to_kio",
    "describe_response_from_kio",
    "describe_response_to_kio",
    "heartbeat_request_from_kio",
    "heartbeat_request_to_kio",
    "heartbeat_response_from_kio",
    "heartbeat_response_to_kio",
]

_MS = datetime.timedelta(milliseconds=1)


def _module(versions: dict[int, Any], version: int, what: str) -> Any:
    try:
        return versions[version]
    except KeyError:
        raise LocalProtocolError(f"{what} version {version} is not supported (only 0-1)") from None


_HEARTBEAT = {0: heartbeat_v0, 1: heartbeat_v1}
_DESCRIBE = {0: describe_v0, 1: describe_v1}


def _ms(value: int) -> i32Timedelta:
    return i32Timedelta.parse(datetime.timedelta(milliseconds=value))


def _from_ms(value: datetime.timedelta) -> int:
    return value // _MS


def _tps(items: tuple[Any, ...]) -> tuple[TopicIdPartitions, ...]:
    return tuple(
        TopicIdPartitions(topic_id=t.topic_id, partitions=tuple(int(p) for p in t.partitions)) for t in items
    )


def heartbeat_request_to_kio(request: ConsumerGroupHeartbeatRequest, version: int = 1) -> Any:
    m = _module(_HEARTBEAT, version, "ConsumerGroupHeartbeat").request
    extra: dict[str, Any] = {}
    if version >= 1:
        extra["subscribed_topic_regex"] = request.subscribed_topic_regex
    elif request.subscribed_topic_regex is not None:
        raise LocalProtocolError("SubscribedTopicRegex needs ConsumerGroupHeartbeat v1")
    owned = request.topic_partitions
    return m.ConsumerGroupHeartbeatRequest(
        group_id=request.group_id,
        member_id=request.member_id,
        member_epoch=i32(request.member_epoch),
        instance_id=request.instance_id,
        rack_id=request.rack_id,
        rebalance_timeout=_ms(request.rebalance_timeout_ms),
        subscribed_topic_names=request.subscribed_topic_names,
        server_assignor=request.server_assignor,
        topic_partitions=None
        if owned is None
        else tuple(
            m.TopicPartitions(topic_id=t.topic_id, partitions=tuple(i32(p) for p in t.partitions))
            for t in owned
        ),
        **extra,
    )


def heartbeat_request_from_kio(entity: Any) -> ConsumerGroupHeartbeatRequest:
    owned = entity.topic_partitions
    return ConsumerGroupHeartbeatRequest(
        group_id=str(entity.group_id),
        member_id=entity.member_id,
        member_epoch=int(entity.member_epoch),
        instance_id=entity.instance_id,
        rack_id=entity.rack_id,
        rebalance_timeout_ms=_from_ms(entity.rebalance_timeout),
        subscribed_topic_names=None
        if entity.subscribed_topic_names is None
        else tuple(str(n) for n in entity.subscribed_topic_names),
        subscribed_topic_regex=getattr(entity, "subscribed_topic_regex", None),
        server_assignor=entity.server_assignor,
        topic_partitions=None if owned is None else _tps(owned),
    )


def heartbeat_response_to_kio(response: ConsumerGroupHeartbeatResponse, version: int = 1) -> Any:
    m = _module(_HEARTBEAT, version, "ConsumerGroupHeartbeat").response
    a = response.assignment
    return m.ConsumerGroupHeartbeatResponse(
        throttle_time=_ms(response.throttle_time_ms),
        error_code=ErrorCode(int(response.error)),
        error_message=response.error_message,
        member_id=response.member_id,
        member_epoch=i32(response.member_epoch),
        heartbeat_interval=_ms(response.heartbeat_interval_ms),
        assignment=None
        if a is None
        else m.Assignment(
            topic_partitions=tuple(
                m.TopicPartitions(topic_id=t.topic_id, partitions=tuple(i32(p) for p in t.partitions))
                for t in a.topic_partitions
            )
        ),
    )


def heartbeat_response_from_kio(entity: Any) -> ConsumerGroupHeartbeatResponse:
    a = entity.assignment
    return ConsumerGroupHeartbeatResponse(
        error=KafkaErrorCode.of(int(entity.error_code)),
        error_message=entity.error_message,
        member_id=entity.member_id,
        member_epoch=int(entity.member_epoch),
        heartbeat_interval_ms=_from_ms(entity.heartbeat_interval),
        assignment=None if a is None else HeartbeatAssignment(topic_partitions=_tps(a.topic_partitions)),
        throttle_time_ms=_from_ms(entity.throttle_time),
    )


def describe_request_to_kio(request: ConsumerGroupDescribeRequest, version: int = 1) -> Any:
    m = _module(_DESCRIBE, version, "ConsumerGroupDescribe").request
    return m.ConsumerGroupDescribeRequest(
        group_ids=request.group_ids, include_authorized_operations=request.include_authorized_operations
    )


def describe_request_from_kio(entity: Any) -> ConsumerGroupDescribeRequest:
    return ConsumerGroupDescribeRequest(
        group_ids=tuple(str(g) for g in entity.group_ids),
        include_authorized_operations=bool(entity.include_authorized_operations),
    )


def _kio_assignment(m: Any, a: DescribedAssignment) -> Any:
    return m.Assignment(
        topic_partitions=tuple(
            m.TopicPartitions(
                topic_id=t.topic_id, topic_name=t.topic_name, partitions=tuple(i32(p) for p in t.partitions)
            )
            for t in a.topic_partitions
        )
    )


def _assignment(entity: Any) -> DescribedAssignment:
    return DescribedAssignment(
        topic_partitions=tuple(
            DescribedTopicPartitions(
                topic_id=t.topic_id,
                topic_name=str(t.topic_name),
                partitions=tuple(int(p) for p in t.partitions),
            )
            for t in entity.topic_partitions
        )
    )


def describe_response_to_kio(response: ConsumerGroupDescribeResponse, version: int = 1) -> Any:
    m = _module(_DESCRIBE, version, "ConsumerGroupDescribe").response

    def member(d: DescribedMember) -> Any:
        extra: dict[str, Any] = {}
        if version >= 1:
            extra["member_type"] = i8(d.member_type)
        elif d.member_type != -1:
            raise LocalProtocolError("MemberType needs ConsumerGroupDescribe v1")
        return m.Member(
            member_id=d.member_id,
            instance_id=d.instance_id,
            rack_id=d.rack_id,
            member_epoch=i32(d.member_epoch),
            client_id=d.client_id,
            client_host=d.client_host,
            subscribed_topic_names=d.subscribed_topic_names,
            subscribed_topic_regex=d.subscribed_topic_regex,
            assignment=_kio_assignment(m, d.assignment),
            target_assignment=_kio_assignment(m, d.target_assignment),
            **extra,
        )

    def group(g: DescribedGroup) -> Any:
        return m.DescribedGroup(
            error_code=ErrorCode(int(g.error)),
            error_message=g.error_message,
            group_id=g.group_id,
            group_state=g.group_state,
            group_epoch=i32(g.group_epoch),
            assignment_epoch=i32(g.assignment_epoch),
            assignor_name=g.assignor_name,
            members=tuple(member(d) for d in g.members),
            authorized_operations=i32(g.authorized_operations),
        )

    return m.ConsumerGroupDescribeResponse(
        throttle_time=_ms(response.throttle_time_ms), groups=tuple(group(g) for g in response.groups)
    )


def describe_response_from_kio(entity: Any) -> ConsumerGroupDescribeResponse:
    groups = tuple(
        DescribedGroup(
            error=KafkaErrorCode.of(int(g.error_code)),
            error_message=g.error_message,
            group_id=str(g.group_id),
            group_state=g.group_state,
            group_epoch=int(g.group_epoch),
            assignment_epoch=int(g.assignment_epoch),
            assignor_name=g.assignor_name,
            members=tuple(
                DescribedMember(
                    member_id=d.member_id,
                    instance_id=d.instance_id,
                    rack_id=d.rack_id,
                    member_epoch=int(d.member_epoch),
                    client_id=d.client_id,
                    client_host=d.client_host,
                    subscribed_topic_names=tuple(str(n) for n in d.subscribed_topic_names),
                    subscribed_topic_regex=d.subscribed_topic_regex,
                    assignment=_assignment(d.assignment),
                    target_assignment=_assignment(d.target_assignment),
                    member_type=int(getattr(d, "member_type", -1)),
                )
                for d in g.members
            ),
            authorized_operations=int(g.authorized_operations),
        )
        for g in entity.groups
    )
    return ConsumerGroupDescribeResponse(groups=groups, throttle_time_ms=_from_ms(entity.throttle_time))
