"""What a :class:`~streamtasks.runtime.consumer.Consumer` needs from its group protocol, apart
from the driver: the member it runs (classic or KIP-848, from its config), the offset commit
that carries the member's generation or epoch, and the topic metadata (with topic ids)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import cast

from kio.schema.metadata.v12.response import MetadataResponse
from kio.static.constants import uuid_zero

import assignors as assignor_registry
from assignors.partition.types import PartitionAssignor
from streamtasks.errors import AuthorizationError, BrokerError, CommitFailedError, ConfigError
from streamtasks.membership.classic import ClassicMember, MemberConfig
from streamtasks.membership.consumer import ConsumerMember, ConsumerMemberConfig
from streamtasks.membership.streams import StreamsMember
from streamtasks.protocol.classic_group import (
    CommittedOffset,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
)
from streamtasks.protocol.errors import KafkaErrorCode
from streamtasks.protocol.txn_offsets import TxnOffsetCommitRequest, TxnOffsetCommitResponse
from streamtasks.runtime.admin import metadata_request
from streamtasks.runtime.classic_driver import MemberDriver
from streamtasks.runtime.config import ConsumerConfig
from streamtasks.runtime.connection import (
    COORDINATOR_GONE,
    AsyncConnection,
    ConnectionLost,
    GroupCoordinatorClient,
    open_any,
)
from streamtasks.runtime.consumer_driver import (
    ConsumerGroupDriver,
    ConsumerGroupHost,
    TopicMetadata,
    new_member_id,
    open_kip848_bootstrap,
    send_consumer_group_request,
)
from streamtasks.runtime.member_loop import monotonic_ms
from streamtasks.runtime.security import ClientSettings
from streamtasks.runtime.streams_driver import (
    StreamsGroupDriver,
    StreamsGroupHost,
    require_streams_group_heartbeat,
)
from topology.ids import TopicPartition

__all__ = [
    "RETRY_CODES",
    "AnyDriver",
    "make_driver",
    "open_bootstrap",
    "USER_DATA_PROVIDER_REMOVED",
    "GroupMember",
    "committed_offsets",
    "fetch_answered",
    "fetch_committed",
    "fetch_offsets",
    "generation_left",
    "make_member",
    "member_epoch",
    "member_metrics",
    "read_topic_metadata",
    "send_offset_commit",
    "send_offset_commit_retrying",
    "send_txn_offset_commit",
    "wait_for_new_epoch",
]

GroupMember = ClassicMember | ConsumerMember | StreamsMember
#: The members that commit with a member epoch (OffsetCommit v9): KIP-848's and streams groups'.
EpochMember = ConsumerMember | StreamsMember

#: Why ``Consumer(user_data_provider=...)`` is refused (issue 12: assignors own their user data).
#: Kafka's error code for a topic this principal may not describe.
TOPIC_AUTHORIZATION_FAILED = 29

USER_DATA_PROVIDER_REMOVED = (
    "user_data_provider was removed: each assignor writes its own user data (its "
    "subscription_user_data hook, assignors.partition.hooks), under the classic protocol and KIP-848's alike"
)


def make_member(
    config: ConsumerConfig,
    topics: tuple[str, ...],
    partition_assignors: Sequence[PartitionAssignor] | None,
) -> GroupMember:
    """The member ``config.group_protocol`` names.

    Classic: ``partition_assignors`` (default: ``config.assignors`` from the registry), each
    writing its own user data (:mod:`assignors.partition.hooks`). KIP-848: the coordinator's
    assignor (``group_remote_assignor``), or, with ``partition_assignors`` given, client-side
    assignors (the seed KIP's, which only a streamtasks coordinator runs); the session timeout
    is the coordinator's: ``Consumer.start`` reads it (:mod:`.group_session`) and
    ``session_timeout_ms`` stands only when it cannot."""
    if partition_assignors is not None and not partition_assignors:
        raise ConfigError("partition_assignors must name at least one assignor")
    if config.group_protocol == "streams":
        raise ConfigError(
            "group_protocol='streams' declares a topology: use streamtasks.App (its tasks are the "
            "broker's), not a bare Consumer"
        )
    if config.group_protocol == "consumer":
        return ConsumerMember(
            ConsumerMemberConfig(
                group_id=config.group_id,
                member_id=new_member_id(),
                topics=topics,
                group_instance_id=config.group_instance_id,
                rack=config.client_rack,
                server_assignor=config.group_remote_assignor,
                client_assignors=tuple(partition_assignors or ()),
                rebalance_timeout_ms=config.rebalance_timeout_ms,
                session_timeout_ms=config.session_timeout_ms,
                heartbeat_interval_ms=config.heartbeat_interval_ms,
                retry_backoff_ms=config.retry_backoff_ms,
                request_timeout_ms=config.request_timeout_ms,
            )
        )
    if partition_assignors is None:
        partition_assignors = [assignor_registry.get_partition_assignor(n) for n in config.assignors]
    return ClassicMember(
        MemberConfig(
            group_id=config.group_id,
            topics=topics,
            assignors=tuple(partition_assignors),
            group_instance_id=config.group_instance_id,
            session_timeout_ms=config.session_timeout_ms,
            rebalance_timeout_ms=config.rebalance_timeout_ms,
            heartbeat_interval_ms=config.heartbeat_interval_ms,
            retry_backoff_ms=config.retry_backoff_ms,
            request_timeout_ms=config.request_timeout_ms,
            rack=config.client_rack,
            lose_on_missed_generation=config.lose_on_missed_generation,
        ),
        now_ms=monotonic_ms(),  # its rebalance rates extrapolate over its first hour, as Kafka's
    )


#: OffsetCommit / OffsetFetch answers worth sending again after ``retry_backoff_ms``: the
#: coordinator moved, is not there yet or is loading the group (a broker died), or the request
#: timed out, as Kafka's ConsumerCoordinator retries them (``RetriableCommitFailedException``).
RETRY_CODES = COORDINATOR_GONE | {
    KafkaErrorCode.REQUEST_TIMED_OUT,
    KafkaErrorCode.NETWORK_EXCEPTION,
    KafkaErrorCode.UNSTABLE_OFFSET_COMMIT,
}


AnyDriver = MemberDriver | ConsumerGroupDriver | StreamsGroupDriver


async def open_bootstrap(
    member: GroupMember, settings: ClientSettings, client_id: str, timeout_s: float
) -> AsyncConnection:
    """The runtime's own connection to a bootstrap server; for a KIP-848 or streams-group
    member one that advertises the member's heartbeat (closed again and BrokerError if not)."""
    if isinstance(member, ConsumerMember):
        return await open_kip848_bootstrap(settings, client_id)
    conn = await open_any(settings, client_id, timeout_s=timeout_s)
    if isinstance(member, StreamsMember):
        try:
            await require_streams_group_heartbeat(conn, f"the cluster at {settings.bootstrap_servers}")
        except BaseException:
            await conn.close()
            raise
    return conn


def make_driver(
    member: GroupMember, client: GroupCoordinatorClient, host: ConsumerGroupHost, metadata_interval_ms: int
) -> AnyDriver:
    """The driver of ``member``'s protocol. A streams member's host must also be a
    :class:`~streamtasks.runtime.streams_driver.StreamsGroupHost` (the App's consumer)."""
    if isinstance(member, ConsumerMember):
        driver = ConsumerGroupDriver(member, client, host, metadata_interval_ms=metadata_interval_ms)
        driver.refresh_assignor_metadata()  # with the first heartbeat
        return driver
    if isinstance(member, StreamsMember):
        if not hasattr(host, "streams_task_offsets"):
            raise ConfigError(
                "a streams-group member runs in an App (its consumer answers the task callbacks)"
            )
        streams_host = cast(StreamsGroupHost, host)
        return StreamsGroupDriver(member, client, streams_host, metadata_interval_ms=metadata_interval_ms)
    return MemberDriver(member, client, host, metadata_interval_ms=metadata_interval_ms)


def member_epoch(member: GroupMember) -> int:
    """The classic generation, or the KIP-848 / streams-group member epoch."""
    return member.member_epoch if isinstance(member, EpochMember) else member.generation


def member_metrics(member: GroupMember) -> dict[str, float]:
    """The classic member's metrics, or a KIP-848 member's epoch and partition count."""
    if isinstance(member, ConsumerMember):
        return {
            "member-epoch": float(member.member_epoch),
            "assigned-partitions": float(len(member.owned_partitions)),
        }
    if isinstance(member, StreamsMember):
        return {
            "member-epoch": float(member.member_epoch),
            "assigned-active-tasks": float(len(member.owned.active)),
            "assigned-standby-tasks": float(len(member.owned.standby)),
        }
    return dict(member.metrics(monotonic_ms()))


def committed_offsets(
    offsets: Mapping[TopicPartition, int], metadata: Mapping[TopicPartition, str] | None
) -> tuple[CommittedOffset, ...]:
    """``offsets`` with their metadata strings (none: empty), sorted by partition."""
    meta = metadata or {}
    return tuple(
        CommittedOffset(partition=tp, offset=off, metadata=meta.get(tp, ""))
        for tp, off in sorted(offsets.items())
    )


async def send_offset_commit(
    client: GroupCoordinatorClient,
    member: GroupMember,
    config: ConsumerConfig,
    offsets: Mapping[TopicPartition, int],
    epoch: int,
    *,
    metadata: Mapping[TopicPartition, str] | None = None,
) -> OffsetCommitResponse:
    """OffsetCommit with the member's id and ``epoch``: v8 for a classic member, v9 (member
    epoch) for a KIP-848 one; ``metadata``: the strings committed with the offsets."""
    request = OffsetCommitRequest(
        group_id=config.group_id,
        generation_id=epoch,
        member_id=member.member_id,
        group_instance_id=config.group_instance_id,
        offsets=committed_offsets(offsets, metadata),
    )
    timeout_s = config.request_timeout_ms / 1000
    if isinstance(member, EpochMember):
        response: OffsetCommitResponse = await send_consumer_group_request(
            client, request, timeout_s=timeout_s
        )
    else:
        response = await client.send(request, timeout_s=timeout_s)
    return response


async def send_txn_offset_commit(
    client: GroupCoordinatorClient,
    member: GroupMember,
    config: ConsumerConfig,
    offsets: Mapping[TopicPartition, int],
    *,
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    metadata: Mapping[TopicPartition, str] | None = None,
) -> TxnOffsetCommitResponse:
    """TxnOffsetCommit v3: ``offsets`` join the producer's transaction with the member's id,
    generation (KIP-848: member epoch) and instance id, so the coordinator rejects them once the
    member was fenced (KIP-447). An answer that says the coordinator moved makes the client look
    it up again."""
    request = TxnOffsetCommitRequest(
        transactional_id=transactional_id,
        group_id=config.group_id,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        generation_id=member_epoch(member),
        member_id=member.member_id,
        group_instance_id=config.group_instance_id,
        offsets=committed_offsets(offsets, metadata),
    )
    response: TxnOffsetCommitResponse = await client.send(request, timeout_s=config.request_timeout_ms / 1000)
    moved = {KafkaErrorCode.NOT_COORDINATOR, KafkaErrorCode.COORDINATOR_NOT_AVAILABLE}
    if any(code in moved for _, code in response.errors):
        await client.reset()
    return response


async def wait_for_new_epoch(
    member: GroupMember, sent: int, timeout_ms: int, stop: Callable[[], bool]
) -> bool:
    """Wait (up to ``timeout_ms``, or until ``stop()``) until a KIP-848 member's epoch is no
    longer ``sent``; whether it moved to a new one (a classic member: never)."""
    if not isinstance(member, EpochMember):
        return False
    deadline = monotonic_ms() + timeout_ms
    while member.member_epoch == sent and monotonic_ms() < deadline and not stop():
        await asyncio.sleep(0.02)
    return member.member_epoch not in (sent, 0)


async def read_topic_metadata(conn: AsyncConnection, topics: tuple[str, ...]) -> TopicMetadata:
    """Partition counts and topic ids of ``topics`` (Metadata v12). A topic the broker does not
    know yet, or whose partitions are not all led, is left out: no news, not zero. A topic this
    client may not see is an :class:`~streamtasks.errors.AuthorizationError` (fatal)."""
    response = await conn.call(metadata_request(topics), MetadataResponse)
    denied = sorted(str(t.name) for t in response.topics if t.error_code.value == TOPIC_AUTHORIZATION_FAILED)
    if denied:
        raise AuthorizationError(
            f"the broker at {conn.peer} denies this client access to topic(s) {', '.join(denied)}:"
            " TOPIC_AUTHORIZATION_FAILED (an ACL allowing Describe and Read is missing)"
        )
    counts: dict[str, int] = {}
    ids: dict[str, uuid.UUID] = {}
    for topic in response.topics:
        if topic.error_code.value == 0 and topic.partitions and topic.name is not None:
            counts[str(topic.name)] = len(topic.partitions)
            if topic.topic_id is not None and topic.topic_id != uuid_zero:
                ids[str(topic.name)] = topic.topic_id
    return TopicMetadata(partitions=counts, topic_ids=ids)


async def send_offset_commit_retrying(
    client: GroupCoordinatorClient,
    member: GroupMember,
    config: ConsumerConfig,
    offsets: Mapping[TopicPartition, int],
    epoch: int,
    *,
    metadata: Mapping[TopicPartition, str] | None = None,
) -> OffsetCommitResponse:
    """:func:`send_offset_commit`, sent again while it fails for a reason of the broker's side
    (:data:`RETRY_CODES` on every failed partition, or a dropped connection) for up to the
    request timeout, ``retry_backoff_ms`` apart, each time to the coordinator looked up again:
    a commit that meets a coordinator moving off a dead broker lands on the new one instead of
    being given up. The last answer is returned (the last ConnectionLost raised).

    It stops sooner, with :class:`~streamtasks.errors.CommitFailedError`, once the member has
    left the generation the commit was sent with (a classic member's generation changed; a
    KIP-848 member's epoch went back to 0: its partitions were lost, e.g. no heartbeat answered
    within the session timeout). Such a commit can only be refused, and retrying it held the
    application's poll loop for the whole request timeout: in the broker-crash drill the
    poll timer (``max.poll.interval.ms``) then expired too, and the member left the group
    again just as the new coordinator had taken it back. A KIP-848 epoch that merely moved on
    keeps it retrying (STALE_MEMBER_EPOCH is :meth:`Consumer.commit`'s to handle)."""
    deadline = monotonic_ms() + config.request_timeout_ms
    while True:
        try:
            response = await send_offset_commit(client, member, config, offsets, epoch, metadata=metadata)
        except ConnectionLost:
            if monotonic_ms() >= deadline:
                raise
        else:
            failed = [err for _, err in response.errors if err is not KafkaErrorCode.NONE]
            if not failed or not all(err in RETRY_CODES for err in failed) or monotonic_ms() >= deadline:
                return response
        await asyncio.sleep(config.retry_backoff_ms / 1000)
        if generation_left(member, epoch):
            raise CommitFailedError(
                f"offset commit given up: sent with generation/epoch {epoch}, the member is at"
                f" {member_epoch(member)} now (its partitions were lost or the group rebalanced)"
                " while the coordinator could not be reached"
            )


def generation_left(member: GroupMember, epoch: int) -> bool:
    """Whether a commit sent at ``epoch`` can no longer be accepted: the classic member's
    generation is another one, or the KIP-848 / streams member is out of the group (epoch 0
    or below: fenced, partitions lost)."""
    now = member_epoch(member)
    if isinstance(member, EpochMember):
        return now != epoch and now <= 0
    return now != epoch


def fetch_answered(response: OffsetFetchResponse, *, unstable_is_final: bool = False) -> bool:
    """Whether an OffsetFetch answer is final (not one of :data:`RETRY_CODES`, overall or for
    a partition: the committed offsets are not known yet). ``unstable_is_final``: an
    UNSTABLE_OFFSET_COMMIT is the caller's to handle (a ``read_committed`` member keeps such a
    partition owned but unfetched), not a reason to ask again here."""
    retry = RETRY_CODES - {KafkaErrorCode.UNSTABLE_OFFSET_COMMIT} if unstable_is_final else RETRY_CODES
    return response.error not in retry and not any(err in retry for _, _, err in response.offsets)


async def fetch_committed(
    client: GroupCoordinatorClient, config: ConsumerConfig, partitions: tuple[TopicPartition, ...]
) -> dict[TopicPartition, int]:
    """The committed offsets of ``partitions`` (those with none are left out); see
    :func:`fetch_offsets`."""
    response = await fetch_offsets(client, config, partitions)
    return {tp: off for tp, off, err in response.offsets if err is KafkaErrorCode.NONE and off >= 0}


async def fetch_offsets(
    client: GroupCoordinatorClient,
    config: ConsumerConfig,
    partitions: tuple[TopicPartition, ...],
    *,
    require_stable: bool = False,
) -> OffsetFetchResponse:
    """The OffsetFetch answer for ``partitions``, asked again while the coordinator is moving
    (:func:`fetch_answered`) for up to half the session timeout (the member's loop waits
    meanwhile). Kafka's consumer never starts an assigned partition at ``auto.offset.reset``
    because the coordinator could not answer: with ``latest`` that would skip every record
    after the last commit. ``require_stable`` (KIP-447, ``read_committed``): offsets a pending
    transaction holds come back as UNSTABLE_OFFSET_COMMIT for the caller. Raises
    ConnectionLost, or :class:`~streamtasks.errors.BrokerError` naming the code, when it still
    has no answer."""
    deadline = monotonic_ms() + min(config.request_timeout_ms, config.session_timeout_ms // 2)
    request = OffsetFetchRequest(
        group_id=config.group_id, partitions=partitions, require_stable=require_stable
    )
    while True:
        try:
            response: OffsetFetchResponse = await client.send(
                request, timeout_s=config.request_timeout_ms / 1000
            )
        except ConnectionLost:
            if monotonic_ms() >= deadline:
                raise
        else:
            if fetch_answered(response, unstable_is_final=require_stable):
                return response
            if monotonic_ms() >= deadline:
                codes = sorted(
                    {response.error.name, *(err.name for _, _, err in response.offsets)} - {"NONE"}
                )
                raise BrokerError(
                    f"OffsetFetch for group {config.group_id!r} still answered {', '.join(codes)}"
                )
        await asyncio.sleep(config.retry_backoff_ms / 1000)
