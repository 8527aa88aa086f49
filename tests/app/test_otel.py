"""An App's metrics through OpenTelemetry before it joins a group (no broker; the SDK's in-memory
reader, no mock): ``metrics_otel`` builds the one source without a ``/metrics`` server, and an
event refreshes what the instruments report (the live run: tests/integration/
test_app_http_security.py)."""

from __future__ import annotations

from pathlib import Path

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from streamtasks.app import App
from streamtasks.app.events import TaskCreated
from streamtasks.app.otel import export_otel
from tests.app.test_metrics import make
from tests.runtime.test_otel import read
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
