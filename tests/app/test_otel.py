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
from streamtasks.embedded._process import free_port
from streamtasks.runtime.otel import sdk_meter_provider
from tests.app.test_metrics import make
from tests.runtime.test_otel import read
from tests.runtime.test_otel_export import PASSWORD, otel_lines, otlp_env
from tests.runtime.victoria_metrics import as_stored, differences, victoria_metrics
from topology.ids import TaskId

LABELS = (("application_id", "wc"), ("client_id", "c1"))


async def get_metrics(app: App) -> str:
    """The App's ``/metrics`` over HTTP (its servers started)."""
    port = app.http.port("127.0.0.1", 0)
    async with aiohttp.ClientSession() as session, session.get(f"http://127.0.0.1:{port}/metrics") as r:
        assert r.status == 200
        return await r.text()


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
            # a refresh after it:
            app.emit(TaskCreated(at_ms=3, task=TaskId(0, 2), role="active", offset_sum=0))
            await app.http.start()
            try:
                return await get_metrics(app)
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


def test_a_receiver_down_leaves_the_app_and_its_metrics_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The SDK's reader exports every 100 ms to a port nobody listens on while the App handles
    events and serves ``/metrics``: no exception reaches the App, one line is logged."""
    caplog.set_level(logging.DEBUG)
    app: App = make(tmp_path, metrics_port=0, metrics_host="127.0.0.1")
    exporter = app.metrics_exporter
    assert exporter is not None
    otlp_env(monkeypatch, f"http://127.0.0.1:{free_port('127.0.0.1')}/v1/metrics", f"Bearer {PASSWORD}")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "0.5")
    monkeypatch.setenv("OTEL_METRIC_EXPORT_INTERVAL", "100")
    provider = sdk_meter_provider("otlp")
    export_otel(exporter, provider)

    async def work() -> str:
        await app.http.start()
        try:
            for n in range(30):  # 3 s of events while the exports fail
                app.emit(TaskCreated(at_ms=n, task=TaskId(0, n), role="active", offset_sum=0))
                await asyncio.sleep(0.1)
            return await get_metrics(app)
        finally:
            await app.http.stop()

    text = asyncio.run(work())
    provider.shutdown()
    assert 'streamtasks_app_events_total{application_id="wc",client_id="c1",event="TaskCreated"} 30.0' in text
    (line,) = otel_lines(caplog)
    assert "failed: [Errno 111] Connection refused" in line
    assert PASSWORD not in caplog.text
