"""Topic administration shared by the embedded broker helpers and the application runtime:
one CreateTopics request builder and one answer check, sent over a blocking or an asyncio
connection.

Only the controller may create topics on Apache Kafka; a broker that is not the controller
answers NOT_CONTROLLER, which :func:`create_topics_async` reports as a :class:`BrokerError`
naming the topics. Single-broker clusters (the embedded one) always are the controller.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from kio.schema.create_topics.v4 import request as create_req
from kio.schema.create_topics.v4.response import CreateTopicsResponse
from kio.static.primitive import i16, i32

from streamtasks.errors import BrokerError
from streamtasks.runtime.connection import AsyncConnection, parse_bootstrap

__all__ = [
    "TOPIC_ALREADY_EXISTS",
    "TopicSpec",
    "check_create_topics",
    "create_topics_async",
    "create_topics_request",
    "topic_specs",
]

TOPIC_ALREADY_EXISTS = 36


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
    bootstrap_servers: str,
    topics: Mapping[str, int] | Iterable[TopicSpec],
    *,
    exist_ok: bool = True,
    client_id: str = "streamtasks",
) -> None:
    """Create topics through the first bootstrap server; existing topics are fine with ``exist_ok``."""
    specs = topic_specs(topics)
    if not specs:
        return
    host, port = parse_bootstrap(bootstrap_servers)[0]
    conn = await AsyncConnection.open(host, port, client_id=client_id)
    try:
        response = await conn.call(create_topics_request(specs), CreateTopicsResponse)
    finally:
        await conn.close()
    check_create_topics(response, exist_ok=exist_ok)
