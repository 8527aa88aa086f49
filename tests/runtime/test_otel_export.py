"""The OTLP/HTTP exporter of ``sdk_meter_provider("otlp")`` over the wire (no mock): a receiver
that is down costs one log line however many exports fail, and one more once a real receiver
(VictoriaMetrics, tests/runtime/victoria_metrics.py) takes the exports; a receiver refusing the
credential (HTTP 401) one line too. The credentials (the endpoint's user information,
``OTEL_EXPORTER_OTLP_HEADERS``) are in no log line at DEBUG; the App's and the coordinator's
metrics over OTLP: tests/app/test_otel.py, tests/server/test_metrics_export.py."""

from __future__ import annotations

import logging
import socket
from pathlib import Path

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from prometheus_client import CollectorRegistry, Counter, Gauge

from streamtasks.embedded._process import free_port
from streamtasks.runtime.otel import OtelBridge, sdk_meter_provider
from streamtasks.runtime.otel_export import ReportingExporter, redacted_endpoint
from tests.runtime.victoria_metrics import victoria_metrics

PASSWORD = "otlp-pass-7c41e9"


def otlp_env(monkeypatch: pytest.MonkeyPatch, endpoint: str, authorization: str) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", endpoint)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "Authorization=" + authorization.replace(" ", "%20"))
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "2")  # seconds: a down receiver's retries


def otel_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    """What ``streamtasks.otel`` logged; the exporter's own warnings must be held back."""
    loud = [r for r in caplog.records if r.name.startswith("opentelemetry") and r.levelno >= logging.WARNING]
    assert not loud, [r.getMessage() for r in loud]
    return [r.getMessage() for r in caplog.records if r.name == "streamtasks.otel"]


def reporting(provider: MeterProvider) -> ReportingExporter:
    (reader,) = provider._metric_readers  # type: ignore[attr-defined]  # the periodic reader it made
    exporter = reader._exporter  # type: ignore[attr-defined]
    assert isinstance(exporter, ReportingExporter)
    return exporter


def test_the_endpoint_is_logged_without_its_user_information() -> None:
    assert (
        redacted_endpoint("https://ops:pw@collector:4318/v1/metrics") == "https://collector:4318/v1/metrics"
    )
    assert redacted_endpoint("http://collector/v1/metrics") == "http://collector/v1/metrics"


def test_a_receiver_down_logs_one_line_then_one_when_it_is_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    port = free_port("127.0.0.1")
    with socket.socket() as probe:  # nothing listens there yet
        assert probe.connect_ex(("127.0.0.1", port)) != 0
    endpoint = f"http://127.0.0.1:{port}/opentelemetry/v1/metrics"
    otlp_env(monkeypatch, endpoint.replace("//", f"//otel:{PASSWORD}@"), f"Bearer {PASSWORD}")
    registry = CollectorRegistry()
    records = Counter("records_processed_total", "records", ["task_id"], registry=registry)
    lag = Gauge("lag_records", "lag", ["task_id", "role"], registry=registry)
    lag.labels(task_id="0_1", role="standby").set(7)
    provider = sdk_meter_provider("otlp")
    assert isinstance(provider, MeterProvider)
    exporter = reporting(provider)
    bridge = OtelBridge(registry, provider)
    for _ in range(3):  # three exports to nobody
        records.labels(task_id="0_0").inc()
        bridge.refresh()
        provider.force_flush()  # no exception (its answer does not say whether the export worked)
    assert exporter.failures == 3
    (line,) = otel_lines(caplog)
    assert line.startswith(f"OTLP metrics export to {endpoint} failed: [Errno 111] Connection refused;")
    assert PASSWORD not in caplog.text

    with victoria_metrics(tmp_path, password=PASSWORD, port=port) as vm:  # the receiver is back
        records.labels(task_id="0_0").inc()
        bridge.refresh()
        provider.force_flush()  # the endpoint's user information: basic auth (over the header)
        assert exporter.failures == 0
        got = vm.wait(lambda stored: "records_processed_total" in stored)
        provider.shutdown()
    assert got["records_processed_total"] == {(("task_id", "0_0"),): 4.0}
    assert got["lag_records"] == {(("role", "standby"), ("task_id", "0_1")): 7.0}
    assert otel_lines(caplog) == [line, f"OTLP metrics export to {endpoint} works again (3 exports failed)"]

    otlp_env(monkeypatch, endpoint, f"Bearer {PASSWORD}")
    with victoria_metrics(tmp_path, password=PASSWORD, port=port):
        provider = sdk_meter_provider("otlp")  # a 401: its own line
        OtelBridge(registry, provider).refresh()
        provider.force_flush()
        provider.shutdown()
    assert otel_lines(caplog)[2].startswith(f"OTLP metrics export to {endpoint} failed: HTTP 401")
    assert PASSWORD not in caplog.text
