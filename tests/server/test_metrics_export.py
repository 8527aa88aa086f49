"""``streamtasks coordinator``'s metrics exported both ways from one source, on a real broker:
OpenTelemetry (the SDK's in-memory reader, no mock) and ``/metrics`` over HTTPS with a bearer
token (a CA made at test time); a scrape without the token is 401, and the token is in no log
line of the run (caplog at DEBUG); over OTLP/HTTP to a real receiver, what arrives equals the
scrape. The flags that set it up are parsed as the CLI does."""

from __future__ import annotations

import argparse
import asyncio
import io
import logging
import ssl
import uuid
from pathlib import Path

import aiohttp
import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from pydantic import SecretStr

from streamtasks.embedded import Cluster
from streamtasks.embedded.certs import make_cert_kit
from streamtasks.errors import ConfigError
from streamtasks.protocol import consumer_group_codec as codec
from streamtasks.protocol.consumer_group import ConsumerGroupHeartbeatRequest
from streamtasks.runtime.connection import AsyncConnection
from streamtasks.runtime.http_security import HttpSecurity
from streamtasks.server import CoordinatorServer, ServerConfig
from streamtasks.server.metrics_flags import add_metrics_security_arguments, metrics_security_from_args
from tests.integration.test_metrics_live import sample
from tests.runtime.test_otel import read
from tests.runtime.test_otel_export import PASSWORD, otlp_env
from tests.runtime.victoria_metrics import as_stored, differences, victoria_metrics

TOKEN = "coord-token-5b7e0c1a9d"


async def heartbeats(server: CoordinatorServer, topic: str, times: int) -> None:
    """``times`` KIP-848 heartbeats of member m1 of otel-group subscribed to ``topic``."""
    conn = await AsyncConnection.open("127.0.0.1", server.port)
    try:
        epoch = 0
        for _ in range(times):
            beat = ConsumerGroupHeartbeatRequest(
                group_id="otel-group", member_id="m1", member_epoch=epoch, rebalance_timeout_ms=5_000,
                subscribed_topic_names=(topic,), topic_partitions=(),
            )  # fmt: skip
            answer = codec.decode_heartbeat_response(
                await conn.call_raw(68, 1, codec.encode_heartbeat_request(beat, 1)), 1
            )
            assert answer.error == 0
            epoch = answer.member_epoch
    finally:
        await conn.close()


def test_the_flags_read_the_secrets_from_files(tmp_path: Path) -> None:
    kit = make_cert_kit(tmp_path / "certs")
    parser = argparse.ArgumentParser()
    add_metrics_security_arguments(parser)
    assert metrics_security_from_args(parser.parse_args([])) is None
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    args = parser.parse_args(
        ["--metrics-tls-cert", str(kit.broker_cert), "--metrics-tls-key", str(kit.broker_key),
         "--metrics-token-file", str(token), "--otel-metrics", "console"]
    )  # fmt: skip
    security = metrics_security_from_args(args)
    assert security is not None
    assert security.token is not None
    assert security.token.get_secret_value() == TOKEN
    assert security.scheme == "https"
    assert args.otel_metrics == "console"
    basic = tmp_path / "basic"
    basic.write_text("ops:s3cret")
    parsed = metrics_security_from_args(parser.parse_args(["--metrics-basic-auth-file", str(basic)]))
    assert parsed is not None
    assert parsed.auth_scheme == "Basic"
    basic.write_text("no-colon")
    with pytest.raises(ConfigError, match="username:password") as bad:
        metrics_security_from_args(parser.parse_args(["--metrics-basic-auth-file", str(basic)]))
    assert "no-colon" not in str(bad.value)
    with pytest.raises(ConfigError, match="cannot load the HTTP certificate"):
        metrics_security_from_args(
            parser.parse_args(
                ["--metrics-tls-cert", str(kit.broker_cert), "--metrics-tls-key", str(tmp_path / "no")]
            )
        )
    with pytest.raises(ConfigError, match="both certfile and keyfile"):
        metrics_security_from_args(parser.parse_args(["--metrics-tls-cert", str(kit.broker_cert)]))


@pytest.mark.integration
def test_coordinator_metrics_through_otel_and_https_with_a_token(
    kafka: Cluster, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    kit = make_cert_kit(tmp_path / "certs")
    topic = f"otel-{uuid.uuid4().hex[:6]}"
    kafka.create_topics({topic: 2})
    reader = InMemoryMetricReader()
    server = CoordinatorServer(
        ServerConfig(
            bootstrap_servers=kafka.bootstrap_servers,
            listen_port=0,
            topic=f"_st_otel_{uuid.uuid4().hex[:8]}",
            status_interval_s=3600,
            metrics_port=0,
            metrics_security=HttpSecurity(
                certfile=kit.broker_cert, keyfile=kit.broker_key, token=SecretStr(TOKEN)
            ),
            otel_metrics=MeterProvider(metric_readers=[reader]),
            otel_refresh_s=0.1,
        ),
        out=io.StringIO(),
    )

    async def scrape(headers: dict[str, str]) -> tuple[int, str]:
        assert server.metrics_port is not None
        context = ssl.create_default_context(cafile=kit.ca_cert)
        url = f"https://localhost:{server.metrics_port}/metrics"
        async with (
            aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context)) as session,
            session.get(url, headers=headers) as answer,
        ):
            return answer.status, await answer.text()

    async def scenario() -> tuple[int, str, int]:
        await server.start()
        try:
            await heartbeats(server, topic, 3)
            await asyncio.sleep(0.5)  # a few refreshes
            status, text = await scrape({"Authorization": f"Bearer {TOKEN}"})
            refused, _ = await scrape({})
            return status, text, refused
        finally:
            await server.stop()

    status, text, refused = asyncio.run(scenario())
    assert (status, refused) == (200, 401)
    got = read(reader)
    assert got["kafka_server_group_coordinator_metrics_group_count"] == {(("protocol", "consumer"),): 1.0}
    assert got["streamtasks_coordinator_members"] == {(("group_id", "otel-group"),): 1.0}
    assert got["streamtasks_coordinator_heartbeats_total"][()] >= 3
    assert (("group_id", "otel-group"),) in got["streamtasks_coordinator_group_epoch"]
    # one source: the scrape says the same
    assert sample(text, "streamtasks_coordinator_members", group_id="otel-group") == 1
    assert (
        sample(text, "streamtasks_coordinator_heartbeats_total")
        == got["streamtasks_coordinator_heartbeats_total"][()]
    )
    assert TOKEN not in caplog.text


@pytest.mark.integration
def test_coordinator_metrics_over_otlp_to_a_real_receiver(
    kafka: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """``--otel-metrics otlp`` (the ``OTEL_EXPORTER_OTLP_*`` variables, a basic-auth header) to
    VictoriaMetrics: every name of the coordinator's ``/metrics`` arrives as its kind with the
    scrape's values (tests/runtime/victoria_metrics.py); the credential is in no log line."""
    caplog.set_level(logging.DEBUG)
    topic = f"otlp-{uuid.uuid4().hex[:6]}"
    kafka.create_topics({topic: 2})
    with victoria_metrics(tmp_path, password=PASSWORD) as vm:
        otlp_env(monkeypatch, vm.otlp_endpoint, vm.authorization)
        monkeypatch.setenv("OTEL_METRIC_EXPORT_INTERVAL", "300")  # ms
        server = CoordinatorServer(
            ServerConfig(
                bootstrap_servers=kafka.bootstrap_servers, listen_port=0,
                topic=f"_st_otlp_{uuid.uuid4().hex[:8]}", status_interval_s=3600,
                metrics_port=0, metrics_host="127.0.0.1", otel_metrics="otlp", otel_refresh_s=0.1,
            ),
            out=io.StringIO(),
        )  # fmt: skip

        async def scenario() -> str:
            await server.start()
            try:
                await heartbeats(server, topic, 3)
                await asyncio.sleep(0.5)  # refreshes and exports of the settled values
                url = f"http://127.0.0.1:{server.metrics_port}/metrics"
                async with aiohttp.ClientSession() as session, session.get(url) as answer:
                    assert answer.status == 200
                    text = await answer.text()
                await asyncio.sleep(1.0)  # a refresh and an export after the scrape
                return text
            finally:
                await server.stop()  # a last export

        text = asyncio.run(scenario())
        expected = as_stored(text)
        got = vm.agreeing(expected)
    assert differences(got, expected) == []
    assert got["streamtasks_coordinator_members"] == {(("group_id", "otel-group"),): 1.0}
    assert got["streamtasks_coordinator_heartbeats_total"][()] >= 3
    assert vm.authorization.split(" ", 1)[1] not in caplog.text
    assert PASSWORD not in caplog.text
