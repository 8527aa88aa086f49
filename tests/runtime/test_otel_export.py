"""The OTLP/HTTP exporter of ``sdk_meter_provider("otlp")`` over the wire (no mock): a receiver
that is down costs one log line however many exports fail, and one more once a real receiver
(VictoriaMetrics, tests/runtime/victoria_metrics.py) takes the exports; the headers
(``OTEL_EXPORTER_OTLP_HEADERS``, a credential) reach the receiver and no log line at DEBUG, nor
the endpoint's user information."""

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
    with socket.socket() as probe:  # nothing listens there
        assert probe.connect_ex(("127.0.0.1", port)) != 0
    otlp_env(
        monkeypatch, f"http://otel:{PASSWORD}@127.0.0.1:{port}/opentelemetry/v1/metrics", f"Bearer {PASSWORD}"
    )
    registry = CollectorRegistry()
    records = Counter("records_processed_total", "records", ["task_id"], registry=registry)
    Gauge("lag_records", "lag", ["task_id", "role"], registry=registry).labels(
        task_id="0_1", role="standby"
    ).set(7)
    provider = sdk_meter_provider("otlp")
    assert isinstance(provider, MeterProvider)
    exporter = reporting(provider)
    bridge = OtelBridge(registry, provider)
    for _ in range(3):  # three exports to nobody
        records.labels(task_id="0_0").inc()
        bridge.refresh()
        assert provider.force_flush() is False or exporter.failures > 0  # no exception either way
    assert exporter.failures == 3
    ours = [r for r in caplog.records if r.name == "streamtasks.otel"]
    assert [r.levelno for r in ours] == [logging.WARNING]
    line = ours[0].getMessage()
    assert f"http://127.0.0.1:{port}/opentelemetry/v1/metrics failed: [Errno 111] Connection refused" in line
    assert not [
        r for r in caplog.records if r.name.startswith("opentelemetry") and r.levelno >= logging.WARNING
    ]
    assert PASSWORD not in caplog.text
    provider.shutdown()


def test_exports_reach_victoria_metrics_with_the_header_and_recover(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    with victoria_metrics(tmp_path, password=PASSWORD) as vm:
        otlp_env(monkeypatch, vm.otlp_endpoint, "Basic d3Jvbmc6d3Jvbmc=")  # wrong:wrong
        registry = CollectorRegistry()
        Gauge("probe_value", "a gauge", registry=registry).set(4)
        provider = sdk_meter_provider("otlp")
        bridge = OtelBridge(registry, provider)
        bridge.refresh()
        provider.force_flush()
        provider.shutdown()
        ours = [r.getMessage() for r in caplog.records if r.name == "streamtasks.otel"]
        assert len(ours) == 1
        assert "failed: HTTP 401" in ours[0]

        otlp_env(monkeypatch, vm.otlp_endpoint, vm.authorization)
        provider = sdk_meter_provider("otlp")
        exporter = reporting(provider)
        exporter.failures = 2  # as after two failed exports: the next success says so
        bridge = OtelBridge(registry, provider)
        bridge.refresh()
        assert provider.force_flush() is True
        got = vm.wait(lambda stored: "probe_value" in stored)
        assert got["probe_value"] == {(): 4.0}
        provider.shutdown()
    assert [r.getMessage() for r in caplog.records if r.name == "streamtasks.otel"][1:] == [
        f"OTLP metrics export to {vm.otlp_endpoint} works again (2 exports failed)"
    ]
    secret = vm.authorization.split(" ", 1)[1]
    assert secret not in caplog.text
    assert PASSWORD not in caplog.text
