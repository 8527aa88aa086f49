"""Groups over the secured Apache Kafka's SASL_SSL listener (SCRAM-SHA-512 as user ``app``,
StandardAuthorizer ACLs on ``secure-*``), every client with the same :class:`ClientSettings`
(issue 25, item 5): an App's per-offset audit, a mixed classic cooperative group (streamtasks,
kafka-python, confluent-kafka, the Java consumer) under a rolling bounce, per offset, KIP-848 on
Kafka's own coordinator, and ``streamtasks drill run`` with ``--client-config``.

One secured broker for the session (the ``secure_kafka`` fixture); short runs (few partitions,
dynamic members only) to keep ``make test`` quick.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import io
import json
import tempfile
import uuid
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer

from streamtasks.cli import main as cli_main
from streamtasks.drills.offset_audit import AuditTopicReader, OffsetAudit
from streamtasks.drills.stateful_app import make_app, record_for
from streamtasks.embedded.secure_cluster import SecuredCluster
from streamtasks.runtime.admin import create_topics_async
from streamtasks.runtime.client_file import security_kwargs
from streamtasks.runtime.security import ClientSettings, make_client_settings
from tests.integration.harness import JavaPeer, JavaPeerMissing, LiveGroup, java_peer, rolling_bounce_group
from tests.integration.test_consumer_kip848 import KIP848, describe

pytestmark = pytest.mark.integration

WAIT_S = 90


@pytest.fixture(scope="module")
def settings(secure_kafka: SecuredCluster) -> ClientSettings:
    return make_client_settings(secure_kafka.settings("app", "SCRAM-SHA-512"))


class _Topics:
    """Creates the test's topics over PLAINTEXT (the broker's setup listener): LiveGroup's way."""

    def __init__(self, cluster: SecuredCluster) -> None:
        self.cluster = cluster

    def create_topics(self, topics: dict[str, int]) -> None:
        from streamtasks.embedded.cluster import create_topics

        host, port = self.cluster.plaintext_bootstrap.rsplit(":", 1)
        create_topics(host, int(port), topics)


# -- an App, per offset ---------------------------------------------------------------------------


async def _app_audit(settings: ClientSettings, state_root: str) -> tuple[int, int, list[str]]:
    run = uuid.uuid4().hex[:6]
    app_id, topic, audit_topic = f"secure-app-{run}", f"secure-app-{run}-in", f"secure-app-{run}-audit"
    await create_topics_async(settings, {topic: 4, audit_topic: 1})
    audit = OffsetAudit()
    reader = AuditTopicReader(settings, audit_topic, audit)
    await reader.start()
    config = {
        **security_kwargs(settings),
        "bootstrap_servers": settings.bootstrap_servers,
        "session_timeout_ms": 6000,
        "heartbeat_interval_ms": 500,
        "commit_interval_ms": 200,
    }
    apps = [
        make_app(
            app_id,
            topic,
            {**config, "state_dir": f"{state_root}/{n}", "client_id": n},
            audit_topic=audit_topic,
        )
        for n in ("a1", "a2")
    ]
    producer = AIOKafkaProducer(**settings.aiokafka_kwargs(), linger_ms=5)
    await producer.start()
    runs: list[asyncio.Task[None]] = []
    try:
        for app in apps:
            await app.start()
            runs.append(asyncio.get_running_loop().create_task(app.run()))
        for seq in range(400):
            key, value = record_for(seq, 50)
            await audit.send(producer, topic, key=key, value=value)
            if seq == 200:
                await apps[0].stop()  # a rebalance mid-stream: a2 takes every task
            await asyncio.sleep(0.01)
        await producer.flush()
        complete = await reader.wait_complete(60)
    finally:
        await producer.stop()
        for app in apps:
            await app.stop()
        await asyncio.gather(*runs, return_exceptions=True)
        await reader.stop()
    report = audit.report()
    return report.acknowledged, report.lost, [str(complete)]


def test_app_per_offset_audit_over_sasl_ssl(settings: ClientSettings) -> None:
    with tempfile.TemporaryDirectory() as state_root:
        acknowledged, lost, complete = asyncio.run(_app_audit(settings, state_root))
    assert acknowledged == 400
    assert lost == 0
    assert complete == ["True"]


# -- a mixed classic cooperative group, and KIP-848, per offset ------------------------------------


@pytest.fixture(scope="module")
def peer() -> JavaPeer:
    try:
        return java_peer()
    except JavaPeerMissing as exc:
        pytest.skip(f"the Java consumer peer cannot run here: {exc}")


async def _bounce(
    cluster: SecuredCluster, settings: ClientSettings, peer: JavaPeer, log_dir: Path, *, kip848: bool
) -> tuple[Any, list[Any]]:
    topic = f"secure-{'kip848' if kip848 else 'mixed'}-{uuid.uuid4().hex[:6]}"
    g = LiveGroup.create(
        _Topics(cluster), topic, 4, record_ids="offset", log_dir=log_dir, java_peer=peer, settings=settings
    )
    g = dataclasses.replace(g, group=f"{topic}-group")  # the ACLs grant app secure-* groups only

    def make(name: str) -> Any:
        if name == "st1":
            return g.streamtasks(name, **(KIP848 if kip848 else {"assignors": ["cooperative_sticky"]}))
        if name == "java":
            return g.java(name, {"group.protocol": "consumer"} if kip848 else {})
        if name == "kafka-python":
            return g.kafka_python(name)
        return g.confluent(name, **({"group_protocol": "consumer"} if kip848 else {}))

    described: list[Any] = []

    async def joined() -> None:
        if kip848:
            described.extend(await describe(settings, g.group))  # type: ignore[arg-type]

    order = ("st1", "java", "confluent") if kip848 else ("st1", "java", "kafka-python", "confluent")
    await rolling_bounce_group(
        make, order, g.audit, g.partitions, g.producer(), static=False, log_dir=log_dir, wait_s=WAIT_S,
        joined=joined,
    )  # fmt: skip
    return g.audit, described


def test_mixed_cooperative_group_rolling_bounce_over_sasl_ssl(
    secure_kafka: SecuredCluster, settings: ClientSettings, peer: JavaPeer, tmp_path: Path
) -> None:
    audit, _ = asyncio.run(_bounce(secure_kafka, settings, peer, tmp_path, kip848=False))
    assert audit.ledger.report(0).violations == (), audit.timeline()
    assert audit.records.produced_count > 0
    assert audit.records.lost() == []
    # The Java peer read the password from its 0600 properties file; no log holds it.
    secret = secure_kafka.password("app").get_secret_value().encode()
    holding = {p.name for p in tmp_path.rglob("*") if p.is_file() and secret in p.read_bytes()}
    assert holding == {p.name for p in tmp_path.glob("java.*.client.properties")}
    assert all(p.stat().st_mode & 0o077 == 0 for p in tmp_path.glob("*.client.properties"))


def test_kip848_on_kafkas_coordinator_over_sasl_ssl(
    secure_kafka: SecuredCluster, settings: ClientSettings, peer: JavaPeer, tmp_path: Path
) -> None:
    audit, described = asyncio.run(_bounce(secure_kafka, settings, peer, tmp_path, kip848=True))
    assert {m.member_type for m in described} == {1}  # every member speaks KIP-848
    assert len(described) == 3
    assert audit.ledger.report(0).violations == (), audit.timeline()
    assert audit.records.produced_count > 0
    assert audit.records.lost() == []


# -- a drill with --client-config -----------------------------------------------------------------


def test_drill_run_with_client_config(secure_kafka: SecuredCluster, tmp_path: Path) -> None:
    # The drill names its topics and group drill-*: the admin user (no ACL needed) runs it.
    password = secure_kafka.password("admin").get_secret_value()
    config = tmp_path / "client.properties"
    config.write_text(
        f"bootstrap.servers={secure_kafka.sasl_ssl_bootstrap}\n"
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
        f"sasl.username=admin\nsasl.password={password}\nssl.ca.location={secure_kafka.certs.ca_cert}\n"
    )
    out = io.StringIO()
    argv = ["drill", "run", "eager-to-cooperative", "--client-config", str(config), "--json",
            "--workers", "2", "--partitions", "4", "--rate", "100"]  # fmt: skip
    with contextlib.redirect_stderr(io.StringIO()) as err, contextlib.redirect_stdout(out):
        code = cli_main(argv)
    result = json.loads(out.getvalue())
    assert code == 0, (result, err.getvalue()[-2000:])
    assert result["drill"] == "eager-to-cooperative"
    assert result["lost"] == 0
    assert result["double_owned"] == 0
    assert result["acknowledged"] > 0
    assert password not in out.getvalue()
    assert password not in err.getvalue()


@pytest.mark.parametrize("command", ["demo", "drill"])
def test_a_wrong_password_is_one_line_naming_the_broker(
    secure_kafka: SecuredCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    wrong = "not-the-Password-7"
    config = tmp_path / "client.yaml"
    config.write_text(
        f"security.protocol: SASL_SSL\nsasl.mechanism: SCRAM-SHA-512\nsasl.username: app\n"
        f"sasl.password: {wrong}\nssl.ca.location: {secure_kafka.certs.ca_cert}\n"
    )
    where = ["--bootstrap-servers", secure_kafka.sasl_ssl_bootstrap, "--client-config", str(config)]
    argv = ["demo", *where] if command == "demo" else ["drill", "run", "eager-to-cooperative", *where]
    code = cli_main(argv)
    _, err = capsys.readouterr()
    line = err.strip().splitlines()[-1]
    print(line)
    assert code == 2
    assert line.startswith("streamtasks: error: ")
    assert secure_kafka.sasl_ssl_bootstrap in line
    assert "SASL_AUTHENTICATION_FAILED" in line or "authentication" in line.lower()
    assert wrong not in err
