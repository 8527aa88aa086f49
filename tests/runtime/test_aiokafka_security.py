"""aiokafka under streamtasks' security settings: its DEBUG log without secrets, and its
"Unable to bootstrap" replaced by the cause the runtime's own connection finds. Live, against
Apache Kafka's SASL_SSL listener: tests/runtime/test_secure_connection.py."""

from __future__ import annotations

import asyncio
import logging

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.protocol.admin import SaslAuthenticateRequest_v1, SaslAuthenticateResponse_v1
from pydantic import SecretStr

from streamtasks.errors import AuthenticationError
from streamtasks.runtime.aiokafka_security import REDACTED, install_log_redaction, start_aiokafka
from streamtasks.runtime.security import ClientSettings
from tests.runtime.sasl_broker import FakeSaslBroker

SECRET = "aiokafka-Secret-9"


def _filters(name: str) -> int:
    return sum(1 for f in logging.getLogger(name).filters if type(f).__name__ == "_Redactor")


def test_redaction_is_installed_once_on_every_aiokafka_logger() -> None:
    install_log_redaction()
    install_log_redaction([SECRET])
    names = [n for n in logging.root.manager.loggerDict if n.startswith("aiokafka")]
    assert {"aiokafka", "aiokafka.conn", "aiokafka.consumer.fetcher", "aiokafka.producer.sender"} <= set(
        names
    )
    assert {n: _filters(n) for n in names} == dict.fromkeys(names, 1)


def test_sasl_payloads_and_known_secrets_are_redacted(caplog: pytest.LogCaptureFixture) -> None:
    install_log_redaction([SECRET])
    log = logging.getLogger("aiokafka.conn")
    with caplog.at_level(logging.DEBUG, logger="aiokafka"):
        log.debug(
            "Request to %s:%d %d: %s", "b", 9093, 3, SaslAuthenticateRequest_v1(b"\0app\0" + SECRET.encode())
        )
        log.debug("Response %s", SaslAuthenticateResponse_v1(0, None, b"v=server-final", 0))
        log.debug(f"a message that names {SECRET} itself")
        try:
            raise RuntimeError(f"failed with {SECRET}")
        except RuntimeError:
            log.exception("with a traceback")
    text = caplog.text + "\n".join(r.getMessage() for r in caplog.records)
    assert SECRET not in text
    assert "SaslAuthenticateRequest_v1(<SASL payload, 22 bytes, redacted>)" in text
    assert "SaslAuthenticateResponse_v1(<SASL payload, 14 bytes, redacted>)" in text
    assert f"a message that names {REDACTED} itself" in text
    assert f"failed with {REDACTED}" in text


def test_aiokafka_unable_to_bootstrap_becomes_the_real_cause() -> None:
    """aiokafka fails (this server does not speak its ApiVersions v0 and closes); the probe
    with the runtime's connection gets the broker's SASL_AUTHENTICATION_FAILED."""

    async def go() -> None:
        broker = await FakeSaslBroker(users={"app": "right-password"}).start()
        try:
            settings = ClientSettings(
                bootstrap_servers=broker.bootstrap,
                security_protocol="SASL_PLAINTEXT",
                sasl_mechanism="SCRAM-SHA-256",
                sasl_plain_username="app",
                sasl_plain_password=SecretStr(SECRET),
            )
            producer = AIOKafkaProducer(**settings.aiokafka_kwargs(), request_timeout_ms=3000)
            with pytest.raises(AuthenticationError) as caught:
                await start_aiokafka(producer, settings, "the producer")
            assert str(caught.value).startswith(f"authentication at the broker at {broker.bootstrap} failed")
            assert "SASL_AUTHENTICATION_FAILED" in str(caught.value)
            assert SECRET not in str(caught.value)
        finally:
            await broker.close()

    asyncio.run(asyncio.wait_for(go(), 30))
