"""An App's metrics in the Prometheus exposition format, at ``/metrics`` on its HTTP server
(``metrics_port``; docs/operations.md lists every metric).

Names follow what the Prometheus JMX exporter's usual Kafka rules make of Kafka's own metrics:
``kafka_<client>_<metric group>_<metric name>`` in snake case (``kafka.streams:type=
stream-thread-metrics`` ``process-total`` becomes ``kafka_streams_stream_thread_metrics_process_total``;
the consumer's ``consumer-coordinator-metrics`` ``rebalance-total``
``kafka_consumer_coordinator_metrics_rebalance_total``), with ``application_id`` and
``client_id`` labels on every sample and ``task_id`` / ``store`` where Kafka has them as tags.
What Kafka has no metric for is ``streamtasks_...``. Everything is read from the App when
scraped, except the commit latency (a histogram the App's commits feed) and the event counts.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from typing import TYPE_CHECKING, Any, Protocol

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.registry import Collector

from streamtasks.app.config import AppConfig
from streamtasks.app.events import AppEvent
from streamtasks.app.restorer import Restorer
from streamtasks.app.tasks import TaskSet
from streamtasks.runtime.http_server import HttpServers

if TYPE_CHECKING:
    from aiohttp import web

    from streamtasks.runtime.otel import OtelBridge

__all__ = ["METRICS_PATH", "AppMetrics", "MetricsSource", "export_metrics", "snake"]

METRICS_PATH = "/metrics"
Family = CounterMetricFamily | GaugeMetricFamily
_CONSUMER = "kafka_consumer_coordinator_metrics_"
_THREAD = "kafka_streams_stream_thread_metrics_"
_TASK = "kafka_streams_stream_task_metrics_"
_CACHE = "kafka_streams_stream_record_cache_metrics_"
#: The App's own metric names (its ``metrics()`` dict) exported under Kafka Streams' groups.
_APP_NAMES = {
    "records-processed-total": (_THREAD + "process_total", "counter", "records processed"),
    "dropped-records-total": (_TASK + "dropped_records_total", "counter", "records a handler dropped"),
    "active-tasks": ("streamtasks_active_tasks", "gauge", "active tasks of this process"),
    "standby-tasks": ("streamtasks_standby_tasks", "gauge", "standby and warm-up tasks of this process"),
    "restoring-tasks": ("streamtasks_restoring_tasks", "gauge", "active tasks restoring their state"),
    "task-revivals-total": ("streamtasks_task_revivals_total", "counter", "tasks revived in place"),
    "task-migrations-total": (
        "streamtasks_task_migrations_total",
        "counter",
        "times this process was fenced",
    ),
}


def snake(name: str) -> str:
    """Kafka's dashed metric name in Prometheus' form."""
    return name.replace("-", "_").replace(".", "_")


class _Metered(Protocol):
    def metrics(self) -> dict[str, float]: ...


class MetricsSource(Protocol):
    """What the metrics read of an App (:class:`streamtasks.App` is one)."""

    config: AppConfig
    listeners: list[Callable[[AppEvent], None]]
    http: HttpServers
    tasks: TaskSet
    restorer: Restorer
    consumer: Any

    @property
    def started(self) -> bool: ...

    def metrics(self) -> dict[str, float]: ...

    async def commit(self) -> None: ...


def export_metrics(app: MetricsSource) -> AppMetrics:
    """Count ``app``'s events, time its commits and serve ``/metrics`` on its metrics port (if any)."""
    exporter = AppMetrics(app)
    exporter.attach()
    port = app.config.metrics_port
    if port is not None:  # else OpenTelemetry only (metrics_otel)
        app.http.add_routes(app.config.metrics_host, port, exporter.routes())
    return exporter


class AppMetrics(Collector):
    """The metrics of one App, in a registry of its own (several Apps may share a process)."""

    def __init__(self, app: MetricsSource) -> None:
        self.app = app
        self.registry = CollectorRegistry(auto_describe=False)
        cfg = app.config
        self._labels = {"application_id": cfg.application_id, "client_id": cfg.client_id}
        self.commit_latency = Histogram(
            _THREAD + "commit_latency_seconds",
            "time an App commit takes (flush, send, offset commit)",
            list(self._labels),
            registry=self.registry,
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
        ).labels(**self._labels)
        self.events: Counter[str] = Counter()
        #: The OpenTelemetry export of this registry (``metrics_otel``; :mod:`streamtasks.app.otel`).
        self.otel: OtelBridge | None = None
        self.registry.register(self)

    def attach(self) -> None:
        """Count the App's events and time its commits."""
        self.app.listeners.append(self.on_event)
        self.app.commit = self.timed(self.app.commit)  # type: ignore[method-assign]

    def timed(self, commit: Callable[[], Awaitable[None]]) -> Callable[[], Coroutine[Any, Any, None]]:
        async def timed_commit() -> None:
            start = time.perf_counter()
            try:
                await commit()
            finally:
                self.commit_latency.observe(time.perf_counter() - start)

        return timed_commit

    def on_event(self, event: AppEvent) -> None:
        self.events[type(event).__name__] += 1

    def routes(self) -> list[web.AbstractRouteDef]:
        from aiohttp import web

        async def handler(_: web.Request) -> web.Response:
            body = generate_latest(self.registry)
            return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

        return [web.get(METRICS_PATH, handler)]

    # -- collection ------------------------------------------------------------------------------

    def _family(self, kind: str, name: str, doc: str, extra: tuple[str, ...] = ()) -> Family:
        cls = CounterMetricFamily if kind == "counter" else GaugeMetricFamily
        return cls(name, doc, labels=[*self._labels, *extra])

    def collect(self) -> Iterator[Metric]:
        base = list(self._labels.values())
        app = self.app
        metrics = app.metrics()
        consumer = app.consumer.metrics() if app.started else {}
        for key, value in sorted(consumer.items()):
            if key.startswith("fetch-"):
                continue
            kind = "counter" if key.endswith("-total") and "latency" not in key else "gauge"
            family = self._family(kind, _CONSUMER + snake(key), f"the group member's {key} (Kafka's name)")
            family.add_metric(base, value)
            yield family
        for key, (name, kind, doc) in _APP_NAMES.items():
            if key in metrics:
                family = self._family(kind, name, doc)
                family.add_metric(base, metrics[key])
                yield family
        dead = self._family("counter", "streamtasks_dead_lettered_records_total", "records sent to the DLQ")
        dead.add_metric(base, float(app.tasks.records_dead_lettered))
        yield dead
        events = self._family("counter", "streamtasks_app_events_total", "App events by type", ("event",))
        for name, count in sorted(self.events.items()):
            events.add_metric([*base, name], float(count))
        yield events
        yield from self._task_metrics(base)

    def _task_metrics(self, base: list[str]) -> Iterator[Metric]:
        tasks = self.app.tasks.tasks
        ends = self.app.restorer.cached_end_offsets()
        lag = self._family(
            "gauge", "streamtasks_task_changelog_lag_records",
            "records a task's local state is behind its changelogs (as of the last end offsets read)",
            ("task_id", "role"),
        )  # fmt: skip
        remaining = self._family(
            "gauge", _TASK + "restore_remaining_records_total", "records an active task still restores",
            ("task_id",),
        )  # fmt: skip
        restored = self._family("gauge", _TASK + "restore_total", "records restored so far", ("task_id",))
        hits = self._family("counter", _CACHE + "hits_total", "record cache hits", ("task_id", "store"))
        misses = self._family("counter", _CACHE + "misses_total", "record cache misses", ("task_id", "store"))
        ratio = self._family("gauge", _CACHE + "hit_ratio", "record cache hit ratio", ("task_id", "store"))
        for tid, task in sorted(tasks.items()):
            role = "active" if task.is_active else ("warmup" if task.warmup else "standby")
            behind = task.lag(ends)
            if behind is not None:
                lag.add_metric([*base, str(tid), role], float(behind))
            target = task.restore_target
            if target is not None:
                left = sum(max(0, end - task.changelog_offsets.get(tp, 0)) for tp, end in target.items())
                remaining.add_metric([*base, str(tid)], float(left))
                restored.add_metric([*base, str(tid)], float(task.restore.records))
            for store, cache in sorted(task.caches.items()):
                labels = [*base, str(tid), store]
                hits.add_metric(labels, float(cache.hits))
                misses.add_metric(labels, float(cache.misses))
                reads = cache.hits + cache.misses
                ratio.add_metric(labels, cache.hits / reads if reads else 0.0)
        yield from (lag, remaining, restored, hits, misses, ratio)
