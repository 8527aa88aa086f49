"""Ask a cluster about its groups: ListGroups v5 on every broker, DescribeGroups v5 and
ConsumerGroupDescribe v1 on a group's coordinator (what ``streamtasks groups`` shows).

Every failure is one :class:`~streamtasks.errors.StreamTasksError` naming the broker and the
cause: a group that does not exist is :class:`GroupNotFound`; a broker that refuses an API
(UNSUPPORTED_VERSION, or closing the connection, as Apache Kafka does on an API version it
does not know) is a :class:`~streamtasks.errors.BrokerError`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kio.schema.list_groups.v5.request import ListGroupsRequest
from kio.schema.list_groups.v5.response import ListGroupsResponse
from kio.schema.metadata.v12.response import MetadataResponse

from streamtasks.errors import AuthorizationError, BrokerError
from streamtasks.protocol import classic_group as cg
from streamtasks.protocol import consumer_group as kip848
from streamtasks.protocol.consumer_group import CONSUMER_GROUP_DESCRIBE_API_KEY, ConsumerGroupDescribeRequest
from streamtasks.protocol.consumer_group_codec import decode_describe_response, encode_describe_request
from streamtasks.protocol.errors import KafkaErrorCode
from streamtasks.runtime.admin import metadata_request
from streamtasks.runtime.connection import AsyncConnection, ConnectionLost, GroupCoordinatorClient, open_any
from streamtasks.runtime.security import ClientSettings

__all__ = ["CLIENT_ID", "GroupListing", "GroupNotFound", "describe_group", "list_groups"]

CLIENT_ID = "streamtasks-groups"
_DESCRIBE_VERSION = 1
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


def _check(error: KafkaErrorCode, who: str, api: str, message: str | None = None) -> None:
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
            _check(
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


async def describe_group(
    settings: ClientSettings, group_id: str, *, timeout_s: float = 10.0
) -> cg.DescribeGroupResponse | kip848.DescribedGroup:
    """A KIP-848 consumer group (ConsumerGroupDescribe) or else a classic group (DescribeGroups),
    its error checked."""
    client = GroupCoordinatorClient(settings, group_id, client_id=CLIENT_ID, timeout_s=timeout_s)
    try:
        await client.ensure_coordinator()
        consumer = await _consumer_group(client, group_id, timeout_s)
        if consumer is not None:
            return consumer
        try:
            described = await client.send(cg.DescribeGroupRequest(group_id=group_id), timeout_s=timeout_s)
        except ConnectionLost as exc:
            raise _refused(_coordinator(group_id), "DescribeGroups v5", exc) from None
        assert isinstance(described, cg.DescribeGroupResponse)
        if described.error is KafkaErrorCode.GROUP_ID_NOT_FOUND or described.group_state in _ABSENT_STATES:
            raise GroupNotFound(
                f"no group {group_id!r} on the cluster at {settings.bootstrap_servers} "
                "(or it is a streams or share group, which describe does not read yet)"
            )
        _check(described.error, _coordinator(group_id), "DescribeGroups v5")
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
    try:
        raw = await client.send_raw(
            CONSUMER_GROUP_DESCRIBE_API_KEY, _DESCRIBE_VERSION, body, timeout_s=timeout_s
        )
    except ConnectionLost:
        return None
    groups = decode_describe_response(raw, _DESCRIBE_VERSION).groups
    group = next((g for g in groups if g.group_id == group_id), None)
    if group is None or group.error in (
        KafkaErrorCode.GROUP_ID_NOT_FOUND,
        KafkaErrorCode.UNSUPPORTED_VERSION,
    ):
        return None
    if group.error is KafkaErrorCode.NONE and group.group_epoch < 0:
        # No consumer group has a negative epoch: Tansu answers any group id this way (no
        # error, epochs -1, no member, its member id as the assignor), classic groups included.
        return None
    _check(group.error, _coordinator(group_id), "ConsumerGroupDescribe v1", group.error_message)
    return group
