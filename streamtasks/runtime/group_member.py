"""What a :class:`~streamtasks.runtime.consumer.Consumer` needs from its group protocol, apart
from the driver: the member it runs (classic or KIP-848, from its config), the offset commit
that carries the member's generation or epoch, and the topic metadata (with topic ids)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Mapping, Sequence

from kio.schema.metadata.v12.response import MetadataResponse
from kio.static.constants import uuid_zero

import assignors as assignor_registry
from assignors.partition.types import PartitionAssignor
from streamtasks.errors import AuthorizationError, ConfigError
from streamtasks.membership.classic import ClassicMember, MemberConfig
from streamtasks.membership.consumer import ConsumerMember, ConsumerMemberConfig
from streamtasks.protocol.classic_group import CommittedOffset, OffsetCommitRequest, OffsetCommitResponse
from streamtasks.protocol.errors import KafkaErrorCode
from streamtasks.protocol.txn_offsets import TxnOffsetCommitRequest, TxnOffsetCommitResponse
from streamtasks.runtime.admin import metadata_request
from streamtasks.runtime.config import ConsumerConfig
from streamtasks.runtime.connection import AsyncConnection, GroupCoordinatorClient
from streamtasks.runtime.consumer_driver import TopicMetadata, new_member_id, send_consumer_group_request
from streamtasks.runtime.member_loop import monotonic_ms
from topology.ids import TopicPartition

__all__ = [
    "USER_DATA_PROVIDER_REMOVED",
    "GroupMember",
    "make_member",
    "member_epoch",
    "member_metrics",
    "read_topic_metadata",
    "send_offset_commit",
    "send_txn_offset_commit",
    "wait_for_new_epoch",
]

GroupMember = ClassicMember | ConsumerMember

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
    is the coordinator's, and ``session_timeout_ms`` only how long the member goes without a
    heartbeat answer before it gives its partitions up."""
    if partition_assignors is not None and not partition_assignors:
        raise ConfigError("partition_assignors must name at least one assignor")
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
        )
    )


def member_epoch(member: GroupMember) -> int:
    """The classic generation, or the KIP-848 member epoch."""
    return member.member_epoch if isinstance(member, ConsumerMember) else member.generation


def member_metrics(member: GroupMember) -> dict[str, float]:
    """The classic member's metrics, or a KIP-848 member's epoch and partition count."""
    if isinstance(member, ConsumerMember):
        return {
            "member-epoch": float(member.member_epoch),
            "assigned-partitions": float(len(member.owned_partitions)),
        }
    return dict(member.metrics(monotonic_ms()))


async def send_offset_commit(
    client: GroupCoordinatorClient,
    member: GroupMember,
    config: ConsumerConfig,
    offsets: Mapping[TopicPartition, int],
    epoch: int,
) -> OffsetCommitResponse:
    """OffsetCommit with the member's id and ``epoch``: v8 for a classic member, v9 (member
    epoch) for a KIP-848 one."""
    request = OffsetCommitRequest(
        group_id=config.group_id,
        generation_id=epoch,
        member_id=member.member_id,
        group_instance_id=config.group_instance_id,
        offsets=tuple(CommittedOffset(partition=tp, offset=off) for tp, off in sorted(offsets.items())),
    )
    timeout_s = config.request_timeout_ms / 1000
    if isinstance(member, ConsumerMember):
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
        offsets=tuple(CommittedOffset(partition=tp, offset=off) for tp, off in sorted(offsets.items())),
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
    if not isinstance(member, ConsumerMember):
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
