"""TLS and authentication of the HTTP servers (no broker): live HTTPS with a CA made at test time
(streamtasks.embedded.certs, the ``cryptography`` package), a wrong or missing token or password
answered 401, mutual TLS, and the secrets in no repr, error or DEBUG log line."""

from __future__ import annotations

import asyncio
import logging
import ssl
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from pydantic import SecretStr, ValidationError

from streamtasks.embedded.certs import CertKit, make_cert_kit
from streamtasks.errors import ConfigError
from streamtasks.runtime.http_security import HttpSecurity
from streamtasks.runtime.http_server import HttpServers

TOKEN = "tok-3f9a1c77e2b54d0b"
PASSWORD = "pw-8c1d5e9f0a2b"


@pytest.fixture(scope="module")
def kit(tmp_path_factory: pytest.TempPathFactory) -> CertKit:
    return make_cert_kit(tmp_path_factory.mktemp("http-certs"))


async def _hello(_: web.Request) -> web.Response:
    return web.Response(text="hello")


async def _serve(security: HttpSecurity) -> tuple[HttpServers, int]:
    servers = HttpServers(security)
    servers.add_routes("127.0.0.1", 0, [web.get("/metrics", _hello)])
    await servers.start()
    return servers, servers.port("127.0.0.1", 0)


async def _get(
    url: str, *, ssl_context: ssl.SSLContext | bool = True, headers: dict[str, str] | None = None
) -> tuple[int, str, str | None]:
    connector = aiohttp.TCPConnector(ssl=ssl_context)
    async with (
        aiohttp.ClientSession(connector=connector) as session,
        session.get(url, headers=headers) as got,
    ):
        return got.status, await got.text(), got.headers.get("WWW-Authenticate")


def _trusting(kit: CertKit, *, client_cert: bool = False) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=kit.ca_cert)
    if client_cert:
        context.load_cert_chain(kit.client_cert, kit.client_key)
    return context


def test_https_with_a_bearer_token_401_without_it_and_the_token_never_logged(
    kit: CertKit, caplog: pytest.LogCaptureFixture
) -> None:
    security = HttpSecurity(certfile=kit.broker_cert, keyfile=kit.broker_key, token=SecretStr(TOKEN))
    caplog.set_level(logging.DEBUG)

    async def scenario() -> list[tuple[int, str, str | None]]:
        servers, port = await _serve(security)
        url = f"https://localhost:{port}/metrics"
        try:
            return [
                await _get(url, ssl_context=_trusting(kit), headers={"Authorization": f"Bearer {TOKEN}"}),
                await _get(url, ssl_context=_trusting(kit)),
                await _get(url, ssl_context=_trusting(kit), headers={"Authorization": "Bearer wrong"}),
                await _get(url, ssl_context=_trusting(kit), headers={"Authorization": f"Basic {TOKEN}"}),
                await _get(url, ssl_context=_trusting(kit), headers={"Authorization": f"bearer  {TOKEN}"}),
            ]
        finally:
            await servers.stop()

    ok, missing, wrong, other_scheme, lower_case = asyncio.run(scenario())
    assert ok[:2] == (200, "hello")
    for status, body, challenge in (missing, wrong, other_scheme):
        assert status == 401
        assert '"unauthorized"' in body
        assert challenge == 'Bearer realm="streamtasks"'
    assert lower_case[0] == 200  # the scheme is case-insensitive (RFC 7235)
    assert security.scheme == "https"
    assert TOKEN not in repr(security)
    assert TOKEN not in str(security)
    assert TOKEN not in security.model_dump_json()
    assert caplog.records, "aiohttp and asyncio log at DEBUG"
    assert all(TOKEN not in r.getMessage() for r in caplog.records)
    assert TOKEN not in caplog.text


def test_basic_auth_constant_time_check_and_plain_http_to_a_tls_server_fails(kit: CertKit) -> None:
    security = HttpSecurity.model_validate(
        {
            "ssl.certificate.location": str(kit.broker_cert),
            "ssl.key.location": str(kit.broker_key),
            "basic.username": "ops",
            "basic.password": PASSWORD,
        }
    )
    assert security.authorization() is not None
    assert security.authorized(security.authorization())
    assert not security.authorized(None)
    assert not security.authorized("Basic b3BzOndyb25n")  # ops:wrong
    assert PASSWORD not in repr(security)

    async def scenario() -> tuple[int, int, str]:
        servers, port = await _serve(security)
        try:
            header = security.authorization()
            assert header is not None
            good = await _get(
                f"https://127.0.0.1:{port}/metrics",
                ssl_context=_trusting(kit),
                headers={"Authorization": header},
            )
            bad = await _get(
                f"https://127.0.0.1:{port}/metrics",
                ssl_context=_trusting(kit),
                headers={"Authorization": "Basic b3BzOndyb25n"},
            )
            try:
                await _get(f"http://127.0.0.1:{port}/metrics")
                plain = "answered"
            except aiohttp.ClientError as exc:
                plain = type(exc).__name__
            return good[0], bad[0], plain
        finally:
            await servers.stop()

    good, bad, plain = asyncio.run(scenario())
    assert (good, bad) == (200, 401)
    assert plain != "answered"


def test_mutual_tls_refuses_a_client_without_a_certificate(kit: CertKit) -> None:
    security = HttpSecurity(
        certfile=kit.broker_cert, keyfile=kit.broker_key, cafile=kit.ca_cert, require_client_cert=True
    )
    client = security.client_ssl_context()
    assert client is not None  # the query client: trusts cafile, presents certfile

    async def scenario() -> tuple[int, int, str]:
        servers, port = await _serve(security)
        url = f"https://localhost:{port}/metrics"
        try:
            with_cert = await _get(url, ssl_context=_trusting(kit, client_cert=True))
            peer = await _get(url, ssl_context=client)
            try:
                await _get(url, ssl_context=_trusting(kit))
                without = "answered"
            except (aiohttp.ClientError, ssl.SSLError, ConnectionError) as exc:
                without = type(exc).__name__
            return with_cert[0], peer[0], without
        finally:
            await servers.stop()

    with_cert, peer, without = asyncio.run(scenario())
    assert (with_cert, peer) == (200, 200)
    assert without != "answered"


def test_settings_are_checked_and_a_bad_file_is_one_clear_error(kit: CertKit, tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="both certfile and keyfile"):
        HttpSecurity(certfile=kit.broker_cert)
    with pytest.raises(ValidationError, match="require_client_cert needs"):
        HttpSecurity(certfile=kit.broker_cert, keyfile=kit.broker_key, require_client_cert=True)
    with pytest.raises(ValidationError, match="not both") as caught:
        HttpSecurity(token=SecretStr(TOKEN), username="u", password=SecretStr(PASSWORD))
    assert TOKEN not in str(caught.value)
    assert PASSWORD not in str(caught.value)
    with pytest.raises(ValidationError, match="username and password"):
        HttpSecurity(username="u")
    missing = HttpSecurity(certfile=tmp_path / "nope.pem", keyfile=tmp_path / "nope.key")
    with pytest.raises(ConfigError, match=r"nope\.pem"):
        missing.server_ssl_context()
    wrong_password = HttpSecurity(
        certfile=kit.client_cert, keyfile=kit.encrypted_key, key_password=SecretStr("not-it")
    )
    with pytest.raises(ConfigError) as bad:
        wrong_password.server_ssl_context()
    assert "not-it" not in str(bad.value)
    assert HttpSecurity().authorized(None)
    assert HttpSecurity().scheme == "http"
