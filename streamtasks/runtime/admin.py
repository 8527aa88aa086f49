"""Topic administration shared by the embedded broker helpers and the application runtime:
one CreateTopics request builder and one answer check, sent over a blocking or an asyncio
connection.

A created topic is ready when these return: they ask for its metadata until every partition
has a leader (Apache Kafka elects leaders a moment after CreateTopics answers; a producer that
writes at once gets NOT_LEADER_OR_FOLLOWER and a consumer group leader that assigns at once
does not see the topic yet).

Only the controller may create topics on Apache Kafka; a broker that is not the controller
answers NOT_CONTROLLER, which :func:`create_topics_async` reports as a :class:`BrokerError`
naming the topics. Single-broker clusters (the embedded one) always are the controller.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from kio.schema.create_topics.v4 import request as create_req
from kio.schema.create_topics.v4.response import CreateTopicsResponse
from kio.schema.incremental_alter_configs.v1 import request as alter_req
from kio.schema.incremental_alter_configs.v1.response import IncrementalAlterConfigsResponse
from kio.schema.metadata.v12 import request as metadata_req
from kio.schema.metadata.v12.response import MetadataResponse
from kio.static.primitive import i8, i16, i32

from streamtasks.errors import BrokerError
from streamtasks.runtime.connection import open_any
from streamtasks.runtime.security import ClientSettings

__all__ = [
    "TOPIC_ALREADY_EXISTS",
    "TopicSpec",
    "check_create_topics",
    "create_topics_async",
    "create_topics_request",
    "metadata_request",
    "set_group_configs",
    "topic_specs",
    "topics_ready",
]

#: How long topic creation waits for every new partition to have a leader.
READY_TIMEOUT_S = 15.0

TOPIC_ALREADY_EXISTS = 36
#: IncrementalAlterConfigs: the GROUP resource type (KIP-848 group configs) and the SET operation.
_GROUP_RESOURCE, _SET = 32, 0


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicSpec:
    """A topic to create: ``configs`` such as ``{"cleanup.policy": "compact"}``;
    ``replication_factor`` -1 takes the broker's default."""

    name: str
    partitions: int
    configs: Mapping[str, str] = field(default_factory=dict)
    replication_factor: int = -1


def topic_specs(topics: Mapping[str, int] | Iterable[TopicSpec]) -> list[TopicSpec]:
    """``name → partitions`` or specs, as specs."""
    if isinstance(topics, Mapping):
        return [TopicSpec(name=n, partitions=p) for n, p in topics.items()]
    return list(topics)


def create_topics_request(specs: Iterable[TopicSpec]) -> create_req.CreateTopicsRequest:
    return create_req.CreateTopicsRequest(
        topics=tuple(
            create_req.CreatableTopic(
                name=s.name,  # type: ignore[arg-type]
                num_partitions=i32(s.partitions),
                replication_factor=i16(s.replication_factor),
                assignments=(),
                configs=tuple(
                    create_req.CreatableTopicConfig(name=k, value=v) for k, v in sorted(s.configs.items())
                ),
            )
            for s in specs
        )
    )


def metadata_request(names: Iterable[str]) -> metadata_req.MetadataRequest:
    return metadata_req.MetadataRequest(
        topics=tuple(
            metadata_req.MetadataRequestTopic(topic_id=None, name=n)  # type: ignore[arg-type]
            for n in sorted(set(names))
        ),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )


def topics_ready(response: MetadataResponse, specs: Iterable[TopicSpec]) -> bool:
    """Whether the metadata shows every topic of ``specs`` with all its partitions led."""
    by_name = {str(t.name): t for t in response.topics}
    for spec in specs:
        topic = by_name.get(spec.name)
        if topic is None or topic.error_code.value != 0 or not topic.partitions:
            return False
        if any(p.error_code.value != 0 or p.leader_id < 0 for p in topic.partitions):
            return False
    return True


def check_create_topics(response: CreateTopicsResponse, *, exist_ok: bool) -> None:
    """Raise :class:`BrokerError` listing every topic the broker refused."""
    failures = [
        f"{r.name}: {r.error_code.name} {r.error_message or ''}".strip()
        for r in response.topics
        if r.error_code.value != 0 and not (exist_ok and r.error_code.value == TOPIC_ALREADY_EXISTS)
    ]
    if failures:
        raise BrokerError("create topics failed: " + "; ".join(failures))


async def create_topics_async(
    bootstrap: str | ClientSettings,
    topics: Mapping[str, int] | Iterable[TopicSpec],
    *,
    exist_ok: bool = True,
    client_id: str = "streamtasks",
) -> None:
    """Create topics through the first bootstrap server that accepts a connection (one that is
    down, a broker restarted or killed, is passed over); existing topics are fine with
    ``exist_ok``."""
    specs = topic_specs(topics)
    if not specs:
        return
    conn = await open_any(ClientSettings.of(bootstrap), client_id)
    try:
        response = await conn.call(create_topics_request(specs), CreateTopicsResponse)
        check_create_topics(response, exist_ok=exist_ok)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + READY_TIMEOUT_S
        ask = metadata_request(s.name for s in specs)
        while not topics_ready(await conn.call(ask, MetadataResponse), specs):
            if loop.time() > deadline:
                raise BrokerError(f"topics without a leader {READY_TIMEOUT_S:.0f}s after creation: {specs}")
            await asyncio.sleep(0.05)
    finally:
        await conn.close()


async def set_group_configs(
    bootstrap: str | ClientSettings,
    group_id: str,
    configs: Mapping[str, str],
    *,
    client_id: str = "streamtasks",
) -> None:
    """Set dynamic configs of group ``group_id`` (IncrementalAlterConfigs v1 on the GROUP
    resource, as ``kafka-configs --entity-type groups`` does; e.g. a streams group's
    ``streams.num.standby.replicas``). A refusal is a :class:`BrokerError` naming the cause."""
    request = alter_req.IncrementalAlterConfigsRequest(
        resources=(
            alter_req.AlterConfigsResource(
                resource_type=i8(_GROUP_RESOURCE),
                resource_name=group_id,
                configs=tuple(
                    alter_req.AlterableConfig(name=k, config_operation=i8(_SET), value=v)
                    for k, v in sorted(configs.items())
                ),
            ),
        ),
        validate_only=False,
    )
    settings = ClientSettings.of(bootstrap)
    conn = await open_any(settings, client_id)
    try:
        response = await conn.call(request, IncrementalAlterConfigsResponse)
    finally:
        await conn.close()
    for r in response.responses:
        if r.error_code.value != 0:
            raise BrokerError(
                f"{settings.bootstrap_servers} refused the configs of group {group_id!r} "
                f"({dict(configs)}): {r.error_code.name} {r.error_message or ''}".strip()
            )
