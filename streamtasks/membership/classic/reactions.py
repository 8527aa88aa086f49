"""How the member reacts to each error code of each API (KIP-429 "Consumer Coordinator
Algorithm" 1a-1e, and Kafka's ``AbstractCoordinator`` for the codes the KIP does not list).

A table, not code paths: :func:`reaction` is the single place that classifies an error.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType

from streamtasks.protocol.classic_group import (
    DescribeGroupResponse,
    HeartbeatResponse,
    JoinGroupResponse,
    LeaveGroupResponse,
    OffsetCommitResponse,
    SyncGroupResponse,
)
from streamtasks.protocol.errors import KafkaErrorCode as E

__all__ = ["ANSWERS", "Api", "Reaction", "reaction"]


class Api(enum.Enum):
    """The coordinator APIs the member calls."""

    JOIN_GROUP = "JoinGroup"
    SYNC_GROUP = "SyncGroup"
    HEARTBEAT = "Heartbeat"
    OFFSET_COMMIT = "OffsetCommit"
    LEAVE_GROUP = "LeaveGroup"
    #: Only a COOPERATIVE leader told to skip the assignment asks (KIP-814, the follow-up check).
    DESCRIBE_GROUP = "DescribeGroups"


#: The response type that answers each API (the kernel checks every answer against it).
ANSWERS: Mapping[Api, type] = MappingProxyType(
    {
        Api.JOIN_GROUP: JoinGroupResponse,
        Api.SYNC_GROUP: SyncGroupResponse,
        Api.HEARTBEAT: HeartbeatResponse,
        Api.LEAVE_GROUP: LeaveGroupResponse,
        Api.OFFSET_COMMIT: OffsetCommitResponse,
        Api.DESCRIBE_GROUP: DescribeGroupResponse,
    }
)


class Reaction(enum.Enum):
    """What the member does about an error code."""

    #: Success.
    PROCEED = "proceed"
    #: 1e (JoinGroup only): take the member id from the response and send JoinGroup again.
    MEMBER_ID_REQUIRED = "member-id-required"
    #: 1c: keep generation and owned partitions, (re)join the group.
    REJOIN = "rejoin"
    #: 1d ILLEGAL_GENERATION: clear the generation (keep the member id), owned partitions are
    #: lost (``on_partitions_lost``), rejoin with none.
    RESET_GENERATION = "reset-generation"
    #: 1d UNKNOWN_MEMBER_ID: clear member id and generation, partitions lost, rejoin.
    RESET_MEMBER = "reset-member"
    #: COORDINATOR_NOT_AVAILABLE / NOT_COORDINATOR: forget the coordinator, find it again,
    #: then retry; membership and owned partitions are kept.
    COORDINATOR = "coordinator"
    #: Retriable: try the same step again after ``retry_backoff_ms``.
    RETRY = "retry"
    #: The member cannot go on (FENCED_INSTANCE_ID: another instance with our
    #: ``group_instance_id`` took over; partitions lost). State ``FAILED``.
    FATAL = "fatal"
    #: Unexpected for this API: report it; JoinGroup/SyncGroup rejoin after the backoff,
    #: Heartbeat carries on, OffsetCommit gives the commit up.
    REPORT = "report"


_FATAL = (
    E.FENCED_INSTANCE_ID,
    E.INCONSISTENT_GROUP_PROTOCOL,
    E.INVALID_SESSION_TIMEOUT,
    E.INVALID_GROUP_ID,
    E.GROUP_AUTHORIZATION_FAILED,
    E.GROUP_MAX_SIZE_REACHED,
    E.UNSUPPORTED_VERSION,
)
_COMMON: dict[E, Reaction] = {
    E.NONE: Reaction.PROCEED,
    E.UNKNOWN_MEMBER_ID: Reaction.RESET_MEMBER,
    E.ILLEGAL_GENERATION: Reaction.RESET_GENERATION,
    E.COORDINATOR_NOT_AVAILABLE: Reaction.COORDINATOR,
    E.NOT_COORDINATOR: Reaction.COORDINATOR,
    E.FENCED_INSTANCE_ID: Reaction.FATAL,
    E.GROUP_AUTHORIZATION_FAILED: Reaction.FATAL,
}

_TABLE: Mapping[Api, Mapping[E, Reaction]] = MappingProxyType(
    {
        Api.JOIN_GROUP: MappingProxyType(
            {
                **_COMMON,
                **dict.fromkeys(_FATAL, Reaction.FATAL),
                E.MEMBER_ID_REQUIRED: Reaction.MEMBER_ID_REQUIRED,
                E.REBALANCE_IN_PROGRESS: Reaction.REJOIN,
            }
        ),
        Api.SYNC_GROUP: MappingProxyType(
            {**_COMMON, **dict.fromkeys(_FATAL, Reaction.FATAL), E.REBALANCE_IN_PROGRESS: Reaction.REJOIN}
        ),
        Api.HEARTBEAT: MappingProxyType({**_COMMON, E.REBALANCE_IN_PROGRESS: Reaction.REJOIN}),
        # REBALANCE_IN_PROGRESS on the pre-revocation commit: Kafka gives the commit up; we
        # retry (within the rebalance timeout) so the offsets land before the revocation.
        Api.OFFSET_COMMIT: MappingProxyType({**_COMMON, E.REBALANCE_IN_PROGRESS: Reaction.RETRY}),
        Api.LEAVE_GROUP: MappingProxyType({}),
        # Any error keeps the follow-up the check would have cancelled: nothing else to react to.
        Api.DESCRIBE_GROUP: MappingProxyType({E.NONE: Reaction.PROCEED}),
    }
)


def reaction(api: Api, code: E) -> Reaction:
    """The member's reaction to ``code`` answering ``api``.

    Codes outside the table: LeaveGroup always proceeds (the member is gone either way);
    otherwise retriable codes retry and the rest are reported.
    """
    if api is Api.LEAVE_GROUP:
        return Reaction.PROCEED
    found = _TABLE[api].get(code)
    if found is not None:
        return found
    return Reaction.RETRY if code.retriable else Reaction.REPORT
