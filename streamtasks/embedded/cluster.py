"""Broker chores over the wire (ApiVersions, CreateTopics), and an existing cluster named by
``host:port``."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping

from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.api_versions.v3.response import ApiVersionsResponse
from kio.schema.create_topics.v4.response import CreateTopicsResponse
from kio.schema.metadata.v12.response import MetadataResponse

from streamtasks._version import __version__
from streamtasks.errors import BrokerError
from streamtasks.runtime.admin import (
    READY_TIMEOUT_S,
    TopicSpec,
    check_create_topics,
    create_topics_request,
    metadata_request,
    topic_specs,
    topics_ready,
)
from streamtasks.runtime.blocking import BlockingConnection

__all__ = ["BOOTSTRAP_ENV", "ExternalCluster", "api_versions", "create_topics"]

#: Environment variable naming an existing cluster to use instead of an embedded broker.
BOOTSTRAP_ENV = "STREAMTASKS_BOOTSTRAP"


def api_versions(host: str, port: int, *, timeout_s: float = 2.0) -> dict[int, tuple[int, int]]:
    """The broker's ApiVersions: api key → (min version, max version)."""
    with BlockingConnection(host, port, timeout_s=timeout_s) as conn:
        response = conn.call(
            ApiVersionsRequest(client_software_name="streamtasks", client_software_version=__version__),
            ApiVersionsResponse,
        )
    if response.error_code.value != 0:
        raise BrokerError(f"ApiVersions failed: {response.error_code.name}")
    return {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in response.api_keys}


def create_topics(
    host: str,
    port: int,
    topics: Mapping[str, int] | Iterable[TopicSpec],
    *,
    exist_ok: bool = True,
) -> None:
    """Create topics (name → partitions, or :class:`TopicSpec` with configs such as
    ``{"cleanup.policy": "compact"}``); an existing topic is fine unless ``exist_ok=False``."""
    specs = topic_specs(topics)
    with BlockingConnection(host, port) as conn:
        response = conn.call(create_topics_request(specs), CreateTopicsResponse)
        check_create_topics(response, exist_ok=exist_ok)
        deadline = time.monotonic() + READY_TIMEOUT_S
        ask = metadata_request(s.name for s in specs)
        while not topics_ready(conn.call(ask, MetadataResponse), specs):
            if time.monotonic() > deadline:
                raise BrokerError(f"topics without a leader {READY_TIMEOUT_S:.0f}s after creation: {specs}")
            time.sleep(0.05)


class ExternalCluster:
    """An existing Kafka cluster named by ``host:port`` (e.g. from ``$STREAMTASKS_BOOTSTRAP``)."""

    def __init__(self, bootstrap_servers: str) -> None:
        first = bootstrap_servers.split(",", maxsplit=1)[0].strip()
        host, sep, port = first.rpartition(":")
        if not sep or not port.isdigit():
            raise BrokerError(f"bootstrap servers must look like host:port, got {bootstrap_servers!r}")
        self.bootstrap_servers = bootstrap_servers
        self.host, self.port = host, int(port)

    def api_versions(self) -> dict[int, tuple[int, int]]:
        """The first bootstrap server's ApiVersions: api key → (min version, max version)."""
        return api_versions(self.host, self.port)

    def create_topics(
        self, topics: Mapping[str, int] | Iterable[TopicSpec], *, exist_ok: bool = True
    ) -> None:
        create_topics(self.host, self.port, topics, exist_ok=exist_ok)

    def stop(self) -> None:
        """Nothing to stop: the cluster is not ours."""
