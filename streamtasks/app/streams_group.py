"""An App in a streams group (KIP-1071, ``group_protocol="streams"``): its topology as the
heartbeat declares it, its member, and what the group asks of it (task offsets, internal
topics, shutdown). The broker's task assignor places the tasks; the runtime's
:class:`~streamtasks.runtime.streams_driver.StreamsGroupDriver` turns them into the consumer's
partitions (actives) and assignment user data (standbys, warm-ups), so the App runs them as it
runs any assignment (docs/streams-groups.md, "The App in a streams group").

The declared topology follows Kafka Streams' for the same application id: subtopology ``n`` is
``"n"``; its source topics; its stores' changelogs ``<application id>-<store>-changelog`` with
their topic configs (partition count left to the broker, which takes the subtopology's); the
repartition topics it reads (``<application id>-<name>-repartition``, with a partition count
when the App fixes one) and writes; every internal topic's configs as Kafka Streams declares
them (its defaults included, sorted by key) and replication factor -1 unless the App sets one,
so a Kafka Streams application with the same topology and names shares the group; its sources
in one copartition group when it has several (streamtasks requires every source of a
subtopology to be co-partitioned)."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Awaitable, Callable, Mapping

from streamtasks.app.config import AppConfig
from streamtasks.app.restorer import Restorer
from streamtasks.app.tasks import TaskSet
from streamtasks.membership.streams import (
    EndpointsChanged,
    StreamsMember,
    StreamsMemberConfig,
    TaskOffsetsUpdated,
)
from streamtasks.protocol.streams_group import (
    CopartitionGroup,
    Endpoint,
    EndpointToPartitions,
    KeyValue,
    Subtopology,
    TopicInfo,
)
from streamtasks.protocol.streams_group import Topology as DeclaredTopology
from streamtasks.runtime.admin import set_group_configs
from streamtasks.runtime.consumer_driver import new_member_id
from streamtasks.runtime.http_server import split_host_port
from streamtasks.runtime.streams_tasks import task_offsets
from topology.ids import TaskId, TopicPartition
from topology.model import Topology
from topology.names import repartition_topic

__all__ = [
    "INTERNAL_TOPIC_CONFIGS",
    "REPARTITION_CONFIGS",
    "STANDBY_REPLICAS",
    "StreamsWiring",
    "declared_topology",
    "streams_wiring",
    "user_endpoint",
]

#: The streams-group config that sets how many standbys each task gets (Apache Kafka 4.2+).
STANDBY_REPLICAS = "streams.num.standby.replicas"
#: What Kafka Streams 4.4 declares for every internal topic (its ``InternalTopicConfig``
#: defaults), and for a repartition topic on top: a joining member's topology must equal the
#: group's field by field, configs included, to share a group with Kafka Streams' workers.
INTERNAL_TOPIC_CONFIGS = {"message.timestamp.type": "CreateTime"}
REPARTITION_CONFIGS = {
    "cleanup.policy": "delete",
    "message.timestamp.type": "CreateTime",
    "retention.ms": "-1",
    "segment.bytes": "52428800",
}


def declared_topology(topology: Topology, *, replication_factor: int = -1) -> DeclaredTopology:
    """The App's topology as a streams-group member declares it (see the module docstring);
    ``replication_factor`` -1 (or 0): the broker's default, declared -1 as Kafka Streams does."""
    app_id = topology.application_id
    rf = replication_factor if replication_factor > 0 else -1
    fixed = {r.name: r.partitions or 0 for r in topology.repartition_topics}
    subtopologies = []
    for sub in sorted(topology.subtopologies, key=lambda s: s.id):
        repartition_sources = tuple(
            TopicInfo(
                name=_repartition(app_id, r),
                partitions=fixed.get(r, 0),
                replication_factor=rf,
                topic_configs=_configs(REPARTITION_CONFIGS),
            )
            for r in sub.repartition_sources
        )
        changelogs = tuple(
            TopicInfo(
                name=store.changelog_topic(app_id),
                replication_factor=rf,
                topic_configs=_configs({**store.changelog_configs(), **INTERNAL_TOPIC_CONFIGS}),
            )
            for store in sorted(sub.stores, key=lambda s: s.name)
            if store.logging
        )
        copartition: tuple[CopartitionGroup, ...] = ()
        if len(sub.sources) + len(repartition_sources) > 1:
            copartition = (
                CopartitionGroup(
                    source_topics=tuple(range(len(sub.sources))),
                    repartition_source_topics=tuple(range(len(repartition_sources))),
                ),
            )
        subtopologies.append(
            Subtopology(
                subtopology_id=str(sub.id),
                source_topics=tuple(sub.sources),
                state_changelog_topics=changelogs,
                repartition_sink_topics=tuple(_repartition(app_id, r) for r in sub.repartition_sinks),
                repartition_source_topics=repartition_sources,
                copartition_groups=copartition,
            )
        )
    return DeclaredTopology(epoch=0, subtopologies=tuple(subtopologies))


def user_endpoint(application_server: str | None) -> Endpoint | None:
    """The member's endpoint for interactive queries: ``application_server`` (``host:port``)."""
    if application_server is None:
        return None
    host, port = split_host_port(application_server)
    return Endpoint(host=host, port=port)


def _configs(configs: Mapping[str, str]) -> tuple[KeyValue, ...]:
    """Sorted by key, as Kafka Streams declares them (the broker compares them in order)."""
    return tuple(KeyValue(key=k, value=v) for k, v in sorted(configs.items()))


def _repartition(app_id: str, name: str) -> str:
    return repartition_topic(app_id, name)


class StreamsWiring:
    """What the App's consumer answers for a streams group: its member (made again at start,
    with the process id the state directory holds), the task offsets, the internal topics, and
    the latest endpoints-to-partitions the broker sent (``endpoints``, what interactive queries
    route by: :class:`~streamtasks.streams.hosts.EndpointPartitionsHosts`)."""

    def __init__(
        self,
        topology: Topology,
        *,
        config: Callable[[DeclaredTopology, str], StreamsMemberConfig],
        replication_factor: int,
        process_id: Callable[[], uuid.UUID | None],
        offset_sums: Callable[[], Mapping[TaskId, int]],
        changelogs_of: Callable[[TaskId], tuple[TopicPartition, ...]],
        end_offsets: Callable[[], Mapping[TopicPartition, int]],
        create_topics: Callable[[], Awaitable[None]],
        group_configs: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """``config(topology, member_id)``: the member's settings (its process id is set by
        :meth:`member`); ``group_configs``: set the group's configs before joining."""
        self.topology = declared_topology(topology, replication_factor=replication_factor)
        #: Kept for the process's lifetime, rejoins included.
        self._config = config(self.topology, new_member_id())
        self._process_id = process_id
        self._offset_sums = offset_sums
        self._changelogs_of = changelogs_of
        self._end_offsets = end_offsets
        self.create_topics = create_topics
        self._group_configs = group_configs
        #: The latest ``partitions_by_user_endpoint`` (replaced, never mutated) and its epoch.
        self.endpoints: tuple[EndpointToPartitions, ...] = ()
        self.endpoints_epoch = -1

    def endpoints_changed(self, change: EndpointsChanged) -> None:
        """The broker's new endpoint information (sent when its epoch moves past the member's)."""
        self.endpoints = change.endpoints
        self.endpoints_epoch = change.epoch

    async def prepare(self) -> None:
        """Before the member joins: the group's configs (the standby count)."""
        if self._group_configs is not None:
            await self._group_configs()

    def member(self) -> StreamsMember:
        """A member with the process id of the state directory (a random one before it is read)."""
        process = self._process_id()
        return StreamsMember(dataclasses.replace(self._config, process_id=str(process or uuid.uuid4())))

    def task_offsets(self) -> TaskOffsetsUpdated:
        """The changelog offset sum of every task with local state, and the sum of its
        changelogs' end offsets as last listed."""
        sums = self._offset_sums()
        ends = self._end_offsets()
        end_sums: dict[TaskId, int] = {}
        for tid in sums:
            parts = self._changelogs_of(tid)
            if parts and all(tp in ends for tp in parts):
                end_sums[tid] = sum(ends[tp] for tp in parts)
        return TaskOffsetsUpdated(task_offsets=task_offsets(sums), task_end_offsets=task_offsets(end_sums))


def streams_wiring(
    cfg: AppConfig,
    topology: Topology,
    *,
    tasks: TaskSet,
    restorer: Restorer,
    process_id: Callable[[], uuid.UUID | None],
    create_topics: Callable[[], Awaitable[None]],
) -> StreamsWiring | None:
    """The App's streams-group wiring (None unless ``group_protocol="streams"``)."""
    if cfg.group_protocol != "streams":
        return None

    def member_config(declared: DeclaredTopology, member_id: str) -> StreamsMemberConfig:
        return StreamsMemberConfig(
            group_id=cfg.application_id,
            member_id=member_id,
            process_id="",
            topology=declared,
            instance_id=cfg.group_instance_id,
            rack_id=cfg.rack,
            user_endpoint=user_endpoint(cfg.application_server),
            rebalance_timeout_ms=cfg.rebalance_timeout_ms,
            heartbeat_interval_ms=cfg.heartbeat_interval_ms,
            request_timeout_ms=cfg.request_timeout_ms,
        )

    async def group_configs() -> None:
        # Standbys are the group's setting in a streams group (the broker's assignor places
        # them): the App's num.standby.replicas becomes it, when it asks for any.
        standbys = {STANDBY_REPLICAS: str(cfg.num_standby_replicas)}
        await set_group_configs(cfg.client_settings(), cfg.application_id, standbys, client_id=cfg.client_id)

    def changelogs_of(tid: TaskId) -> tuple[TopicPartition, ...]:
        info = tasks.info_of(tid)
        return () if info is None else info.changelog_partitions

    return StreamsWiring(
        topology,
        config=member_config,
        replication_factor=cfg.replication_factor,
        process_id=process_id,
        offset_sums=tasks.offset_sums,
        changelogs_of=changelogs_of,
        end_offsets=restorer.cached_end_offsets,
        create_topics=create_topics,
        group_configs=group_configs if cfg.num_standby_replicas > 0 else None,
    )
