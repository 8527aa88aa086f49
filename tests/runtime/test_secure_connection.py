"""The runtime's connections and ``streamtasks.Consumer`` against Apache Kafka's SASL_SSL and
mutual-TLS listeners (the ``secure_kafka`` fixture: tests/conftest.py, streamtasks/embedded/
secure_broker.py): every mechanism through a group RPC round trip, a per-offset audit of a
Consumer over SASL_SSL, aiokafka's DEBUG log grepped for the password, and each bad input of
issue 25 (item 4) with its error text asserted and the connection attempts counted."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer
from pydantic import SecretStr

from streamtasks.embedded.secure_cluster import SecuredCluster
from streamtasks.errors import AuthenticationError, AuthorizationError, TlsError
from streamtasks.protocol import classic_group as cg
from streamtasks.protocol.errors import KafkaErrorCode
from streamtasks.runtime.admin import create_topics_async
from streamtasks.runtime.aiokafka_security import start_aiokafka
from streamtasks.runtime.connection import GroupCoordinatorClient
from streamtasks.runtime.consumer import Consumer
from streamtasks.runtime.security import ClientSettings
from tests.runtime.test_connection import join_and_sync
from topology import TopicPartition

pytestmark = [pytest.mark.integration]

TIMEOUT_S = 60.0


def settings(
    cluster: SecuredCluster, user: str = "app", mechanism: str = "SCRAM-SHA-512", **over: Any
) -> ClientSettings:
    return ClientSettings(**{**cluster.settings(user, mechanism), **over})


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, TIMEOUT_S))


@pytest.fixture
def attempts(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """Every TCP connection the runtime opens (``asyncio.open_connection``), as (host, port)."""
    seen: list[tuple[str, int]] = []
    real = asyncio.open_connection

    async def counting(host: str, port: int, **kwargs: Any) -> Any:
        seen.append((host, port))
        return await real(host, port, **kwargs)

    monkeypatch.setattr(asyncio, "open_connection", counting)
    return seen


async def group_round_trip(client_settings: ClientSettings) -> None:
    group = f"app-sec-{uuid.uuid4().hex[:8]}"
    client = GroupCoordinatorClient(client_settings, group)
    try:
        member = await join_and_sync(client, group)
        assert (await client.send(member.heartbeat(group))).error is KafkaErrorCode.NONE
        left = await client.send(cg.LeaveGroupRequest(group_id=group, member_id=member.member_id))
        assert left.error is KafkaErrorCode.NONE
    finally:
        await client.close()


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"])
def test_each_mechanism_does_a_group_round_trip(secure_kafka: SecuredCluster, mechanism: str) -> None:
    run(group_round_trip(settings(secure_kafka, mechanism=mechanism)))


def test_mutual_tls_does_a_group_round_trip(secure_kafka: SecuredCluster) -> None:
    run(group_round_trip(ClientSettings(**secure_kafka.ssl_settings())))


# -- a Consumer over SASL_SSL, audited per offset ----------------------------------------------


async def produce(client: ClientSettings, topic: str, count: int) -> set[tuple[int, int]]:
    producer = AIOKafkaProducer(**client.aiokafka_kwargs(), linger_ms=5, acks="all")
    await start_aiokafka(producer, client, "the test's producer")
    try:
        futures = [await producer.send(topic, f"r{i}".encode(), key=str(i).encode()) for i in range(count)]
        return {(m.partition, m.offset) for m in await asyncio.gather(*futures)}
    finally:
        await producer.stop()


def test_consumer_over_sasl_ssl_processes_every_acknowledged_offset(
    secure_kafka: SecuredCluster, caplog: pytest.LogCaptureFixture
) -> None:
    """300 records acknowledged by the broker (acks=all) over SASL_SSL; a streamtasks Consumer
    with PLAIN (the mechanism whose SaslAuthenticate carries the password in clear) consumes
    and commits them; every acknowledged (partition, offset) is processed, the committed offsets
    are the ends, and nothing logged at DEBUG (aiokafka included) carries the password."""
    topic = f"app-audit-{uuid.uuid4().hex[:8]}"
    group = f"app-audit-g-{uuid.uuid4().hex[:8]}"
    client = settings(secure_kafka, mechanism="PLAIN")
    password = secure_kafka.password("app").get_secret_value()

    async def go() -> tuple[set[tuple[int, int]], set[tuple[int, int]], dict[TopicPartition, int]]:
        await create_topics_async(client, {topic: 3})
        acknowledged = await produce(client, topic, 300)
        processed: set[tuple[int, int]] = set()
        consumer = Consumer(
            topic,
            config=dict(secure_kafka.settings("app", "PLAIN")),
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )
        async with consumer:
            while not acknowledged <= processed:
                for tp, records in (await consumer.getmany(timeout_ms=500)).items():
                    processed.update((tp.partition, r.offset) for r in records)
                await consumer.commit()
        verify = GroupCoordinatorClient(client, group)
        try:
            fetched = await verify.send(
                cg.OffsetFetchRequest(
                    group_id=group, partitions=tuple(TopicPartition(topic, p) for p in range(3))
                )
            )
        finally:
            await verify.close()
        return acknowledged, processed, {tp: off for tp, off, _ in fetched.offsets}

    # aiokafka's own logger too: a level an earlier in-process command left on it would hide
    # the records this test reads.
    with caplog.at_level(logging.DEBUG), caplog.at_level(logging.DEBUG, logger="aiokafka"):
        acknowledged, processed, committed = run(go())
    assert len(acknowledged) == 300
    assert acknowledged <= processed, sorted(acknowledged - processed)[:10]
    ends = {TopicPartition(topic, p): 1 + max(o for q, o in acknowledged if q == p) for p in range(3)}
    assert committed == ends
    logged = caplog.text
    assert "SaslAuthenticateRequest" in logged  # aiokafka did log the exchange ...
    assert "<SASL payload" in logged  # ... redacted
    assert password not in logged
    assert password not in "\n".join(str(r.args) for r in caplog.records)


def test_a_stateful_app_over_sasl_ssl(
    secure_kafka: SecuredCluster, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """An App (consumer, producer, changelog readers, internal topic creation) on SCRAM-SHA-512
    over TLS: 1,000 records counted per key, its changelog written, and no password logged."""
    from streamtasks.drills.stateful_app import make_app, record_for

    run_id = uuid.uuid4().hex[:8]
    app_id, topic = f"app-st-{run_id}", f"app-st-in-{run_id}"
    client = settings(secure_kafka)
    password = secure_kafka.password("app").get_secret_value()

    async def go() -> tuple[int, dict[str, int]]:
        await create_topics_async(client, {topic: 2})
        producer = AIOKafkaProducer(**client.aiokafka_kwargs(), acks="all")
        await start_aiokafka(producer, client)
        try:
            for seq in range(1_000):
                key, value = record_for(seq, 50)
                await producer.send(topic, key=key, value=value)
            await producer.flush()
        finally:
            await producer.stop()
        app = make_app(
            app_id,
            topic,
            {**secure_kafka.settings("app"), "state_dir": str(tmp_path), "commit_interval_ms": 300},
        )
        await app.start()
        try:
            await asyncio.wait_for(app.run(until=lambda: app.tasks.records_processed >= 1_000), 90)
        finally:
            await app.stop()
        sums = app.directory.offset_sums({t: i.changelog_partitions for t, i in app.tasks._infos.items()})
        return app.tasks.records_processed, {str(t): n for t, n in sums.items()}

    # aiokafka's own logger too: a level an earlier in-process command left on it would hide
    # the records this test reads.
    with caplog.at_level(logging.DEBUG), caplog.at_level(logging.DEBUG, logger="aiokafka"):
        processed, changelog = run(go())
    assert processed >= 1_000
    assert sum(changelog.values()) > 0, changelog
    assert password not in caplog.text


# -- bad input: one clear error, naming the broker, not retried ----------------------------------


def _addr(bootstrap: str) -> tuple[str, int]:
    host, _, port = bootstrap.rpartition(":")
    return host, int(port)


def start_consumer(client: dict[str, Any], **config: Any) -> None:
    async def go() -> None:
        consumer = Consumer(f"app-bad-{uuid.uuid4().hex[:6]}", config=client, group_id="app-bad", **config)
        await consumer.start()
        await consumer.stop()

    run(go())


def test_wrong_password(secure_kafka: SecuredCluster, attempts: list[tuple[str, int]]) -> None:
    wrong = "not-the-Password-1"
    client = {**secure_kafka.settings("app", "SCRAM-SHA-256"), "sasl_plain_password": wrong}
    with pytest.raises(AuthenticationError) as caught:
        start_consumer(client)
    message = str(caught.value)
    assert message.startswith(
        f"authentication at the broker at {secure_kafka.sasl_ssl_bootstrap} failed (SCRAM-SHA-256 as 'app'):"
        " SASL_AUTHENTICATION_FAILED: Authentication failed during authentication due to invalid credentials"
    ), message
    assert wrong not in message
    assert attempts == [_addr(secure_kafka.sasl_ssl_bootstrap)]


def test_expired_oauth_token(secure_kafka: SecuredCluster, attempts: list[tuple[str, int]]) -> None:
    class Expired:
        async def token(self) -> str:
            return secure_kafka.oauth_token("app", now=1_000_000_000, lifetime_s=60)

    client = {**secure_kafka.settings("app", "OAUTHBEARER"), "sasl_oauth_token_provider": Expired()}
    with pytest.raises(AuthenticationError) as caught:
        start_consumer(client)
    message = str(caught.value)
    assert f"the broker at {secure_kafka.sasl_ssl_bootstrap} failed (OAUTHBEARER)" in message
    assert "SASL_AUTHENTICATION_FAILED" in message
    assert "token rejected: invalid_token" in message
    assert attempts == [_addr(secure_kafka.sasl_ssl_bootstrap)]


def test_sasl_client_on_a_listener_without_sasl(
    secure_kafka: SecuredCluster, attempts: list[tuple[str, int]]
) -> None:
    """SASL_PLAINTEXT against the PLAINTEXT listener: Kafka answers the handshake ILLEGAL_SASL_STATE."""
    client = {
        **secure_kafka.settings("app", "SCRAM-SHA-512"),
        "bootstrap_servers": secure_kafka.plaintext_bootstrap,
        "security_protocol": "SASL_PLAINTEXT",
        "ssl_cafile": None,
    }
    with pytest.raises(AuthenticationError) as caught:
        start_consumer(client)
    assert str(caught.value).startswith(
        f"the broker at {secure_kafka.plaintext_bootstrap} refused the SASL handshake for SCRAM-SHA-512:"
        " ILLEGAL_SASL_STATE"
    ), str(caught.value)
    assert attempts == [_addr(secure_kafka.plaintext_bootstrap)]


def test_untrusted_ca(secure_kafka: SecuredCluster, attempts: list[tuple[str, int]]) -> None:
    client = {**secure_kafka.settings("app"), "ssl_cafile": str(secure_kafka.certs.other_ca_cert)}
    with pytest.raises(TlsError) as caught:
        start_consumer(client)
    message = str(caught.value)
    assert message.startswith(
        f"TLS with the broker at {secure_kafka.sasl_ssl_bootstrap} failed: certificate verify failed:"
    )
    assert "no CA in ssl_cafile (or the system's) signed the broker's certificate" in message
    assert attempts == [_addr(secure_kafka.sasl_ssl_bootstrap)]


def test_host_name_mismatch(secure_kafka: SecuredCluster, attempts: list[tuple[str, int]]) -> None:
    """``vm`` resolves to 127.0.0.1 here (/etc/hosts) but is not in the broker certificate."""
    _, port = _addr(secure_kafka.sasl_ssl_bootstrap)
    client = {**secure_kafka.settings("app"), "bootstrap_servers": f"vm:{port}"}
    with pytest.raises(TlsError) as caught:
        start_consumer(client)
    assert str(caught.value) == (
        f"TLS with the broker at vm:{port} failed: certificate verify failed: Hostname mismatch,"
        " certificate is not valid for 'vm'. (the certificate is for another host name (ssl_check_hostname))"
    )
    assert attempts == [("vm", port)]


@pytest.mark.parametrize("certificate", ["expired", "none"])
def test_client_certificate_refused_by_the_mutual_tls_listener(
    secure_kafka: SecuredCluster, attempts: list[tuple[str, int]], certificate: str
) -> None:
    """TLS 1.3: the broker's verdict on the client certificate comes after the client's side of
    the handshake, as an alert: the connection's first request (ApiVersions) meets it, at open."""
    certs = secure_kafka.certs
    if certificate == "expired":
        client = secure_kafka.ssl_settings(certfile=certs.expired_cert, keyfile=certs.expired_key)
    else:
        client = {
            "bootstrap_servers": secure_kafka.ssl_bootstrap,
            "security_protocol": "SSL",
            "ssl_cafile": str(certs.ca_cert),
        }
    with pytest.raises(TlsError) as caught:
        start_consumer(client)
    message = str(caught.value)
    assert message.startswith(
        f"the broker at {secure_kafka.ssl_bootstrap} refused this client's certificate ("
    ), message
    assert message.endswith(
        "): is ssl_certfile valid now, signed by a CA the broker trusts, and given at all?"
    )
    assert attempts == [_addr(secure_kafka.ssl_bootstrap)]


def test_plaintext_client_on_the_tls_listener(
    secure_kafka: SecuredCluster, attempts: list[tuple[str, int]]
) -> None:
    """Kafka's TLS listener answers the ApiVersions bytes with a TLS alert record."""
    with pytest.raises(TlsError) as caught:
        start_consumer({"bootstrap_servers": secure_kafka.sasl_ssl_bootstrap})
    assert str(caught.value) == (
        f"the broker at {secure_kafka.sasl_ssl_bootstrap} answered in TLS: it is a TLS listener"
        " (security_protocol is PLAINTEXT; use SSL or SASL_SSL)"
    )
    assert attempts == [_addr(secure_kafka.sasl_ssl_bootstrap)]


def test_tls_client_on_the_plaintext_listener(
    secure_kafka: SecuredCluster, attempts: list[tuple[str, int]]
) -> None:
    client = {
        "bootstrap_servers": secure_kafka.plaintext_bootstrap,
        "security_protocol": "SSL",
        "ssl_cafile": str(secure_kafka.certs.ca_cert),
    }
    with pytest.raises(TlsError) as caught:
        start_consumer(client)
    assert str(caught.value).startswith(
        f"the broker at {secure_kafka.plaintext_bootstrap} closed the connection during the TLS handshake:"
        " is it a TLS listener?"
    ), str(caught.value)
    assert attempts == [_addr(secure_kafka.plaintext_bootstrap)]


def test_missing_topic_acl(secure_kafka: SecuredCluster, attempts: list[tuple[str, int]]) -> None:
    with pytest.raises(AuthorizationError) as caught:
        start_consumer(secure_kafka.settings("norights", "SCRAM-SHA-512"))
    message = str(caught.value)
    assert message.startswith(
        f"the broker at {secure_kafka.sasl_ssl_bootstrap} denies this client access to topic(s) app-bad-"
    )
    assert "TOPIC_AUTHORIZATION_FAILED" in message
    assert attempts == [_addr(secure_kafka.sasl_ssl_bootstrap)]


def test_missing_group_acl(secure_kafka: SecuredCluster) -> None:
    async def go() -> None:
        client = GroupCoordinatorClient(settings(secure_kafka, "norights"), "app-no-rights")
        try:
            await client.ensure_coordinator()
        finally:
            await client.close()

    with pytest.raises(AuthorizationError) as caught:
        run(go())
    assert "denies this client group 'app-no-rights': GROUP_AUTHORIZATION_FAILED" in str(caught.value)


@pytest.mark.parametrize("bad", ["password", "ca"])
def test_aiokafka_unable_to_bootstrap_is_told_by_its_cause(secure_kafka: SecuredCluster, bad: str) -> None:
    """aiokafka alone says "Unable to bootstrap from [...]"; start_aiokafka asks the broker over
    the runtime's connection and raises what it answered."""
    over: dict[str, Any] = (
        {"sasl_plain_password": SecretStr("wrong-Password-3")}
        if bad == "password"
        else {"ssl_cafile": str(secure_kafka.certs.other_ca_cert)}
    )
    client = settings(secure_kafka, **over)

    async def go() -> str:
        producer = AIOKafkaProducer(**client.aiokafka_kwargs(), request_timeout_ms=10_000)
        with pytest.raises(AuthenticationError if bad == "password" else TlsError) as caught:
            await start_aiokafka(producer, client, "the producer")
        return str(caught.value)

    message = run(go())
    expected = {
        "password": f"authentication at the broker at {secure_kafka.sasl_ssl_bootstrap} failed (SCRAM-SHA-512"
        " as 'app'): SASL_AUTHENTICATION_FAILED",
        "ca": f"TLS with the broker at {secure_kafka.sasl_ssl_bootstrap} failed: certificate verify failed",
    }[bad]
    assert message.startswith(expected), message
    assert "wrong-Password-3" not in message


# -- KIP-368 against Apache Kafka: sessions of 4 s -------------------------------------------


@pytest.fixture(scope="module")
def reauth_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredCluster]:
    """A second secured broker whose sessions last 4 s (``connections.max.reauth.ms``): a
    connection that has not re-authenticated by then is closed at its next request."""
    import os

    from streamtasks.embedded import BOOTSTRAP_ENV
    from streamtasks.embedded.certs import make_cert_kit
    from streamtasks.embedded.kafka_broker import kafka_requirements_missing
    from streamtasks.embedded.secure_broker import SecureKafkaBroker

    if os.environ.get(BOOTSTRAP_ENV):
        pytest.skip(f"{BOOTSTRAP_ENV} names an existing cluster")
    missing = kafka_requirements_missing()
    if missing is not None:
        pytest.skip(f"secured broker (Apache Kafka only): {missing}")
    certs = make_cert_kit(tmp_path_factory.mktemp("reauth-certs"))
    with SecureKafkaBroker(certs=certs, configs={"connections.max.reauth.ms": "4000"}) as broker:
        yield broker.secured()


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "OAUTHBEARER"])
def test_reauthentication_keeps_a_connection_past_its_session(
    reauth_kafka: SecuredCluster, attempts: list[tuple[str, int]], mechanism: str
) -> None:
    """Heartbeats on one coordinator connection for 11 s (almost three 4 s sessions): the
    connection re-authenticates in-band (at least twice), every heartbeat is answered NONE, and
    the runtime opens no other connection meanwhile."""
    group = f"app-reauth-{uuid.uuid4().hex[:8]}"

    async def go() -> tuple[int, int, int]:
        client = GroupCoordinatorClient(settings(reauth_kafka, mechanism=mechanism), group)
        try:
            member = await join_and_sync(client, group)
            conn = await client._find()
            opened_before = len(attempts)
            loop = asyncio.get_running_loop()
            end, beats = loop.time() + 11, 0
            while loop.time() < end:
                beat = await client.send(member.heartbeat(group))
                assert beat.error is KafkaErrorCode.NONE, (beat, conn.reauthentications)
                beats += 1
                await asyncio.sleep(0.05)
            assert await client._find() is conn
            return conn.reauthentications, beats, len(attempts) - opened_before
        finally:
            await client.close()

    reauthentications, beats, opened = run(go())
    assert reauthentications >= 2
    assert beats > 50
    assert opened == 0
