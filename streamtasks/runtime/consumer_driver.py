"""The asyncio driver of a KIP-848 consumer group member (``group_protocol="consumer"``).

It owns no protocol logic: it feeds responses, failures, metadata (topic ids included: KIP-848
names partitions by topic id) and timer ticks into a
:class:`~streamtasks.membership.consumer.ConsumerMember` and executes what it returns, through
the loop the classic driver uses (:class:`~streamtasks.runtime.member_loop.MemberLoop`).

On the wire: ConsumerGroupHeartbeat (API key 68, v1: the member generates its id) is encoded by
streamtasks' own codec, so the seed KIP's tagged fields (client assignors,
ShouldComputeAssignment) reach a coordinator that reads them and an Apache Kafka broker skips
them; PrepareAssignment / InstallAssignment go on their private keys (only a streamtasks
coordinator serves them, and only a member with client-side assignors sends them); the commit
before a revocation is OffsetCommit v9, which carries the member epoch. The coordinator is
whatever FindCoordinator (key type GROUP) on the bootstrap servers names.
"""

from __future__ import annotations

import base64
import logging
import uuid
from collections.abc import Mapping
from typing import Any, NamedTuple, Protocol

from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.api_versions.v3.response import ApiVersionsResponse

from streamtasks._version import __version__
from streamtasks.errors import BrokerError, LocalProtocolError
from streamtasks.membership.consumer import (
    ApplicationPolled,
    AssignorMetadataChanged,
    ConsumerMember,
    MemberState,
    MetadataUpdated,
    PollTimerExpired,
    ResponseReceived,
    metadata_from_hook,
)
from streamtasks.membership.consumer.transitions import IN_GROUP
from streamtasks.protocol import assignment_rpc as rpc
from streamtasks.protocol import classic_group as cg
from streamtasks.protocol.consumer_group import (
    CONSUMER_GROUP_HEARTBEAT_API_KEY,
    ConsumerGroupHeartbeatRequest,
)
from streamtasks.protocol.consumer_group_codec import decode_heartbeat_response, encode_heartbeat_request
from streamtasks.runtime.connection import (
    COORDINATOR_MOVED,
    AsyncConnection,
    GroupCoordinatorClient,
    open_any,
)
from streamtasks.runtime.group_wire import KOffsetCommitResponseV9, offset_commit_v9
from streamtasks.runtime.member_loop import DriverHost, EpochMemberLoop
from streamtasks.runtime.security import ClientSettings

__all__ = [
    "HEARTBEAT_VERSION",
    "ConsumerGroupDriver",
    "ConsumerGroupHost",
    "TopicMetadata",
    "new_member_id",
    "open_kip848_bootstrap",
    "require_api",
    "require_consumer_group_heartbeat",
    "send_consumer_group_request",
    "served_versions",
]

log = logging.getLogger("streamtasks.driver")

#: ConsumerGroupHeartbeat v1 (Apache Kafka 4.0+): the member id is the member's own.
HEARTBEAT_VERSION = 1


def new_member_id() -> str:
    """A member id as Apache Kafka's consumer makes one (``Uuid.randomUuid().toString()``: 16
    random bytes, URL-safe base64 without padding); kept across rejoins of one consumer."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


async def served_versions(conn: AsyncConnection) -> dict[int, int]:
    """API key -> the highest version the server behind ``conn`` advertises (ApiVersions, asked
    once per connection)."""
    if conn.api_versions is None:
        conn.api_versions = await conn.call(
            ApiVersionsRequest(client_software_name="streamtasks", client_software_version=__version__),
            ApiVersionsResponse,
        )
    return {int(k.api_key): int(k.max_version) for k in conn.api_versions.api_keys}


async def require_api(
    conn: AsyncConnection, where: str, *, api_key: int, version: int, what: str, hint: str
) -> None:
    """Raise :class:`BrokerError` unless the server behind ``conn`` advertises ``api_key`` (the
    request ``what``) at ``version`` or above in ApiVersions; the message ends with ``hint``."""
    highest = (await served_versions(conn)).get(api_key)
    if highest is None or highest < version:
        served_what = "does not serve" if highest is None else f"serves only v{highest} of"
        raise BrokerError(f"{where} {served_what} {what} (API key {api_key}, v{version} needed): {hint}")


async def require_consumer_group_heartbeat(conn: AsyncConnection, where: str) -> None:
    """Raise :class:`BrokerError` unless the server behind ``conn`` advertises
    ConsumerGroupHeartbeat v1 in ApiVersions (a broker without it would leave the member
    retrying forever: Tansu closes the connection on an unknown API key)."""
    await require_api(
        conn,
        where,
        api_key=CONSUMER_GROUP_HEARTBEAT_API_KEY,
        version=HEARTBEAT_VERSION,
        what="ConsumerGroupHeartbeat",
        hint="group_protocol='consumer' needs Apache Kafka 4.0+ or a streamtasks coordinator; use "
        "group_protocol='classic' here",
    )


async def open_kip848_bootstrap(bootstrap: str | ClientSettings, client_id: str) -> AsyncConnection:
    """A connection to a bootstrap server that advertises ConsumerGroupHeartbeat v1
    (:func:`require_consumer_group_heartbeat`); closed again and BrokerError when it does not."""
    settings = ClientSettings.of(bootstrap)
    conn = await open_any(settings, client_id)
    try:
        await require_consumer_group_heartbeat(conn, f"the cluster at {settings.bootstrap_servers}")
    except BaseException:
        await conn.close()
        raise
    return conn


class TopicMetadata(NamedTuple):
    """Partition count and topic id of each topic the cluster named."""

    partitions: Mapping[str, int]
    topic_ids: Mapping[str, uuid.UUID]


class ConsumerGroupHost(DriverHost, Protocol):
    """The classic driver's host, plus topic ids."""

    async def topic_metadata(self, topics: tuple[str, ...]) -> TopicMetadata: ...


async def send_consumer_group_request(
    client: GroupCoordinatorClient, request: Any, *, timeout_s: float
) -> Any:
    """Send one request a KIP-848 member emits (heartbeat, Prepare/InstallAssignment, the
    epoch-carrying OffsetCommit) to the group coordinator; return the decoded response. A
    response that says the coordinator moved makes the client look it up again."""
    if isinstance(request, cg.OffsetCommitRequest):
        return await client.send_entity(
            offset_commit_v9(request), KOffsetCommitResponseV9, timeout_s=timeout_s
        )
    if isinstance(request, ConsumerGroupHeartbeatRequest):
        body = encode_heartbeat_request(request, HEARTBEAT_VERSION)
        raw = await client.send_raw(
            CONSUMER_GROUP_HEARTBEAT_API_KEY, HEARTBEAT_VERSION, body, timeout_s=timeout_s
        )
        response: Any = decode_heartbeat_response(raw, HEARTBEAT_VERSION)
    elif isinstance(request, rpc.ConsumerGroupPrepareAssignmentRequest):
        raw = await client.send_raw(
            rpc.PREPARE_ASSIGNMENT_API_KEY, 0, rpc.encode_prepare_request(request), timeout_s=timeout_s
        )
        response = rpc.decode_prepare_response(raw)
    elif isinstance(request, rpc.ConsumerGroupInstallAssignmentRequest):
        raw = await client.send_raw(
            rpc.INSTALL_ASSIGNMENT_API_KEY, 0, rpc.encode_install_request(request), timeout_s=timeout_s
        )
        response = rpc.decode_install_response(raw)
    else:
        raise LocalProtocolError(f"not a KIP-848 member request: {type(request).__name__}")
    if response.error in COORDINATOR_MOVED:
        await client.reset()
    return response


class ConsumerGroupDriver(EpochMemberLoop[ConsumerMember]):
    """Runs one KIP-848 member until it has left the group (or failed).

    It also keeps Apache Kafka's poll timer (``max.poll.interval.ms``, the member's rebalance
    timeout): the host calls :meth:`note_poll` whenever the application asks for records; with
    no call for longer than the rebalance timeout the member gives its partitions up (lost),
    leaves, and waits in ``STALE`` until the next :meth:`note_poll` makes it rejoin."""

    _host: ConsumerGroupHost
    #: When the application last asked for records; when the member went stale.
    _last_poll_ms: int | None = None
    _stale_since_ms: int = 0

    def note_poll(self) -> None:
        """The application asked for records (``Consumer.getmany``)."""
        self._last_poll_ms = self._clock()
        if self.member.state is MemberState.STALE:
            self.wake()

    def due_events(self, now_ms: int) -> list[Any]:
        if self._last_poll_ms is None:
            self._last_poll_ms = now_ms  # the timer starts with the loop
        state = self.member.state
        if state is MemberState.STALE:
            return [ApplicationPolled()] if self._last_poll_ms > self._stale_since_ms else []
        limit = self.member.config.rebalance_timeout_ms
        if state in IN_GROUP and now_ms - self._last_poll_ms > limit:
            self._stale_since_ms = now_ms
            return [
                PollTimerExpired(reason=f"no poll for {now_ms - self._last_poll_ms} ms (limit {limit} ms)")
            ]
        return []

    def own_deadline_ms(self) -> int | None:
        if self._last_poll_ms is None or self.member.state not in IN_GROUP:
            return None
        return self._last_poll_ms + self.member.config.rebalance_timeout_ms + 1

    async def request(self, request: Any, timeout_ms: int) -> Any:
        return await send_consumer_group_request(self._client, request, timeout_s=timeout_ms / 1000)

    def response_event(self, request_id: int, response: Any) -> ResponseReceived:
        log.debug("<- %s", response)
        return ResponseReceived(request_id=request_id, response=response)

    async def metadata_event(self) -> tuple[MetadataUpdated, tuple[str, ...]]:
        topics = self.member.config.topics
        found = await self._host.topic_metadata(topics)
        event = MetadataUpdated(partitions_per_topic=found.partitions, topic_ids=found.topic_ids)
        return event, tuple(t for t in topics if t not in found.partitions or t not in found.topic_ids)

    def enforce_rebalance(self, reason: str) -> bool:
        """KIP-848: a new assignment through the client-side assignors' ``Reason``; ``False``
        (nothing sent, as Apache Kafka's consumer) under a server-side assignor, or when the
        member is not in a group."""
        if self.member.state in (MemberState.UNSUBSCRIBED, MemberState.FATAL):
            return False
        took = self.member.enforce_rebalance(reason, self._clock())
        if took:
            self.refresh_assignor_metadata()  # the assignors see what changed (a caught-up warm-up)
            self.wake()
        return took

    def refresh_assignor_metadata(self) -> None:
        """Post each client-side assignor's metadata as it writes it now (its
        ``subscription_user_data`` hook: for the streams assignor the process id and the task
        offset sums the leader's lags come from), sent with the next heartbeat. Called before the
        first heartbeat and with each :meth:`enforce_rebalance`, not on every change: a change
        bumps the group epoch, so a new assignment, and offset sums change all the time."""
        config = self.member.config
        previous = tuple(sorted(self.member.owned_partitions))
        epoch = self.member.member_epoch if self.member.member_epoch > 0 else None
        for assignor in config.client_assignors:
            metadata = metadata_from_hook(assignor, topics=config.topics, previous=previous, epoch=epoch)
            self.post(AssignorMetadataChanged(name=assignor.name, metadata=metadata))
