"""Ask a cluster about its groups: ListGroups v5 on every broker, DescribeGroups v5,
ConsumerGroupDescribe v1 and StreamsGroupDescribe v1 on a group's coordinator (what
``streamtasks groups`` shows).

Every failure is one :class:`~streamtasks.errors.StreamTasksError` naming the broker and the
cause: a group that does not exist is :class:`GroupNotFound`; a broker that refuses an API
(UNSUPPORTED_VERSION, or closing the connection, as Apache Kafka does on an API version it
does not know) is a :class:`~streamtasks.errors.BrokerError`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from kio.schema.list_groups.v5.request import ListGroupsRequest
from kio.schema.list_groups.v5.response import ListGroupsResponse
from kio.schema.metadata.v12.response import MetadataResponse

from streamtasks.errors import AuthorizationError, BrokerError
from streamtasks.protocol import classic_group as cg
from streamtasks.protocol import consumer_group as kip848
from streamtasks.protocol.consumer_group import CONSUMER_GROUP_DESCRIBE_API_KEY, ConsumerGroupDescribeRequest
from streamtasks.protocol.consumer_group_codec import decode_describe_response, encode_describe_request
from streamtasks.protocol.errors import KafkaErrorCode
from streamtasks.protocol.streams_group import (
    STREAMS_GROUP_DESCRIBE_API_KEY,
    DescribedStreamsGroup,
    StreamsGroupDescribeRequest,
)
from streamtasks.protocol.streams_group_describe_codec import (
    decode_streams_describe_response,
    encode_streams_describe_request,
)
from streamtasks.runtime.admin import metadata_request
from streamtasks.runtime.connection import AsyncConnection, ConnectionLost, GroupCoordinatorClient, open_any
from streamtasks.runtime.security import ClientSettings

__all__ = [
    "CLIENT_ID",
    "GroupListing",
    "GroupNotFound",
    "check_answer",
    "describe_group",
    "find_coordinator",
    "list_groups",
]

T = TypeVar("T")

CLIENT_ID = "streamtasks-groups"
_log = logging.getLogger(__name__)
_DESCRIBE_VERSION = 1
_STREAMS_DESCRIBE_VERSION = 1
#: States in which DescribeGroups answers for a group the coordinator does not know.
_ABSENT_STATES = frozenset({"Dead", ""})


class GroupNotFound(BrokerError):
    """The cluster has no group of that id."""


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupListing:
    """One row of ListGroups: ``group_type`` is classic, consumer, streams or share."""

    group_id: str
    group_type: str
    protocol_type: str
    state: str

    def to_json(self) -> dict[str, Any]:
        return {
            "group_id": self.group_id,
            "type": self.group_type,
            "protocol_type": self.protocol_type,
            "state": self.state,
        }


def _refused(who: str, api: str, exc: Exception) -> BrokerError:
    return BrokerError(f"{who} did not answer {api} (it may not support that API version): {exc}")


def check_answer(error: KafkaErrorCode, who: str, api: str, message: str | None = None) -> None:
    """Nothing when ``error`` is NONE, else the :class:`BrokerError` (an
    :class:`AuthorizationError` for a denial) naming ``who`` and ``api``."""
    if error is KafkaErrorCode.NONE:
        return
    detail = f": {message}" if message else ""
    if error.name.endswith("AUTHORIZATION_FAILED"):
        raise AuthorizationError(f"{who} denies {api}: {error.name}{detail}")
    raise BrokerError(f"{who} answered {api} with {error.name}{detail}")


def _coordinator(group_id: str) -> str:
    return f"the coordinator of group {group_id!r}"


async def list_groups(settings: ClientSettings, *, timeout_s: float = 10.0) -> list[GroupListing]:
    """Every group of the cluster (each broker lists the groups it coordinates), by group id."""
    _log.debug("ListGroups v5 on every broker, with %r", settings)
    bootstrap = await open_any(settings, CLIENT_ID, timeout_s=timeout_s)
    try:
        metadata = await bootstrap.call(metadata_request(()), MetadataResponse, timeout_s=timeout_s)
    finally:
        await bootstrap.close()
    found: dict[str, GroupListing] = {}
    for broker in sorted(metadata.brokers, key=lambda b: int(b.node_id)):
        conn = await AsyncConnection.open(
            broker.host, int(broker.port), client_id=CLIENT_ID, timeout_s=timeout_s, security=settings
        )
        try:
            try:
                answer = await conn.call(ListGroupsRequest(), ListGroupsResponse, timeout_s=timeout_s)
            except ConnectionLost as exc:
                raise _refused(f"the broker at {conn.peer}", "ListGroups v5", exc) from None
            check_answer(
                KafkaErrorCode.of(int(answer.error_code.value)), f"the broker at {conn.peer}", "ListGroups v5"
            )
        finally:
            await conn.close()
        for g in answer.groups:
            found[str(g.group_id)] = GroupListing(
                group_id=str(g.group_id),
                group_type=g.group_type,
                protocol_type=g.protocol_type,
                state=g.group_state,
            )
    return [found[k] for k in sorted(found)]


#: FindCoordinator answers that mean "ask again soon" (a fresh cluster creating __consumer_offsets).
_NOT_YET = ("COORDINATOR_NOT_AVAILABLE", "COORDINATOR_LOAD_IN_PROGRESS")


async def find_coordinator(client: GroupCoordinatorClient, timeout_s: float) -> None:
    """Connect to the group's coordinator, asking again every half second for ``timeout_s``
    while the cluster says it has none yet; any other failure at once (ConnectionLost)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while True:
        try:
            await client.ensure_coordinator()
            return
        except ConnectionLost as exc:
            if not any(code in str(exc) for code in _NOT_YET) or loop.time() > deadline:
                raise
        await asyncio.sleep(0.5)


#: Answers that mean the coordinator is loading or moved: asked again (after finding it again).
RETRIABLE = frozenset(
    {
        KafkaErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaErrorCode.COORDINATOR_NOT_AVAILABLE,
        KafkaErrorCode.NOT_COORDINATOR,
    }
)


async def send_retrying(
    client: GroupCoordinatorClient,
    send: Callable[[], Awaitable[T]],
    error_of: Callable[[T], KafkaErrorCode],
    timeout_s: float,
) -> T:
    """``send()`` to the coordinator (found first), again every half second for ``timeout_s``
    while the answer's error is one of :data:`RETRIABLE`; the last answer then."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while True:
        await find_coordinator(client, timeout_s)
        answer = await send()
        if error_of(answer) not in RETRIABLE or loop.time() > deadline:
            return answer
        await client.reset()
        await asyncio.sleep(0.5)


async def describe_group(
    settings: ClientSettings, group_id: str, *, timeout_s: float = 10.0
) -> cg.DescribeGroupResponse | kip848.DescribedGroup | DescribedStreamsGroup:
    """A KIP-848 consumer group (ConsumerGroupDescribe), else a classic group (DescribeGroups),
    else a KIP-1071 streams group (StreamsGroupDescribe), its error checked."""
    _log.debug("describing group %r with %r", group_id, settings)
    client = GroupCoordinatorClient(settings, group_id, client_id=CLIENT_ID, timeout_s=timeout_s)
    try:
        try:
            await find_coordinator(client, timeout_s)
        except ConnectionLost as exc:
            raise BrokerError(f"{_coordinator(group_id)}: {exc}") from None
        consumer = await _consumer_group(client, group_id, timeout_s)
        if consumer is not None:
            return consumer
        try:
            described = await send_retrying(
                client,
                lambda: client.send(cg.DescribeGroupRequest(group_id=group_id), timeout_s=timeout_s),
                lambda answer: answer.error,
                timeout_s,
            )
        except ConnectionLost as exc:
            raise _refused(_coordinator(group_id), "DescribeGroups v5", exc) from None
        assert isinstance(described, cg.DescribeGroupResponse)
        absent = (
            described.error is KafkaErrorCode.GROUP_ID_NOT_FOUND or described.group_state in _ABSENT_STATES
        )
        # An empty classic group may stand beside a streams group of the id: on streamtasks
        # coordinator, the cluster's simple group holding a transactional group's offsets
        # (DescribeGroups is forwarded there; docs/coordinator.md, "Exactly-once").
        if absent or (described.group_state == "Empty" and not described.members):
            streams = await _streams_group(client, group_id, timeout_s)
            if streams is not None:
                return streams
        if absent:
            raise GroupNotFound(
                f"no group {group_id!r} on the cluster at {settings.bootstrap_servers} "
                "(or it is a share group, which describe does not read)"
            )
        check_answer(described.error, _coordinator(group_id), "DescribeGroups v5")
        return described
    finally:
        await client.close()


async def _consumer_group(
    client: GroupCoordinatorClient, group_id: str, timeout_s: float
) -> kip848.DescribedGroup | None:
    """The group when it is a KIP-848 consumer group; ``None`` when it is not one (or the broker
    predates KIP-848 and refuses the API, as it then has no consumer group; or it answers a
    group that cannot be one)."""
    body = encode_describe_request(ConsumerGroupDescribeRequest(group_ids=(group_id,)), _DESCRIBE_VERSION)

    async def send() -> kip848.DescribedGroup | None:
        raw = await client.send_raw(
            CONSUMER_GROUP_DESCRIBE_API_KEY, _DESCRIBE_VERSION, body, timeout_s=timeout_s
        )
        groups = decode_describe_response(raw, _DESCRIBE_VERSION).groups
        return next((g for g in groups if g.group_id == group_id), None)

    try:
        group = await send_retrying(
            client, send, lambda g: KafkaErrorCode.NONE if g is None else g.error, timeout_s
        )
    except ConnectionLost:
        return None
    if group is None or group.error in (
        KafkaErrorCode.GROUP_ID_NOT_FOUND,
        KafkaErrorCode.UNSUPPORTED_VERSION,
    ):
        return None
    if group.error is KafkaErrorCode.NONE and group.group_epoch < 0:
        # No consumer group has a negative epoch: Tansu answers any group id this way (no
        # error, epochs -1, no member, its member id as the assignor), classic groups included.
        return None
    check_answer(group.error, _coordinator(group_id), "ConsumerGroupDescribe v1", group.error_message)
    return group


async def _streams_group(
    client: GroupCoordinatorClient, group_id: str, timeout_s: float
) -> DescribedStreamsGroup | None:
    """The group when it is a KIP-1071 streams group; ``None`` when it is not one (or the
    broker does not serve StreamsGroupDescribe v1)."""
    request = StreamsGroupDescribeRequest(group_ids=(group_id,))
    body = encode_streams_describe_request(request, _STREAMS_DESCRIBE_VERSION)
    try:
        raw = await client.send_raw(
            STREAMS_GROUP_DESCRIBE_API_KEY, _STREAMS_DESCRIBE_VERSION, body, timeout_s=timeout_s
        )
    except ConnectionLost:
        return None
    groups = decode_streams_describe_response(raw, _STREAMS_DESCRIBE_VERSION).groups
    group = next((g for g in groups if g.group_id == group_id), None)
    if group is None or group.error in (
        KafkaErrorCode.GROUP_ID_NOT_FOUND,
        KafkaErrorCode.UNSUPPORTED_VERSION,
    ):
        return None
    check_answer(group.error, _coordinator(group_id), "StreamsGroupDescribe v1", group.error_message)
    return group
