"""Map the decoded classic-group messages (``streamtasks.protocol.classic_group``) to kio's wire
entities and back: JoinGroup v9, SyncGroup v5, Heartbeat v4, LeaveGroup v5, OffsetCommit v8,
DescribeGroups v5, FindCoordinator v3. These are the versions Apache Kafka 2.4+ and the
embedded broker both speak (static membership, KIP-814's ``SkipAssignment``, KIP-800 reasons).
Also TxnOffsetCommit v3 (Apache Kafka 2.5+; KIP-447's group metadata), for exactly-once."""

from __future__ import annotations

import datetime
from collections import defaultdict
from typing import Any

from kio.schema.describe_groups.v5.request import DescribeGroupsRequest as KDescribeGroupsRequest
from kio.schema.describe_groups.v5.response import DescribeGroupsResponse as KDescribeGroupsResponse
from kio.schema.find_coordinator.v3.request import FindCoordinatorRequest as KFindCoordinatorRequest
from kio.schema.find_coordinator.v3.response import FindCoordinatorResponse as KFindCoordinatorResponse
from kio.schema.heartbeat.v4.request import HeartbeatRequest as KHeartbeatRequest
from kio.schema.heartbeat.v4.response import HeartbeatResponse as KHeartbeatResponse
from kio.schema.join_group.v9.request import JoinGroupRequest as KJoinGroupRequest
from kio.schema.join_group.v9.request import JoinGroupRequestProtocol
from kio.schema.join_group.v9.response import JoinGroupResponse as KJoinGroupResponse
from kio.schema.leave_group.v5.request import LeaveGroupRequest as KLeaveGroupRequest
from kio.schema.leave_group.v5.request import MemberIdentity
from kio.schema.leave_group.v5.response import LeaveGroupResponse as KLeaveGroupResponse
from kio.schema.offset_commit.v8.request import OffsetCommitRequest as KOffsetCommitRequest
from kio.schema.offset_commit.v8.request import (
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from kio.schema.offset_commit.v8.response import OffsetCommitResponse as KOffsetCommitResponse
from kio.schema.offset_commit.v9 import request as offset_commit_v9_request
from kio.schema.offset_commit.v9.response import OffsetCommitResponse as KOffsetCommitResponseV9
from kio.schema.offset_fetch.v7.request import OffsetFetchRequest as KOffsetFetchRequest
from kio.schema.offset_fetch.v7.request import OffsetFetchRequestTopic
from kio.schema.offset_fetch.v7.response import OffsetFetchResponse as KOffsetFetchResponse
from kio.schema.sync_group.v5.request import SyncGroupRequest as KSyncGroupRequest
from kio.schema.sync_group.v5.request import SyncGroupRequestAssignment
from kio.schema.sync_group.v5.response import SyncGroupResponse as KSyncGroupResponse
from kio.schema.txn_offset_commit.v3 import request as txn_commit_v3
from kio.schema.txn_offset_commit.v3.response import TxnOffsetCommitResponse as KTxnOffsetCommitResponse
from kio.static.primitive import i8, i16, i32, i32Timedelta, i64

from streamtasks.errors import LocalProtocolError
from streamtasks.protocol import classic_group as cg
from streamtasks.protocol.errors import KafkaErrorCode
from streamtasks.protocol.txn_offsets import TxnOffsetCommitRequest, TxnOffsetCommitResponse
from topology.ids import TopicPartition

__all__ = [
    "GroupRequest",
    "KOffsetCommitResponseV9",
    "find_coordinator_request",
    "from_wire",
    "offset_commit_v9",
    "response_type",
    "to_wire",
]

GroupRequest = (
    cg.JoinGroupRequest
    | cg.SyncGroupRequest
    | cg.HeartbeatRequest
    | cg.LeaveGroupRequest
    | cg.OffsetCommitRequest
    | cg.OffsetFetchRequest
    | cg.DescribeGroupRequest
    | TxnOffsetCommitRequest
)

_RESPONSE_TYPES: dict[type[Any], type[Any]] = {
    cg.JoinGroupRequest: KJoinGroupResponse,
    cg.SyncGroupRequest: KSyncGroupResponse,
    cg.HeartbeatRequest: KHeartbeatResponse,
    cg.LeaveGroupRequest: KLeaveGroupResponse,
    cg.OffsetCommitRequest: KOffsetCommitResponse,
    cg.OffsetFetchRequest: KOffsetFetchResponse,
    cg.DescribeGroupRequest: KDescribeGroupsResponse,
    TxnOffsetCommitRequest: KTxnOffsetCommitResponse,
}


def _ms(value: int) -> i32Timedelta:
    return i32Timedelta.parse(datetime.timedelta(milliseconds=value))


def _err(code: Any) -> KafkaErrorCode:
    return KafkaErrorCode.of(int(code.value))


def find_coordinator_request(group_id: str) -> KFindCoordinatorRequest:
    return KFindCoordinatorRequest(key=group_id, key_type=i8(0))


def response_type(request: GroupRequest) -> type[Any]:
    """The kio response entity that answers ``request``."""
    return _RESPONSE_TYPES[type(request)]


def to_wire(request: GroupRequest) -> Any:
    """The kio request entity for a decoded classic-group request."""
    if isinstance(request, cg.JoinGroupRequest):
        return KJoinGroupRequest(
            group_id=request.group_id,  # type: ignore[arg-type]
            session_timeout=_ms(request.session_timeout_ms),
            rebalance_timeout=_ms(request.rebalance_timeout_ms),
            member_id=request.member_id,
            group_instance_id=request.group_instance_id,
            protocol_type=request.protocol_type,
            protocols=tuple(
                JoinGroupRequestProtocol(name=p.name, metadata=p.metadata) for p in request.protocols
            ),
            reason=request.reason,
        )
    if isinstance(request, cg.SyncGroupRequest):
        return KSyncGroupRequest(
            group_id=request.group_id,  # type: ignore[arg-type]
            generation_id=i32(request.generation_id),
            member_id=request.member_id,
            group_instance_id=request.group_instance_id,
            protocol_type=request.protocol_type,
            protocol_name=request.protocol_name,
            assignments=tuple(
                SyncGroupRequestAssignment(member_id=a.member_id, assignment=a.assignment)
                for a in request.assignments
            ),
        )
    if isinstance(request, cg.HeartbeatRequest):
        return KHeartbeatRequest(
            group_id=request.group_id,  # type: ignore[arg-type]
            generation_id=i32(request.generation_id),
            member_id=request.member_id,
            group_instance_id=request.group_instance_id,
        )
    if isinstance(request, cg.DescribeGroupRequest):
        return KDescribeGroupsRequest(
            groups=(request.group_id,),  # type: ignore[arg-type]
            include_authorized_operations=False,
        )
    if isinstance(request, cg.LeaveGroupRequest):
        return KLeaveGroupRequest(
            group_id=request.group_id,  # type: ignore[arg-type]
            members=(
                MemberIdentity(
                    member_id=request.member_id,
                    group_instance_id=request.group_instance_id,
                    reason=request.reason,
                ),
            ),
        )
    if isinstance(request, cg.OffsetCommitRequest):
        return _offset_commit(
            request, KOffsetCommitRequest, OffsetCommitRequestTopic, OffsetCommitRequestPartition
        )
    if isinstance(request, cg.OffsetFetchRequest):
        parts: dict[str, list[int]] = defaultdict(list)
        for tp in request.partitions:
            parts[tp.topic].append(tp.partition)
        return KOffsetFetchRequest(
            group_id=request.group_id,  # type: ignore[arg-type]
            topics=tuple(
                OffsetFetchRequestTopic(name=t, partition_indexes=tuple(i32(p) for p in sorted(ps)))  # type: ignore[arg-type]
                for t, ps in sorted(parts.items())
            ),
            require_stable=request.require_stable,
        )
    if isinstance(request, TxnOffsetCommitRequest):
        return _txn_offset_commit(request)
    raise LocalProtocolError(f"not a classic group request: {type(request).__name__}")


def _offset_topics(
    offsets: tuple[cg.CommittedOffset, ...], topic_entity: Any, partition_entity: Any
) -> tuple[Any, ...]:
    """The per-topic offset entities of an OffsetCommit or a TxnOffsetCommit."""
    by_topic: dict[str, list[cg.CommittedOffset]] = defaultdict(list)
    for o in offsets:
        by_topic[o.partition.topic].append(o)
    return tuple(
        topic_entity(
            name=topic,
            partitions=tuple(
                partition_entity(
                    partition_index=i32(o.partition.partition),
                    committed_offset=i64(o.offset),
                    committed_leader_epoch=i32(-1),
                    committed_metadata=o.metadata,
                )
                for o in sorted(in_topic, key=lambda o: o.partition.partition)
            ),
        )
        for topic, in_topic in sorted(by_topic.items())
    )


def _offset_commit(
    request: cg.OffsetCommitRequest, entity: Any, topic_entity: Any, partition_entity: Any
) -> Any:
    return entity(
        group_id=request.group_id,
        generation_id_or_member_epoch=i32(request.generation_id),
        member_id=request.member_id,
        group_instance_id=request.group_instance_id,
        topics=_offset_topics(request.offsets, topic_entity, partition_entity),
    )


def _txn_offset_commit(request: TxnOffsetCommitRequest) -> Any:
    m = txn_commit_v3
    return m.TxnOffsetCommitRequest(
        transactional_id=request.transactional_id,  # type: ignore[arg-type]
        group_id=request.group_id,  # type: ignore[arg-type]
        producer_id=i64(request.producer_id),  # type: ignore[arg-type]
        producer_epoch=i16(request.producer_epoch),
        generation_id=i32(request.generation_id),
        member_id=request.member_id,
        group_instance_id=request.group_instance_id,
        topics=_offset_topics(
            request.offsets, m.TxnOffsetCommitRequestTopic, m.TxnOffsetCommitRequestPartition
        ),
    )


def offset_commit_v9(request: cg.OffsetCommitRequest) -> Any:
    """OffsetCommit v9: the first version a KIP-848 member may commit with (Apache Kafka answers
    a v8 commit of such a member UNSUPPORTED_VERSION); ``generation_id`` carries the member epoch.
    Answered by :data:`KOffsetCommitResponseV9`, which :func:`from_wire` decodes."""
    m = offset_commit_v9_request
    return _offset_commit(
        request, m.OffsetCommitRequest, m.OffsetCommitRequestTopic, m.OffsetCommitRequestPartition
    )


def from_wire(response: Any) -> Any:
    """The decoded classic-group response for a kio response entity."""
    if isinstance(response, KJoinGroupResponse):
        return cg.JoinGroupResponse(
            error=_err(response.error_code),
            generation_id=int(response.generation_id),
            protocol_type=response.protocol_type,
            protocol_name=response.protocol_name,
            leader=response.leader,
            skip_assignment=bool(response.skip_assignment),
            member_id=response.member_id,
            members=tuple(
                cg.JoinGroupMember(
                    member_id=m.member_id, group_instance_id=m.group_instance_id, metadata=bytes(m.metadata)
                )
                for m in response.members
            ),
        )
    if isinstance(response, KSyncGroupResponse):
        return cg.SyncGroupResponse(
            error=_err(response.error_code),
            protocol_type=response.protocol_type,
            protocol_name=response.protocol_name,
            assignment=bytes(response.assignment),
        )
    if isinstance(response, KHeartbeatResponse):
        return cg.HeartbeatResponse(error=_err(response.error_code))
    if isinstance(response, KDescribeGroupsResponse):
        return _described(response)
    if isinstance(response, KLeaveGroupResponse):
        error = _err(response.error_code)
        if error is KafkaErrorCode.NONE:
            for m in response.members:
                if m.error_code.value != 0:
                    error = _err(m.error_code)
                    break
        return cg.LeaveGroupResponse(error=error)
    if isinstance(response, KOffsetCommitResponse | KOffsetCommitResponseV9):
        return cg.OffsetCommitResponse(
            errors=tuple(
                (TopicPartition(str(t.name), int(p.partition_index)), _err(p.error_code))
                for t in response.topics
                for p in t.partitions
            )
        )
    if isinstance(response, KOffsetFetchResponse):
        return cg.OffsetFetchResponse(
            error=_err(response.error_code),
            offsets=tuple(
                (
                    TopicPartition(str(t.name), int(p.partition_index)),
                    int(p.committed_offset),
                    _err(p.error_code),
                )
                for t in response.topics
                for p in t.partitions
            ),
            metadata=tuple(
                (TopicPartition(str(t.name), int(p.partition_index)), str(p.metadata))
                for t in response.topics
                for p in t.partitions
                if p.metadata
            ),
        )
    if isinstance(response, KTxnOffsetCommitResponse):
        return TxnOffsetCommitResponse(
            errors=tuple(
                (TopicPartition(str(t.name), int(p.partition_index)), _err(p.error_code))
                for t in response.topics
                for p in t.partitions
            )
        )
    raise LocalProtocolError(f"not a classic group response: {type(response).__name__}")


__all__ += ["KFindCoordinatorResponse"]


def _described(response: Any) -> cg.DescribeGroupResponse:
    """The one group a member asked about (a response naming no group is an unknown group)."""
    if not response.groups:
        return cg.DescribeGroupResponse(error=KafkaErrorCode.GROUP_ID_NOT_FOUND)
    g = response.groups[0]
    return cg.DescribeGroupResponse(
        error=_err(g.error_code),
        group_state=g.group_state,
        protocol_type=g.protocol_type,
        protocol_name=g.protocol_data,
        members=tuple(
            cg.DescribedMember(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                assignment=bytes(m.member_assignment),
                client_id=m.client_id,
                client_host=m.client_host,
                metadata=bytes(m.member_metadata),
            )
            for m in g.members
        ),
    )
