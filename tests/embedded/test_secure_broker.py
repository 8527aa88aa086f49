"""The secured Apache Kafka (``secure_kafka``), proven with clients no one here wrote: aiokafka,
kafka-python and confluent-kafka produce and consume over SASL_SSL with each mechanism and over
mutual TLS; ``norights`` authenticates and is denied a topic and a group; ``app`` is denied what
lies outside its prefixes; a wrong password, an untrusting CA and a wrong host name fail."""

from __future__ import annotations

import asyncio
import base64
import json
import socket
import ssl
import time
import uuid
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import GroupAuthorizationFailedError, TopicAuthorizationFailedError

from streamtasks.embedded.secure_broker import APP_PREFIXES
from streamtasks.embedded.secure_cluster import SecuredCluster

pytestmark = pytest.mark.integration

TIMEOUT_S = 30.0


def _topic(secure_kafka: SecuredCluster, prefix: str = "app-") -> str:
    name = f"{prefix}{uuid.uuid4().hex[:8]}"
    _create(secure_kafka, name)
    return name


def _create(secure_kafka: SecuredCluster, name: str) -> None:
    from streamtasks.embedded.cluster import create_topics

    host, _, port = secure_kafka.plaintext_bootstrap.rpartition(":")
    create_topics(host, int(port), {name: 1})


async def _aiokafka_round_trip(kwargs: dict[str, Any], topic: str, group: str) -> list[bytes | None]:
    producer = AIOKafkaProducer(**kwargs)
    await producer.start()
    try:
        for i in range(3):
            await producer.send_and_wait(topic, f"m{i}".encode())
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(topic, group_id=group, auto_offset_reset="earliest", **kwargs)
    await consumer.start()
    try:
        values: list[bytes | None] = []
        while len(values) < 3:
            record = await asyncio.wait_for(consumer.getone(), TIMEOUT_S)
            values.append(record.value)
        await consumer.commit()
        return values
    finally:
        await consumer.stop()


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"])
def test_aiokafka_produces_and_consumes_over_sasl_ssl(secure_kafka: SecuredCluster, mechanism: str) -> None:
    topic = _topic(secure_kafka)
    kwargs = secure_kafka.aiokafka_kwargs("app", mechanism)
    got = asyncio.run(_aiokafka_round_trip(kwargs, topic, f"app-{mechanism.lower()}"))
    assert got == [b"m0", b"m1", b"m2"]


def test_aiokafka_produces_and_consumes_over_mutual_tls(secure_kafka: SecuredCluster) -> None:
    topic = _topic(secure_kafka, "secure-")
    kwargs = secure_kafka.aiokafka_kwargs(None)
    assert asyncio.run(_aiokafka_round_trip(kwargs, topic, "secure-mtls")) == [b"m0", b"m1", b"m2"]


def _talk(tls: ssl.SSLSocket) -> None:
    with tls:
        tls.sendall(b"\x00\x00\x00\x00")
        tls.recv(1)


def test_the_ssl_listener_refuses_a_client_without_a_certificate(secure_kafka: SecuredCluster) -> None:
    host, _, port = secure_kafka.ssl_bootstrap.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=TIMEOUT_S) as raw:
        context = secure_kafka.ssl_context(client_cert=False)
        # TLS 1.3: the broker checks the (missing) certificate after the client finished, and
        # answers the first read with an alert (JDK 17+: bad_certificate).
        with pytest.raises(ssl.SSLError, match=r"BAD_CERTIFICATE|CERTIFICATE_REQUIRED"):
            _talk(context.wrap_socket(raw, server_hostname=host))


@pytest.mark.parametrize("listener", ["sasl_ssl", "ssl"])
def test_a_client_trusting_another_ca_or_expecting_another_host_fails_tls(
    secure_kafka: SecuredCluster, listener: str
) -> None:
    address = secure_kafka.sasl_ssl_bootstrap if listener == "sasl_ssl" else secure_kafka.ssl_bootstrap
    host, _, port = address.rpartition(":")
    other = ssl.create_default_context(cafile=str(secure_kafka.certs.other_ca_cert))
    ours = secure_kafka.ssl_context()
    for context, server_hostname, cause in (
        (other, host, "unable to get local issuer certificate"),  # the broker sends no root
        (ours, "wrong-host.invalid", "Hostname mismatch"),
    ):
        with (
            socket.create_connection((host, int(port)), timeout=TIMEOUT_S) as raw,
            pytest.raises(ssl.SSLCertVerificationError, match=cause),
        ):
            context.wrap_socket(raw, server_hostname=server_hostname).close()


def test_kafka_python_produces_and_consumes_over_sasl_ssl(secure_kafka: SecuredCluster) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    topic = _topic(secure_kafka)
    config = secure_kafka.kafka_python_config("app", "SCRAM-SHA-256")
    producer = KafkaProducer(**config)
    try:
        for i in range(3):
            producer.send(topic, f"k{i}".encode()).get(timeout=TIMEOUT_S)
    finally:
        producer.close()
    consumer = KafkaConsumer(
        topic,
        group_id="app-kafka-python",
        auto_offset_reset="earliest",
        consumer_timeout_ms=int(TIMEOUT_S * 1000),
        **secure_kafka.kafka_python_config("app", "PLAIN"),
    )
    try:
        values = [record.value for _, record in zip(range(3), consumer, strict=False)]
    finally:
        consumer.close()
    assert values == [b"k0", b"k1", b"k2"]


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "OAUTHBEARER"])
def test_confluent_kafka_produces_and_consumes_over_sasl_ssl(
    secure_kafka: SecuredCluster, mechanism: str
) -> None:
    from confluent_kafka import Consumer, Producer

    topic = _topic(secure_kafka, "secure-")
    config = secure_kafka.librdkafka_config("app", mechanism)
    producer = Producer(config)
    for i in range(3):
        producer.produce(topic, f"c{i}".encode())
    assert producer.flush(TIMEOUT_S) == 0
    consumer = Consumer(
        {**config, "group.id": f"secure-{mechanism.lower()}", "auto.offset.reset": "earliest"}
    )
    consumer.subscribe([topic])
    values: list[bytes | None] = []
    try:
        for _ in range(int(TIMEOUT_S)):
            message = consumer.poll(1.0)
            if message is None:
                continue
            assert message.error() is None, message.error()
            values.append(message.value())
            if len(values) == 3:
                break
    finally:
        consumer.close()
    assert values == [b"c0", b"c1", b"c2"]


async def _produce(kwargs: dict[str, Any], topic: str) -> None:
    producer = AIOKafkaProducer(**kwargs)
    await producer.start()
    try:
        await producer.send_and_wait(topic, b"denied?")
    finally:
        await producer.stop()


async def _group_offset(kwargs: dict[str, Any], topic: str, group: str) -> int | None:
    """The group's committed offset of ``topic``'s partition 0 (OffsetFetch: Describe on the
    group, then on the topic)."""
    consumer = AIOKafkaConsumer(group_id=group, enable_auto_commit=False, **kwargs)
    try:
        await consumer.start()
        return await asyncio.wait_for(consumer.committed(TopicPartition(topic, 0)), TIMEOUT_S)
    finally:
        await consumer.stop()


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512", "OAUTHBEARER"])
def test_norights_authenticates_but_is_denied_a_topic(secure_kafka: SecuredCluster, mechanism: str) -> None:
    topic = _topic(secure_kafka)
    kwargs = secure_kafka.aiokafka_kwargs("norights", mechanism)
    with pytest.raises(TopicAuthorizationFailedError):
        asyncio.run(_produce(kwargs, topic))


def test_norights_is_denied_a_group(secure_kafka: SecuredCluster) -> None:
    topic = _topic(secure_kafka)
    assert asyncio.run(_group_offset(secure_kafka.aiokafka_kwargs("app"), topic, "app-offsets")) is None
    with pytest.raises(GroupAuthorizationFailedError):
        asyncio.run(
            _group_offset(secure_kafka.aiokafka_kwargs("norights", "SCRAM-SHA-256"), topic, "app-offsets")
        )


def test_app_is_denied_what_lies_outside_its_prefixes(secure_kafka: SecuredCluster) -> None:
    outside = _topic(secure_kafka, "other-")
    assert not outside.startswith(APP_PREFIXES)
    kwargs = secure_kafka.aiokafka_kwargs("app", "SCRAM-SHA-512")
    with pytest.raises(TopicAuthorizationFailedError):
        asyncio.run(_produce(kwargs, outside))
    with pytest.raises(GroupAuthorizationFailedError):
        asyncio.run(_group_offset(kwargs, _topic(secure_kafka), "other-group"))


def _librdkafka_errors(config: dict[str, Any]) -> list[Any]:
    """The errors a confluent-kafka producer reports while it connects with ``config``."""
    from confluent_kafka import Producer

    errors: list[Any] = []
    producer = Producer({**config, "error_cb": errors.append, "log_level": 0})  # no lines on stderr
    deadline = time.monotonic() + TIMEOUT_S
    while not errors and time.monotonic() < deadline:
        producer.poll(0.1)  # connects, and serves the error callback
    assert errors, "librdkafka reported no error"
    return errors


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_a_wrong_password_fails_authentication(secure_kafka: SecuredCluster, mechanism: str) -> None:
    from confluent_kafka import KafkaError

    config = {**secure_kafka.librdkafka_config("app", mechanism), "sasl.password": "not-the-password"}
    (error, *_) = _librdkafka_errors(config)
    assert error.code() == KafkaError._AUTHENTICATION
    assert "Authentication failed" in error.str()
    assert "not-the-password" not in error.str()


def test_the_cluster_object_shows_no_password(secure_kafka: SecuredCluster) -> None:
    shown = repr(secure_kafka) + str(secure_kafka.settings("app", "PLAIN"))
    for password in secure_kafka.users.values():
        assert password.get_secret_value() not in shown
    assert set(secure_kafka.users) == {"admin", "app", "norights"}


def _forged(token: str) -> str:
    """``token`` claiming an HS256 signature it does not carry (the validator takes only "none")."""
    header = base64.urlsafe_b64encode(json.dumps({"alg": "HS256"}).encode()).rstrip(b"=").decode()
    return f"{header}.{token.split('.')[1]}.c2lnbmF0dXJl"


@pytest.mark.parametrize("token_kind", ["good", "expired", "signed"])
def test_the_unsecured_validator_checks_expiry_and_algorithm(
    secure_kafka: SecuredCluster, token_kind: str
) -> None:
    """confluent-kafka's oauth_cb hands the broker our own token: only an unexpired ``alg: none``
    token authenticates (Kafka answers the others ``{"status":"invalid_token"}``)."""
    from confluent_kafka import KafkaError, Producer

    token = {
        "good": secure_kafka.oauth_token("app"),
        "expired": secure_kafka.oauth_token("app", now=time.time() - 7200),
        "signed": _forged(secure_kafka.oauth_token("app")),
    }[token_kind]
    librdkafka = secure_kafka.librdkafka_config("app", "OAUTHBEARER")
    config = {
        **{k: v for k, v in librdkafka.items() if "oauthbearer" not in k},
        "oauth_cb": lambda _config: (token, time.time() + 3600, "app"),
    }
    if token_kind == "good":
        assert Producer({**config, "log_level": 0}).list_topics(timeout=TIMEOUT_S).brokers
        return
    (error, *_) = _librdkafka_errors(config)
    assert error.code() == KafkaError._AUTHENTICATION
    assert "invalid_token" in error.str()


def _log_lines(secure_kafka: SecuredCluster, *needles: str) -> str:
    """The broker's log once it holds every needle (it writes a moment after it answered)."""
    assert secure_kafka.log_path is not None
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        text = secure_kafka.log_path.read_text()
        if all(n in text for n in needles) or time.monotonic() > deadline:
            return text


def test_the_broker_logs_failures_and_denials_without_a_password(secure_kafka: SecuredCluster) -> None:
    from confluent_kafka import KafkaError

    someone_elses = secure_kafka.password("app").get_secret_value()
    config = {**secure_kafka.librdkafka_config("norights", "SCRAM-SHA-256"), "sasl.password": someone_elses}
    assert _librdkafka_errors(config)[0].code() == KafkaError._AUTHENTICATION
    topic = _topic(secure_kafka)
    with pytest.raises(TopicAuthorizationFailedError):
        asyncio.run(_produce(secure_kafka.aiokafka_kwargs("norights", "PLAIN"), topic))
    failed = "invalid credentials with SASL mechanism SCRAM-SHA-256"
    denied = (
        "Principal = User:norights is Denied operation = DESCRIBE from host = 127.0.0.1 "
        f"on resource = Topic:LITERAL:{topic}"
    )
    text = _log_lines(secure_kafka, failed, denied)
    assert failed in text
    assert denied in text
    for password in secure_kafka.users.values():
        assert password.get_secret_value() not in text
