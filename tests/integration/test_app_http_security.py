"""Interactive queries and metrics of Apps whose HTTP servers speak TLS with client certificates
and ask a bearer token (a CA made at test time), on a real broker: every word is answered right
from each of two processes (``app.query`` crosses to the other process over HTTPS with the
token), a plain client without the token gets 401 on ``/stores`` and ``/metrics``, and one App's
metrics read through OpenTelemetry (the SDK's in-memory reader, no mock) show the records it
processed, the same figure its ``/metrics`` shows. The token is in no log line (DEBUG)."""

from __future__ import annotations

import asyncio
import collections
import logging
import ssl
import uuid
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from pydantic import SecretStr

from streamtasks.app.otel import export_otel
from streamtasks.embedded import Cluster
from streamtasks.embedded.certs import make_cert_kit
from streamtasks.runtime.admin import create_topics_async
from streamtasks.runtime.http_security import HttpSecurity
from tests.integration.test_app_queries import WORDS, _until_all_right, free_port, make_app, start_and_feed
from tests.integration.test_metrics_live import sample
from tests.runtime.test_otel import read

pytestmark = pytest.mark.integration

TOKEN = "iq-token-0d4c8e2f71"
PROCESSED = "kafka_streams_stream_thread_metrics_process_total"


async def _get(url: str, context: ssl.SSLContext, headers: dict[str, str]) -> tuple[int, str]:
    async with (
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context)) as session,
        session.get(url, headers=headers) as answer,
    ):
        return answer.status, await answer.text()


async def _scenario(bootstrap: str, tmp: Path) -> dict[str, Any]:
    kit = make_cert_kit(tmp / "certs")
    security = HttpSecurity(
        certfile=kit.broker_cert, keyfile=kit.broker_key, cafile=kit.ca_cert,
        require_client_cert=True, token=SecretStr(TOKEN),
    )  # fmt: skip
    run = uuid.uuid4().hex[:8]
    app_id, source = f"iqs-{run}", f"iqs-lines-{run}"
    await create_topics_async(bootstrap, {source: 4})
    lines = [" ".join(WORDS[(i * 7 + j) % len(WORDS)] for j in range(i % 5 + 1)) for i in range(200)]
    expected = dict(collections.Counter(w for line in lines for w in line.split()))
    ports = [free_port() for _ in range(2)]
    settings = {"bootstrap_servers": bootstrap, "http_security": security, "metrics_host": "127.0.0.1"}
    apps = [make_app(app_id, source, tmp / str(p), p, {**settings, "metrics_port": p}) for p in ports]
    reader = InMemoryMetricReader()
    assert apps[0].metrics_exporter is not None
    export_otel(apps[0].metrics_exporter, MeterProvider(metric_readers=[reader]))
    runners = await start_and_feed(apps, bootstrap, source, lines)
    out: dict[str, Any] = {"words": len(expected)}
    try:
        out["tally"] = await _until_all_right(apps, expected, 120)
        peer = f"127.0.0.1:{ports[1]}"
        hosts = [(await apps[0].query("counts", w)).host for w in expected]
        out["remote"] = hosts.count(peer)
        trusted = ssl.create_default_context(cafile=kit.ca_cert)
        trusted.load_cert_chain(kit.client_cert, kit.client_key)
        base = f"https://127.0.0.1:{ports[0]}"
        out["with_token"] = await _get(
            f"{base}/stores/counts/{WORDS[0]}", trusted, {"Authorization": f"Bearer {TOKEN}"}
        )
        out["no_token"] = (await _get(f"{base}/stores/counts/{WORDS[0]}", trusted, {}))[0]
        out["metrics_no_token"] = (await _get(f"{base}/metrics", trusted, {"Authorization": "Bearer x"}))[0]
        await apps[0].commit()  # an App event: the OpenTelemetry snapshot is refreshed
        out["otel"] = read(reader)
        out["scrape"] = (await _get(f"{base}/metrics", trusted, {"Authorization": f"Bearer {TOKEN}"}))[1]
    finally:
        for app in apps:
            await app.stop()
        for task in runners:
            task.cancel()
        await asyncio.gather(*runners, return_exceptions=True)
    return out


def test_queries_and_metrics_over_mutual_tls_with_a_token(
    kafka: Cluster, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    out = asyncio.run(_scenario(kafka.bootstrap_servers, tmp_path))
    words = out["words"]
    assert out["tally"]["right"] == 2 * words, out["tally"]
    assert 0 < out["remote"] < words  # app 0 reached app 1 for some words, over HTTPS
    status, body = out["with_token"]
    assert status == 200, body
    assert '"found": true' in body
    assert (out["no_token"], out["metrics_no_token"]) == (401, 401)
    otel = out["otel"]
    processed = sum(otel[PROCESSED].values())
    assert processed > 0
    assert "streamtasks_dead_lettered_records_total" in otel
    assert "kafka_streams_stream_thread_metrics_commit_latency_seconds_count" in otel
    assert any(name.startswith("kafka_consumer_coordinator_metrics_rebalance") for name in otel)
    assert "streamtasks_task_changelog_lag_records" in otel or "streamtasks_active_tasks" in otel
    scraped = sample(out["scrape"], PROCESSED)
    assert scraped is not None
    assert scraped >= processed  # one source: the later scrape has at least as many
    assert TOKEN not in caplog.text
    print(f"\nwords {words}, answered right {out['tally']['right']}, app0 routed {out['remote']} remotely;"
          f" OpenTelemetry {PROCESSED} = {processed:.0f}, /metrics = {scraped:.0f}")  # fmt: skip
