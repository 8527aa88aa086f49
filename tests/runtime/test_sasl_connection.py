"""The runtime's connection over SASL and TLS against a small in-test server (tests/runtime/
sasl_broker.py): each mechanism, KIP-368 re-authentication under load, and every failure as
one typed error naming the broker, counted so that nothing retries. The same against Apache
Kafka: tests/runtime/test_secure_connection.py."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime
import json
import random
import ssl
from collections.abc import AsyncIterator, Coroutine
from pathlib import Path
from typing import Any

import pytest
from kio.schema.heartbeat.v4.request import HeartbeatRequest
from kio.schema.heartbeat.v4.response import HeartbeatResponse
from kio.static.primitive import i32
from pydantic import SecretStr

from streamtasks.embedded.certs import CertKit, make_cert_kit
from streamtasks.errors import AuthenticationError, TlsError
from streamtasks.runtime.connection import AsyncConnection, ConnectionLost, GroupCoordinatorClient, open_any
from streamtasks.runtime.sasl_session import REAUTH_FRACTION, reauthentication_delay_s
from streamtasks.runtime.security import ClientSettings, SecuritySettings
from tests.runtime.sasl_broker import FakeSaslBroker

PASSWORD = "pencil-Secret-1"


def run(coro: Coroutine[Any, Any, None]) -> None:
    asyncio.run(asyncio.wait_for(coro, 30))


@contextlib.asynccontextmanager
async def serving(broker: FakeSaslBroker) -> AsyncIterator[FakeSaslBroker]:
    await broker.start()
    try:
        yield broker
    finally:
        await broker.close()


def app_broker(**kwargs: Any) -> FakeSaslBroker:
    return FakeSaslBroker(users={"app": PASSWORD}, **kwargs)


class Tokens:
    def __init__(self, sub: str = "app", bad: bool = False) -> None:
        self.sub, self.bad, self.calls = sub, bad, 0

    async def token(self) -> str:
        self.calls += 1
        now = int(datetime.datetime.now(datetime.UTC).timestamp())

        def part(obj: dict[str, object]) -> str:
            return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()

        body = part({"sub": self.sub, "iat": now, "exp": now + 3600})
        return f"{part({'alg': 'none'})}.{body}." if not self.bad else f"bad.{body}."


def sasl(mechanism: str, password: str = PASSWORD, **extra: object) -> SecuritySettings:
    if mechanism == "OAUTHBEARER":
        return SecuritySettings(
            security_protocol="SASL_PLAINTEXT", sasl_mechanism=mechanism, sasl_oauth_token_provider=Tokens()
        )
    return SecuritySettings.model_validate(
        {
            "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": mechanism,
            "sasl_plain_username": "app",
            "sasl_plain_password": password,
            **extra,
        }
    )


def heartbeat() -> HeartbeatRequest:
    return HeartbeatRequest(group_id="g", generation_id=i32(1), member_id="m")  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def kit(tmp_path_factory: pytest.TempPathFactory) -> CertKit:
    return make_cert_kit(tmp_path_factory.mktemp("certs"))


async def _open(broker: FakeSaslBroker, security: SecuritySettings) -> AsyncConnection:
    return await AsyncConnection.open("127.0.0.1", broker.port, security=security, timeout_s=5)


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"])
def test_each_mechanism_authenticates_before_the_first_request(mechanism: str) -> None:
    async def go() -> None:
        async with serving(app_broker()) as broker:
            conn = await _open(broker, sasl(mechanism))
            try:
                response = await conn.call(heartbeat(), HeartbeatResponse)
                assert response.error_code.value == 0
                assert (broker.accepted, broker.api_versions, broker.handshakes, broker.heartbeats) == (
                    1,
                    1,
                    1,
                    1,
                )
                assert broker.expired_requests == 0
            finally:
                await conn.close()

    run(go())


def test_wrong_password_is_one_authentication_error_naming_the_broker() -> None:
    async def go() -> None:
        async with serving(app_broker()) as broker:
            settings = ClientSettings(
                bootstrap_servers=broker.bootstrap, **dict(sasl("SCRAM-SHA-512", "wrong-Secret-2"))
            )
            client = GroupCoordinatorClient(settings, "g")
            with pytest.raises(AuthenticationError) as caught:
                await client.ensure_coordinator()
            await client.close()
            message = str(caught.value)
            assert f"the broker at {broker.bootstrap}" in message
            assert "SCRAM-SHA-512 as 'app'" in message
            assert "SASL_AUTHENTICATION_FAILED: Authentication failed during authentication" in message
            assert "wrong-Secret-2" not in message
            assert PASSWORD not in message
            assert broker.accepted == 1  # not retried

    run(go())


def test_unknown_mechanism_names_the_enabled_ones() -> None:
    async def go() -> None:
        async with serving(app_broker(mechanisms=("SCRAM-SHA-512",))) as broker:
            with pytest.raises(AuthenticationError) as caught:
                await open_any(ClientSettings(bootstrap_servers=broker.bootstrap, **dict(sasl("PLAIN"))))
            assert str(caught.value) == (
                f"the broker at {broker.bootstrap} does not enable SASL mechanism PLAIN:"
                " UNSUPPORTED_SASL_MECHANISM (enabled: SCRAM-SHA-512)"
            )
            assert broker.accepted == 1

    run(go())


def test_a_server_that_does_not_know_the_password_is_refused() -> None:
    async def go() -> None:
        async with serving(app_broker(bad_server_signature=True)) as broker:
            with pytest.raises(AuthenticationError, match="server signature does not match"):
                await _open(broker, sasl("SCRAM-SHA-256"))

    run(go())


def test_a_rejected_oauth_token_is_acknowledged_and_reported() -> None:
    security = SecuritySettings(
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="OAUTHBEARER",
        sasl_oauth_token_provider=Tokens(bad=True),
    )

    async def go() -> None:
        async with serving(app_broker()) as broker:
            with pytest.raises(AuthenticationError) as caught:
                await _open(broker, security)
            assert "SASL_AUTHENTICATION_FAILED" in str(caught.value)
            assert "token rejected: invalid_token" in str(caught.value)

    run(go())


def test_reauthentication_before_the_session_ends_keeps_requests_flowing() -> None:
    """Sessions of 3 s, three streams of requests (each answered after 5 ms, one at a time as
    a broker does) for 7 s: the connection re-authenticates in-band several times; the broker
    never sees a request after expiry, every request is answered, one connection. (A request
    the broker reads after the session expired closes the connection, as Kafka does: the 5-15 %
    of the lifetime left must cover the requests queued ahead of the re-authentication.)"""

    async def go() -> None:
        async with serving(app_broker(session_ms=3000, heartbeat_delay_s=0.005)) as broker:
            conn = await _open(broker, sasl("SCRAM-SHA-256"))
            loop = asyncio.get_running_loop()
            end = loop.time() + 7.0
            answered = 0

            async def stream() -> None:
                nonlocal answered
                while loop.time() < end:
                    response = await conn.call(heartbeat(), HeartbeatResponse, timeout_s=5)
                    assert response.error_code.value == 0
                    answered += 1

            try:
                await asyncio.gather(*(stream() for _ in range(3)))
            finally:
                await conn.close()
            assert conn.reauthentications >= 2
            assert broker.handshakes == conn.reauthentications + 1
            assert (broker.accepted, broker.expired_requests) == (1, 0)
            assert answered == broker.heartbeats > 40

    run(go())


def test_reauthentication_point_is_between_85_and_95_percent() -> None:
    rng = random.Random(7)
    delays = [reauthentication_delay_s(10_000, rng) for _ in range(1000)]
    assert REAUTH_FRACTION == (0.85, 0.95)
    assert 8.5 <= min(delays) < 8.6
    assert 9.4 < max(delays) <= 9.5


# -- TLS -------------------------------------------------------------------------------------


def server_context(cert: Path, key: Path) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    return context


def tls(kit: CertKit, ca: Path | None = None, **extra: object) -> SecuritySettings:
    return SecuritySettings.model_validate(
        {"security_protocol": "SSL", "ssl_cafile": ca or kit.ca_cert, **extra}
    )


def tls_broker(cert: Path, key: Path, **kwargs: Any) -> FakeSaslBroker:
    return FakeSaslBroker(users={"app": PASSWORD}, ssl_context=server_context(cert, key), **kwargs)


def test_tls_then_sasl_over_it(kit: CertKit) -> None:
    security = SecuritySettings(
        security_protocol="SASL_SSL",
        ssl_cafile=kit.ca_cert,
        sasl_mechanism="SCRAM-SHA-512",
        sasl_plain_username="app",
        sasl_plain_password=SecretStr(PASSWORD),
    )

    async def go() -> None:
        async with serving(tls_broker(kit.broker_cert, kit.broker_key)) as broker:
            for host in ("127.0.0.1", "localhost"):
                conn = await AsyncConnection.open(host, broker.port, security=security)
                assert (await conn.call(heartbeat(), HeartbeatResponse)).error_code.value == 0
                await conn.close()
            assert broker.accepted == 2

    run(go())


@pytest.mark.parametrize(
    ("which", "expected"),
    [
        (
            "expired",
            "certificate verify failed: certificate has expired (the broker's certificate is outside",
        ),
        (
            "wrong_host",
            "certificate verify failed: Hostname mismatch, certificate is not valid for 'localhost'.",
        ),
        ("unknown_ca", "(no CA in ssl_cafile (or the system's) signed the broker's certificate)"),
    ],
)
def test_tls_verification_failures_name_the_broker_and_reason(
    kit: CertKit, which: str, expected: str
) -> None:
    cert, key = {
        "expired": (kit.expired_cert, kit.expired_key),
        "wrong_host": (kit.wrong_host_cert, kit.wrong_host_key),
        "unknown_ca": (kit.broker_cert, kit.broker_key),
    }[which]
    security = tls(kit, ca=kit.other_ca_cert if which == "unknown_ca" else None)

    async def go() -> None:
        async with serving(tls_broker(cert, key)) as broker:
            settings = ClientSettings(bootstrap_servers=f"localhost:{broker.port}", **dict(security))
            client = GroupCoordinatorClient(settings, "g")
            with pytest.raises(TlsError) as caught:
                await client.ensure_coordinator()
            await client.close()
            assert str(caught.value).startswith(f"TLS with the broker at localhost:{broker.port} failed: ")
            assert expected in str(caught.value)
            assert broker.accepted == 1

    run(go())


def test_wrong_host_passes_without_hostname_check(kit: CertKit) -> None:
    async def go() -> None:
        async with serving(tls_broker(kit.wrong_host_cert, kit.wrong_host_key)) as broker:
            security = tls(kit, ssl_check_hostname=False)
            conn = await AsyncConnection.open("localhost", broker.port, security=security)
            await conn.close()

    run(go())


def test_tls_client_on_a_plaintext_listener(kit: CertKit) -> None:
    async def go() -> None:
        async with serving(app_broker()) as broker:
            with pytest.raises(TlsError) as caught:
                await open_any(ClientSettings(bootstrap_servers=broker.bootstrap, **dict(tls(kit))))
            assert str(caught.value).startswith(
                f"the broker at {broker.bootstrap} closed the connection during the TLS handshake:"
                " is it a TLS listener?"
            )
            assert broker.accepted == 1

    run(go())


def test_plaintext_client_on_a_tls_listener(kit: CertKit) -> None:
    """Found at open: the connection's first request (ApiVersions) is never answered."""

    async def go() -> None:
        async with serving(tls_broker(kit.broker_cert, kit.broker_key)) as broker:
            with pytest.raises((TlsError, ConnectionLost)) as caught:
                await open_any(broker.bootstrap)
            message = str(caught.value)
            assert message.startswith(f"the broker at {broker.bootstrap} "), message
            assert "TLS" in message
            assert broker.accepted == 1

    run(go())
