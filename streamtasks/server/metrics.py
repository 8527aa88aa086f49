"""``streamtasks coordinator --metrics-port``: the coordinator's metrics in the Prometheus
exposition format at ``/metrics`` (docs/operations.md lists them).

Named as the Prometheus JMX exporter's usual rules name Apache Kafka's group coordinator
metrics (``kafka.server:type=group-coordinator-metrics`` ``group-count`` with its ``protocol``
tag becomes ``kafka_server_group_coordinator_metrics_group_count{protocol="consumer"}``);
what Kafka has no metric for is ``streamtasks_coordinator_...``. Read from the server when
scraped: heartbeats and requests are counters (heartbeats/s is ``rate()`` of the counter).
``--otel-metrics`` exports the same registry through OpenTelemetry (:func:`export_otel`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Protocol

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.registry import Collector

from streamtasks.coordinator.coordinator import GroupCoordinator
from streamtasks.errors import ConfigError
from streamtasks.runtime.http_security import HttpSecurity
from streamtasks.runtime.http_server import HttpServers
from streamtasks.server.handlers import Handlers

if TYPE_CHECKING:
    from streamtasks.runtime.otel import OtelBridge

__all__ = ["CoordinatorMetrics", "MetricsServed", "export_otel", "serve_metrics"]

_KAFKA = "kafka_server_group_coordinator_metrics_"
_OWN = "streamtasks_coordinator_"


class MetricsServed(Protocol):
    """What the metrics read of a running :class:`~streamtasks.server.server.CoordinatorServer`."""

    coordinator: GroupCoordinator | None
    handlers: Handlers | None

    @property
    def connections(self) -> int: ...


class CoordinatorMetrics(Collector):
    def __init__(self, server: MetricsServed) -> None:
        self.server = server
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)

    def collect(self) -> Iterator[Metric]:
        coordinator, handlers = self.server.coordinator, self.server.handlers
        if coordinator is None or handlers is None:
            return
        groups = coordinator.groups
        count = GaugeMetricFamily(_KAFKA + "group_count", "groups by protocol", labels=["protocol"])
        count.add_metric(["consumer"], float(len(groups)))
        yield count
        states = GaugeMetricFamily(
            _KAFKA + "consumer_group_count", "consumer groups by state", labels=["state"]
        )
        for state, n in sorted(Counter(g.state.value for g in groups.values()).items()):
            states.add_metric([state], float(n))
        yield states
        members = GaugeMetricFamily(_OWN + "members", "members of each group", labels=["group_id"])
        epoch = GaugeMetricFamily(_OWN + "group_epoch", "each group's epoch", labels=["group_id"])
        target = GaugeMetricFamily(
            _OWN + "assignment_epoch", "each group's target assignment epoch", labels=["group_id"]
        )
        for gid, group in sorted(groups.items()):
            members.add_metric([gid], float(len(group.members)))
            epoch.add_metric([gid], float(group.group_epoch))
            target.add_metric([gid], float(group.assignment_epoch))
        yield from (members, epoch, target)
        total = GaugeMetricFamily(_OWN + "members_total", "members of every group")
        total.add_metric([], float(sum(len(g.members) for g in groups.values())))
        yield total
        s = handlers.stats
        for name, value, doc in (
            ("heartbeats", s.heartbeats, "ConsumerGroupHeartbeat requests answered"),
            ("classic_requests", s.classic, "classic group requests answered"),
            ("offset_commits", s.commits, "OffsetCommit requests answered"),
            ("offset_fetches", s.fetches, "OffsetFetch requests answered"),
            ("forwarded_requests", s.forwarded, "requests forwarded to the backing cluster"),
            ("sasl_failures", s.sasl_failed, "failed SASL exchanges"),
            ("denied_requests", s.denied, "requests the ACLs denied"),
        ):
            family = CounterMetricFamily(_OWN + name, doc)
            family.add_metric([], float(value))
            yield family
        by_api = CounterMetricFamily(_OWN + "requests", "requests by API key", labels=["api_key"])
        for key, n in sorted(s.by_api.items()):
            by_api.add_metric([str(key)], float(n))
        yield by_api
        connections = GaugeMetricFamily(_OWN + "connections", "client connections open")
        connections.add_metric([], float(self.server.connections))
        yield connections


async def serve_metrics(
    server: MetricsServed,
    host: str,
    port: int,
    security: HttpSecurity | None = None,
    metrics: CoordinatorMetrics | None = None,
) -> tuple[HttpServers, int]:
    """Serve ``server``'s metrics at ``/metrics`` on ``host:port`` (with ``security``'s TLS and
    credentials); the servers and the bound port."""
    from aiohttp import web

    source = metrics if metrics is not None else CoordinatorMetrics(server)

    async def handler(_: web.Request) -> web.Response:
        return web.Response(
            body=generate_latest(source.registry), headers={"Content-Type": CONTENT_TYPE_LATEST}
        )

    http = HttpServers(security)
    http.add_routes(host, port, [web.get("/metrics", handler)])
    await http.start()
    return http, http.port(host, port)


def export_otel(metrics: CoordinatorMetrics, meter_provider: Any) -> OtelBridge:
    """The same metrics through OpenTelemetry: ``meter_provider`` an API ``MeterProvider``,
    ``"global"`` the API's global one, ``"console"`` / ``"otlp"`` an SDK one exporting there
    (:func:`streamtasks.runtime.otel.sdk_meter_provider`); refreshed by :meth:`OtelBridge.run`."""
    try:
        from streamtasks.runtime.otel import OtelBridge, sdk_meter_provider
    except ImportError as exc:  # opentelemetry-api: the "otel" extra
        raise ConfigError(
            f"OpenTelemetry metrics need pip install 'streamtasks-kafka[otel]' ({exc})"
        ) from None
    if meter_provider in ("console", "otlp"):
        meter_provider = sdk_meter_provider(meter_provider)
    return OtelBridge(metrics.registry, None if meter_provider == "global" else meter_provider)
