"""An App's Prometheus metrics before it joins a group (no broker): names, labels, the events
counted and the commits timed (the live scrape is tests/integration/test_metrics_live.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from prometheus_client import generate_latest

from streamtasks.app import App, ProcessorContext, Record
from streamtasks.app.events import TaskCreated
from streamtasks.app.metrics import METRICS_PATH, snake
from topology import TopologyBuilder
from topology.ids import TaskId


def noop(ctx: ProcessorContext, record: Record) -> None:
    return None


def make(tmp_path: Path, **settings: object) -> App:
    builder = TopologyBuilder("wc")
    builder.stream("lines").store("counts")
    return App(
        builder.build(), {0: noop}, application_id="wc", bootstrap_servers="127.0.0.1:9",
        state_dir=str(tmp_path), client_id="c1", **settings,
    )  # fmt: skip


def test_no_metrics_port_no_exporter_and_no_server(tmp_path: Path) -> None:
    app = make(tmp_path)
    assert app.metrics_exporter is None
    assert app.http.addresses == ()


def test_the_exposition_names_labels_events_and_commit_latency(tmp_path: Path) -> None:
    app = make(tmp_path, metrics_port=0, metrics_host="127.0.0.1")
    exporter = app.metrics_exporter
    assert exporter is not None
    assert app.http.addresses == (("127.0.0.1", 0),)
    assert [r.method for r in exporter.routes()] == ["GET"]
    assert METRICS_PATH == "/metrics"
    app.emit(TaskCreated(at_ms=1, task=TaskId(0, 0), role="active", offset_sum=0))
    app.emit(TaskCreated(at_ms=2, task=TaskId(0, 1), role="standby", offset_sum=0))

    assert app.commit.__name__ == "timed_commit"  # what the App's loops call

    async def commit() -> None:
        await asyncio.sleep(0)

    async def commit_twice() -> None:
        timed = exporter.timed(commit)
        await timed()
        await timed()

    asyncio.run(commit_twice())
    text = generate_latest(exporter.registry).decode()
    labels = 'application_id="wc",client_id="c1"'
    assert f"kafka_streams_stream_thread_metrics_process_total{{{labels}}} 0.0" in text
    assert f"kafka_streams_stream_thread_metrics_commit_latency_seconds_count{{{labels}}} 2.0" in text
    assert f'streamtasks_app_events_total{{{labels},event="TaskCreated"}} 2.0' in text
    assert f"streamtasks_dead_lettered_records_total{{{labels}}} 0.0" in text
    assert "# TYPE kafka_streams_stream_task_metrics_dropped_records_total counter" in text
    assert "kafka_consumer_coordinator_metrics_" not in text  # not started: no member yet
    assert snake("rebalance-latency-avg") == "rebalance_latency_avg"
