"""``streamtasks coordinator`` with its own TLS + SCRAM listener in front of the secured embedded
Apache Kafka (``secure_kafka``: SASL_SSL, KRaft's StandardAuthorizer; ``app`` has All on
``secure-*``, ``norights`` has nothing), reaching it as ``app`` over SASL_SSL itself.

A streamtasks Consumer (KIP-848, a client-side assignor) authenticates at the coordinator as
``app``, runs its group there and fetches from the cluster under its own identity. ``norights``,
authenticated at the coordinator, cannot get the cluster to do, under the coordinator's ``app``,
what the cluster would refuse ``norights``: describe the topic, create a topic, auto-create one.
"""

from __future__ import annotations

import asyncio
import io
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer
from kio.schema.create_topics.v7.response import CreateTopicsResponse
from kio.schema.metadata.v12.response import MetadataResponse

from assignors.partition.range import RangeAssignor
from streamtasks.embedded.cluster import ExternalCluster
from streamtasks.embedded.secure_cluster import SecuredCluster
from streamtasks.runtime.admin import TopicSpec, create_topics_request, metadata_request
from streamtasks.runtime.connection import AsyncConnection, ConnectionLost
from streamtasks.runtime.consumer import Consumer
from streamtasks.runtime.security import ClientSettings
from streamtasks.server import ListenerSettings, ServerConfig
from streamtasks.server.credentials import add_user
from streamtasks.server.metadata import fetch_image
from streamtasks.server.server import CoordinatorServer
from tests.server.secure_support import client_context, connect, join, logged_in, login
from tests.server.support import FAST, ServerProcess

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
RECORDS = 30
PARTITIONS = 3


def _server(secure: SecuredCluster, listener: ListenerSettings) -> CoordinatorServer:
    return CoordinatorServer(
        ServerConfig(
            bootstrap_servers=ClientSettings(**secure.settings("app")),
            listen_port=0,
            topic=f"secure-coordlog-{uuid.uuid4().hex[:8]}",
            status_interval_s=3600,
            routing="direct" if listener.guarded else "proxy",
            listener=listener,
        ),
        out=io.StringIO(),
    )


def _listener(secure: SecuredCluster, directory: Path) -> ListenerSettings:
    users = directory / "users.json"
    for user in ("app", "norights"):  # the cluster's own users, the same passwords
        add_user(users, user, secure.password(user), iterations=4096)
    acls = directory / "acls.txt"
    acls.write_text("User:app group:secure-* Read\nUser:app topic:secure-* Describe\n")
    return ListenerSettings(
        tls_certfile=secure.certs.broker_cert,
        tls_keyfile=secure.certs.broker_key,
        sasl_mechanisms=("SCRAM-SHA-512",),
        credentials_file=users,
        acl_file=acls,
    )


async def _produce(bootstrap: str, topic: str) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        for i in range(RECORDS):
            await producer.send_and_wait(topic, str(i).encode(), partition=i % PARTITIONS)
    finally:
        await producer.stop()


def test_a_consumer_runs_its_group_through_the_secured_coordinator(
    secure_kafka: SecuredCluster, tmp_path: Path
) -> None:
    topic = f"secure-cs-{uuid.uuid4().hex[:6]}"
    group = f"secure-g-{uuid.uuid4().hex[:6]}"
    ExternalCluster(secure_kafka.plaintext_bootstrap).create_topics({topic: PARTITIONS})

    async def run() -> None:
        await _produce(secure_kafka.plaintext_bootstrap, topic)
        server = _server(secure_kafka, _listener(secure_kafka, tmp_path))
        await server.start()
        settings = secure_kafka.settings("app")
        consumer = Consumer(
            [topic],
            partition_assignors=[RangeAssignor()],
            **{**settings, "bootstrap_servers": f"127.0.0.1:{server.port}"},
            group_id=group,
            group_protocol="consumer",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )
        seen: list[bytes] = []
        try:
            await consumer.start()
            async with asyncio.timeout(60):
                while len(seen) < RECORDS:
                    batch = await consumer.getmany(timeout_ms=500)
                    seen.extend(r.value for records in batch.values() for r in records)
            await consumer.commit()
            assert {p.partition for p in consumer.assignment()} == set(range(PARTITIONS))
            assert sorted(int(v) for v in seen) == list(range(RECORDS))
            committed = {p: server.offsets.committed(group, topic, p) for p in range(PARTITIONS)}
            assert {p: c.offset if c else None for p, c in committed.items()} == {
                p: RECORDS // PARTITIONS for p in range(PARTITIONS)
            }
        finally:
            await consumer.stop()
            await server.stop()

    asyncio.run(run())


def test_no_rights_at_the_cluster_means_none_through_the_coordinator(
    secure_kafka: SecuredCluster, tmp_path: Path
) -> None:
    topic = f"secure-t-{uuid.uuid4().hex[:6]}"
    ExternalCluster(secure_kafka.plaintext_bootstrap).create_topics({topic: PARTITIONS})

    async def attempt(conn: AsyncConnection, tag: str) -> tuple[int, bool, bool, bool]:
        """Metadata for the topic, CreateTopics, an auto-creating Metadata: the topic's error
        code, whether the connection was closed, whether each topic now exists."""
        made, auto = f"secure-made-{tag}-{uuid.uuid4().hex[:6]}", f"secure-auto-{tag}-{uuid.uuid4().hex[:6]}"
        (described,) = (await conn.call(metadata_request([topic]), MetadataResponse)).topics
        asked = metadata_request([auto])
        await conn.call(
            type(asked)(
                topics=asked.topics, allow_auto_topic_creation=True, include_topic_authorized_operations=False
            ),
            MetadataResponse,
        )
        closed = False
        try:
            await conn.call(create_topics_request([TopicSpec(name=made, partitions=1)]), CreateTopicsResponse)
        except ConnectionLost:
            closed = True
        await asyncio.sleep(1.0)
        names = {t.name for t in (await fetch_image(secure_kafka.plaintext_bootstrap)).topics}
        return int(described.error_code.value), closed, made in names, auto in names

    async def run() -> None:
        secured = _server(secure_kafka, _listener(secure_kafka, tmp_path))
        open_server = _server(secure_kafka, ListenerSettings())
        await secured.start()
        await open_server.start()
        try:
            password = secure_kafka.password("norights").get_secret_value()
            conn = await logged_in(secured.port, secure_kafka.certs, "SCRAM-SHA-512", "norights", password)
            assert (await join(conn, "secure-g-norights", topic)).error == 30  # GROUP_AUTHORIZATION_FAILED
            code, closed, made, auto = await attempt(conn, "secured")
            await conn.close()
            assert (code, closed, made, auto) == (29, True, False, False)  # TOPIC_AUTHORIZATION_FAILED
            # the contrast: an open coordinator forwards the same requests under app's identity
            conn = await AsyncConnection.open("127.0.0.1", open_server.port)
            code, closed, made, auto = await attempt(conn, "open")
            await conn.close()
            assert (code, closed, made, auto) == (0, False, True, True)
        finally:
            await secured.stop()
            await open_server.stop()

    asyncio.run(run())


def test_the_command_with_a_client_config_and_a_secured_listener(
    secure_kafka: SecuredCluster, tmp_path: Path
) -> None:
    """``streamtasks coordinator --client-config ... --tls-cert ... --sasl-mechanisms ...`` as a
    process: it starts against the SASL_SSL cluster, serves its SCRAM listener, counts logins,
    failures and denials in its status line, logs each denial, and never prints a password."""
    topic = f"secure-cli-{uuid.uuid4().hex[:6]}"
    ExternalCluster(secure_kafka.plaintext_bootstrap).create_topics({topic: 1})
    listener = _listener(secure_kafka, tmp_path)
    app_password = secure_kafka.password("app").get_secret_value()
    client_config = tmp_path / "backing.properties"
    client_config.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\nsasl.username=app\n"
        f"sasl.password={app_password}\nssl.ca.location={secure_kafka.certs.ca_cert}\n"
    )
    server = ServerProcess(
        secure_kafka.sasl_ssl_bootstrap,
        topic=f"secure-coordlog-{uuid.uuid4().hex[:8]}",
        extra=(
            *FAST,
            "--client-config", str(client_config),
            "--tls-cert", str(listener.tls_certfile),
            "--tls-key", str(listener.tls_keyfile),
            "--sasl-mechanisms", "SCRAM-SHA-512",
            "--credentials", str(listener.credentials_file),
            "--acl-file", str(listener.acl_file),
        ),
    )  # fmt: skip

    async def clients(port: int) -> None:
        conn = await logged_in(port, secure_kafka.certs, "SCRAM-SHA-512", "app", app_password)
        assert (await join(conn, f"secure-g-{uuid.uuid4().hex[:6]}", topic)).error == 0
        await conn.close()
        nope = secure_kafka.password("norights").get_secret_value()
        conn = await logged_in(port, secure_kafka.certs, "SCRAM-SHA-512", "norights", nope)
        assert (await join(conn, "secure-not-mine", topic)).error == 30
        await conn.close()
        conn = await connect(port, client_context(secure_kafka.certs))
        assert (await login(conn, "SCRAM-SHA-512", "app", "wrong")).error_code.value == 58
        await conn.close()

    server.start()
    try:
        asyncio.run(clients(server.port))
        deadline = time.monotonic() + 10
        while "denied=1" not in server.status() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert "sasl_ok=2 sasl_failed=1 denied=1" in server.status()
    finally:
        server.stop()
    text = "\n".join(server.lines)
    assert "(SASL_SSL)" in text
    assert "listener: TLS; SASL SCRAM-SHA-512 (2 users); ACL file" in text
    assert "authorization denied: principal=User:norights operation=Read group=secure-not-mine" in text
    for user in ("app", "norights"):
        assert secure_kafka.password(user).get_secret_value() not in text


def test_a_wrong_backing_password_stops_the_command_with_one_line(
    secure_kafka: SecuredCluster, tmp_path: Path
) -> None:
    client_config = tmp_path / "backing.yaml"
    client_config.write_text(
        "security.protocol: SASL_SSL\nsasl.mechanism: SCRAM-SHA-512\nsasl.username: app\n"
        f"sasl.password: not-apps-password-7\nssl.ca.location: {secure_kafka.certs.ca_cert}\n"
        f"bootstrap.servers: {secure_kafka.sasl_ssl_bootstrap}\n"
    )
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "streamtasks", "coordinator", "--listen", "127.0.0.1:0"],
        env={**os.environ, "PYTHONPATH": str(ROOT), "STREAMTASKS_CLIENT_CONFIG": str(client_config)},
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    elapsed = time.monotonic() - started
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    print("the coordinator printed:", lines[0])
    assert lines[0].startswith("streamtasks: error: ")
    assert "SASL_AUTHENTICATION_FAILED" in lines[0]
    assert secure_kafka.sasl_ssl_bootstrap.split(",")[0] in lines[0]
    assert "not-apps-password-7" not in result.stderr + result.stdout
    assert elapsed < 60
