"""How an App is wired to what it serves: its restorer (:func:`changelog_restorer`), the streams
assignor it offers the group (:func:`streams_assignor`), and over HTTP (:attr:`App.http`, one
server per address) interactive queries on ``application_server`` (:mod:`streamtasks.app.queries`,
:mod:`streamtasks.app.query_http`) and Prometheus ``/metrics`` on ``metrics_port``
(:mod:`streamtasks.app.metrics`, the ``metrics`` extra)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

import assignors as assignor_registry
from assignors.types import AssignmentConfigs
from streamtasks.app.changelog import ChangelogReader
from streamtasks.app.config import AppConfig
from streamtasks.app.events import AppEvent, wall_ms
from streamtasks.app.queries import StoreQueries
from streamtasks.app.query_http import QueryRouter
from streamtasks.app.restorer import Restorer
from streamtasks.app.tasks import TaskSet
from streamtasks.errors import ConfigError
from streamtasks.runtime.http_server import HttpServers, split_host_port
from streamtasks.state.serdes import Serde
from streamtasks.streams import StreamsPartitionAssignor
from streamtasks.streams.hosts import AssignmentInfoHosts, EndpointPartitionsHosts, HostMetadata
from streamtasks.streams.wiring import StreamsWire, streams_assignor_type
from topology.model import Topology

if TYPE_CHECKING:
    from streamtasks.app.metrics import AppMetrics

__all__ = ["Served", "changelog_restorer", "metrics_exporter", "query_router", "streams_assignor"]


class Served(Protocol):
    """What serving reads of an App (:class:`streamtasks.App` is one)."""

    config: AppConfig
    topology: Topology
    listeners: list[Callable[[AppEvent], None]]
    http: HttpServers
    tasks: TaskSet
    restorer: Restorer
    consumer: Any

    @property
    def started(self) -> bool: ...

    @property
    def closed(self) -> bool: ...

    def metrics(self) -> dict[str, float]: ...

    async def commit(self) -> None: ...


def query_router(app: Served, stores: Mapping[str, tuple[Serde[Any], Serde[Any]]]) -> QueryRouter:
    """The App's interactive queries, routed by the AssignmentInfo's hosts (classic / KIP-848)
    or, in a streams group, by the endpoints-to-partitions of the broker's heartbeat answers;
    the store route is added to ``app.http`` when ``application_server`` is set."""
    cfg = app.config
    hosts: HostMetadata = (
        EndpointPartitionsHosts(app.topology, lambda: app.consumer.streams_endpoint_partitions)
        if cfg.group_protocol == "streams"
        else AssignmentInfoHosts(lambda: app.tasks.info)
    )
    queries = StoreQueries(
        app.topology,
        app.tasks,
        stores,
        hosts=hosts,
        stable=lambda: app.started and not app.closed and app.consumer.stable,
        endpoint=cfg.application_server,
        end_offsets=app.restorer.cached_end_offsets,
    )
    router = QueryRouter(queries, timeout_s=cfg.request_timeout_ms / 1000, security=cfg.http_security)
    if cfg.application_server is not None:
        router.register(app.http, *split_host_port(cfg.application_server))
    return router


def metrics_exporter(app: Served) -> AppMetrics | None:
    """The App's ``/metrics`` on ``app.http`` and (``metrics_otel``) its OpenTelemetry export,
    from one source (None with neither)."""
    cfg = app.config
    if cfg.metrics_port is None and not cfg.metrics_otel:
        return None
    try:
        from streamtasks.app.metrics import export_metrics
    except ImportError as exc:  # prometheus-client and aiohttp: the "metrics" extra
        raise ConfigError(f"App metrics need pip install 'streamtasks-kafka[metrics]' ({exc})") from None
    exporter = export_metrics(app)
    if cfg.metrics_otel:
        try:
            from streamtasks.app.otel import export_otel
        except ImportError as exc:  # opentelemetry-api: the "otel" extra
            raise ConfigError(f"metrics_otel needs pip install 'streamtasks-kafka[otel]' ({exc})") from None
        export_otel(exporter)
    return exporter


def streams_assignor(
    cfg: AppConfig,
    topology: Topology,
    wire: StreamsWire,
    *,
    restorer: Restorer,
    tasks: TaskSet,
    process_id: Callable[[], uuid.UUID | None],
) -> StreamsPartitionAssignor:
    """The App's streams assignor, of the protocol and userdata versions ``wire`` pins; it reads
    end offsets through the restorer and offset sums from the tasks."""
    return streams_assignor_type(wire.protocol)(
        topology,
        task_assignor=assignor_registry.get(cfg.task_assignor),
        configs=AssignmentConfigs(
            num_standby_replicas=cfg.num_standby_replicas,
            acceptable_recovery_lag=cfg.acceptable_recovery_lag,
            max_warmup_replicas=cfg.max_warmup_replicas,
            probing_rebalance_interval_ms=cfg.probing_rebalance_interval_ms,
            rack_aware_assignment_tags=cfg.rack_aware_assignment_tags,
            rack_aware_assignment_strategy=cfg.rack_aware_assignment_strategy,
            rack_aware_assignment_traffic_cost=cfg.rack_aware_assignment_traffic_cost,
            rack_aware_assignment_non_overlap_cost=cfg.rack_aware_assignment_non_overlap_cost,
        ),
        end_offsets=restorer.cached_end_offsets,
        partition_racks=restorer.cached_partition_racks,
        now_ms=wall_ms,
        process_id=process_id,
        task_offset_sums=tasks.offset_sums,
        rack=cfg.rack,
        client_tags=dict(cfg.client_tags),
        endpoint=cfg.application_server,
        metadata_version=wire.metadata_version,
        latest_version=wire.latest_version,
    )


def changelog_restorer(
    cfg: AppConfig, topology: Topology, tasks: TaskSet, emit: Callable[[AppEvent], None]
) -> Restorer:
    """Changelog reading, restore progress, end offsets (the leader's lags) and lag reads."""
    settings = cfg.client_settings()
    reader = ChangelogReader(settings, client_id=cfg.client_id, isolation_level=cfg.isolation_level)
    return Restorer(
        reader,
        tasks,
        topics=topology.subscribed_topics(),
        emit=emit,
        read_racks=cfg.rack_aware_assignment_strategy != "none",
    )
