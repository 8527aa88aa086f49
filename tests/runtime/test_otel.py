"""The OpenTelemetry bridge on the real SDK (its in-memory reader, no mock): a Prometheus
registry's counters, gauges and histograms read back as OpenTelemetry instruments of the same
names, labels as attributes, refreshed in the caller's thread; instruments of names a later
refresh sees appear then."""

from __future__ import annotations

import io

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from streamtasks.errors import ConfigError
from streamtasks.runtime.otel import OtelBridge, sdk_meter_provider, snapshot


def read(reader: InMemoryMetricReader) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    """Every metric's points (attributes -> value: a sum's or a gauge's)."""
    data = reader.get_metrics_data()
    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    if data is None:  # no instrument yet
        return out
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            assert scope.scope.name == "streamtasks"
            for metric in scope.metrics:
                points = out.setdefault(metric.name, {})
                for point in metric.data.data_points:
                    attrs = tuple(sorted((k, str(v)) for k, v in (point.attributes or {}).items()))
                    points[attrs] = float(point.value)  # type: ignore[union-attr]
    return out


def test_a_registry_read_back_through_the_sdk() -> None:
    registry = CollectorRegistry()
    records = Counter("records_processed_total", "records", ["task_id"], registry=registry)
    lag = Gauge("lag_records", "lag", ["task_id", "role"], registry=registry)
    latency = Histogram("commit_latency_seconds", "commits", registry=registry, buckets=(0.1, 1.0))
    records.labels(task_id="0_0").inc(3)
    records.labels(task_id="0_1").inc(2)
    lag.labels(task_id="0_1", role="standby").set(7)
    latency.observe(0.2)
    latency.observe(0.4)

    reader = InMemoryMetricReader()
    bridge = OtelBridge(registry, MeterProvider(metric_readers=[reader]))
    bridge.refresh()
    got = read(reader)
    assert got["records_processed_total"] == {(("task_id", "0_0"),): 3.0, (("task_id", "0_1"),): 2.0}
    assert got["lag_records"] == {(("role", "standby"), ("task_id", "0_1")): 7.0}
    assert got["commit_latency_seconds_count"] == {(): 2.0}
    assert abs(got["commit_latency_seconds_sum"][()] - 0.6) < 1e-9
    assert not any(name.endswith(("_created", "_bucket")) for name in got)

    records.labels(task_id="0_0").inc(5)
    assert read(reader)["records_processed_total"][(("task_id", "0_0"),)] == 3.0  # until a refresh
    late = Gauge("appears_later", "a metric created after the first refresh", registry=registry)
    late.set(1.5)
    bridge.refresh()
    again = read(reader)
    assert again["records_processed_total"][(("task_id", "0_0"),)] == 8.0
    assert again["appears_later"] == {(): 1.5}
    assert "appears_later" in bridge.names


def test_snapshot_kinds() -> None:
    registry = CollectorRegistry()
    Counter("c_total", "c", registry=registry).inc()
    Gauge("g", "g", registry=registry).set(2)
    kinds = {name: kind for name, (kind, _, _) in snapshot(registry).items()}
    assert kinds == {"c_total": "counter", "g": "gauge"}


def test_the_sdk_provider_of_the_coordinator_flag() -> None:
    out = io.StringIO()
    provider = sdk_meter_provider("console", out=out)
    registry = CollectorRegistry()
    Gauge("coordinator_probe", "a gauge", registry=registry).set(4)
    OtelBridge(registry, provider).refresh()
    provider.force_flush()  # an export to stdout now
    provider.shutdown()
    assert '"name": "coordinator_probe"' in out.getvalue()
    try:
        import opentelemetry.exporter.otlp.proto.http  # noqa: F401
    except ImportError:
        with pytest.raises(ConfigError, match="opentelemetry-exporter-otlp-proto-http"):
            sdk_meter_provider("otlp")
