"""An App's metrics through OpenTelemetry before it joins a group (no broker; the SDK's in-memory
reader, no mock): ``metrics_otel`` builds the one source without a ``/metrics`` server, and an
event refreshes what the instruments report (the live run: tests/integration/
test_app_http_security.py); over OTLP/HTTP to a real receiver, what arrives equals the scrape."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import aiohttp
import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from streamtasks.app import App
from streamtasks.app.events import TaskCreated
from streamtasks.app.otel import export_otel
from streamtasks.runtime.otel import sdk_meter_provider
from tests.app.test_metrics import make
from tests.runtime.test_otel import read
from tests.runtime.test_otel_export import PASSWORD, otlp_env
from tests.runtime.victoria_metrics import as_stored, differences, victoria_metrics
from topology.ids import TaskId

LABELS = (("application_id", "wc"), ("client_id", "c1"))


def test_metrics_otel_without_a_metrics_port_serves_no_http(tmp_path: Path) -> None:
    app: App = make(tmp_path, metrics_otel=True)
    exporter = app.metrics_exporter
    assert exporter is not None
    assert exporter.otel is not None  # the API's global MeterProvider (a no-op until configured)
    assert app.http.addresses == ()
    assert exporter.otel.names == frozenset()  # until the first event
    app.emit(TaskCreated(at_ms=1, task=TaskId(0, 0), role="active", offset_sum=0))
    assert "kafka_streams_stream_thread_metrics_process_total" in exporter.otel.names


def test_an_event_refreshes_the_instruments(tmp_path: Path) -> None:
    app: App = make(tmp_path, metrics_port=0, metrics_host="127.0.0.1")
    assert app.metrics_exporter is not None
    reader = InMemoryMetricReader()
    bridge = export_otel(app.metrics_exporter, MeterProvider(metric_readers=[reader]))
    assert read(reader) == {}
    bridge.refresh()
    before = read(reader)
    assert before["kafka_streams_stream_thread_metrics_process_total"] == {LABELS: 0.0}
    assert before["streamtasks_dead_lettered_records_total"] == {LABELS: 0.0}
    app.emit(TaskCreated(at_ms=1, task=TaskId(0, 0), role="active", offset_sum=0))
    after = read(reader)
    assert after["streamtasks_app_events_total"] == {(*LABELS, ("event", "TaskCreated")): 1.0}


def test_the_metrics_over_otlp_to_a_real_receiver_equal_the_scrape(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """OTLP/HTTP (``sdk_meter_provider("otlp")``) to VictoriaMetrics: every name of ``/metrics``
    arrives, as its kind (tests/runtime/victoria_metrics.py), with the scrape's labels and values;
    the credential header reaches the receiver (it asks basic auth) and no log line at DEBUG."""
    caplog.set_level(logging.DEBUG)
    app: App = make(tmp_path, metrics_port=0, metrics_host="127.0.0.1")
    exporter = app.metrics_exporter
    assert exporter is not None
    with victoria_metrics(tmp_path, password=PASSWORD) as vm:
        otlp_env(monkeypatch, vm.otlp_endpoint, vm.authorization)
        provider = sdk_meter_provider("otlp")
        export_otel(exporter, provider)
        app.emit(TaskCreated(at_ms=1, task=TaskId(0, 0), role="active", offset_sum=0))
        app.emit(TaskCreated(at_ms=2, task=TaskId(0, 1), role="standby", offset_sum=0))

        async def nothing() -> None:
            await asyncio.sleep(0)

        async def scrape() -> str:
            await exporter.timed(nothing)()  # a commit (the latency histogram; no broker)
            app.emit(
                TaskCreated(at_ms=3, task=TaskId(0, 2), role="active", offset_sum=0)
            )  # a refresh after it
            await app.http.start()
            try:
                port = app.http.port("127.0.0.1", 0)
                async with (
                    aiohttp.ClientSession() as session,
                    session.get(f"http://127.0.0.1:{port}/metrics") as r,
                ):
                    assert r.status == 200
                    return await r.text()
            finally:
                await app.http.stop()

        text = asyncio.run(scrape())  # the same moment: nothing changes the registry after the refresh
        assert provider.force_flush() is True
        expected = as_stored(text)
        got = vm.agreeing(expected)
        provider.shutdown()
    assert differences(got, expected) == []
    assert "kafka_streams_stream_thread_metrics_commit_latency_seconds_count_total" in got  # a counter
    assert "streamtasks_active_tasks" in got  # a gauge
    assert got["streamtasks_app_events_total"][(*LABELS, ("event", "TaskCreated"))] == 3.0
    assert vm.authorization.split(" ", 1)[1] not in caplog.text
    assert PASSWORD not in caplog.text
