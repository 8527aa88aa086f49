"""The Apache Kafka broker: it starts from the cached jars, serves both group protocols, creates
topics, carries records, stops, and dies with its parent. Skipped, saying what to install, where
Java 17+ or Maven is missing."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from kafka.admin import KafkaAdminClient

from streamtasks.embedded import KafkaBroker, kafka_classpath, kafka_version
from streamtasks.embedded.kafka_broker import (
    INSTALL_HINT,
    broker_pom,
    java_version,
    kafka_requirements_missing,
)
from streamtasks.errors import BrokerError
from tests.embedded.procs import broker_outlives_killed_parent, wait_for_text, wait_gone

JOIN_GROUP, CONSUMER_GROUP_HEARTBEAT, CONSUMER_GROUP_DESCRIBE = 11, 68, 69

_missing = kafka_requirements_missing()
needs_java = pytest.mark.skipif(
    _missing is not None, reason=f"Apache Kafka broker: {_missing}; {INSTALL_HINT} to run these tests"
)


@pytest.fixture(scope="module")
def broker() -> Iterator[KafkaBroker]:
    with KafkaBroker() as started:
        yield started


@pytest.mark.integration
@needs_java
def test_answers_api_versions_with_both_group_protocols(broker: KafkaBroker) -> None:
    versions = broker.api_versions()
    assert versions[JOIN_GROUP][1] >= 5  # classic, with static membership
    assert CONSUMER_GROUP_HEARTBEAT in versions  # KIP-848
    assert CONSUMER_GROUP_DESCRIBE in versions
    assert broker.version == kafka_version()
    assert broker.running
    assert broker.bootstrap_servers == f"127.0.0.1:{broker.port}"


@pytest.mark.integration
@needs_java
def test_creates_topics_another_client_sees(broker: KafkaBroker) -> None:
    broker.create_topics({"kafka-events": 6})
    broker.create_topics({"kafka-events": 6})  # idempotent by default
    with pytest.raises(BrokerError, match="kafka-events"):
        broker.create_topics({"kafka-events": 6}, exist_ok=False)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    try:
        (described,) = admin.describe_topics(["kafka-events"])
    finally:
        admin.close()
    assert len(described["partitions"]) == 6


async def _round_trip(bootstrap: str, topic: str) -> tuple[bytes | None, bytes | None]:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        await producer.send_and_wait(topic, b"hello", key=b"k")
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap, group_id="kafka-round-trip", auto_offset_reset="earliest"
    )
    await consumer.start()
    try:
        record = await asyncio.wait_for(consumer.getone(), timeout=30)
    finally:
        await consumer.stop()
    return record.key, record.value


@pytest.mark.integration
@needs_java
def test_a_produced_record_is_consumed_by_a_group_member(broker: KafkaBroker) -> None:
    broker.create_topics({"kafka-round-trip": 1})
    assert asyncio.run(_round_trip(broker.bootstrap_servers, "kafka-round-trip")) == (b"k", b"hello")


@pytest.mark.integration
@needs_java
def test_stop_ends_the_process_and_removes_its_directory() -> None:
    broker = KafkaBroker().start()
    pid, log = broker.pid, broker.log_path
    assert pid is not None
    assert log is not None
    assert log.is_file()
    # ApiVersions may answer (start() returns) a moment before the broker logs that it started.
    assert "Kafka Server started" in wait_for_text(log, "Kafka Server started")
    broker.stop()
    broker.stop()  # idempotent
    assert not broker.running
    assert wait_gone(pid, 5)
    assert not log.parent.exists()
    with pytest.raises(BrokerError):
        broker.api_versions()


@pytest.mark.integration
@needs_java
def test_broker_dies_with_a_parent_killed_by_sigkill() -> None:
    assert not broker_outlives_killed_parent("KafkaBroker().start()"), "Kafka outlived its kill -9'd parent"


@pytest.mark.integration
@needs_java
def test_a_broker_that_cannot_start_shows_its_log(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        broker = KafkaBroker(port=taken.getsockname()[1], log_path=tmp_path / "broker.log")
        with pytest.raises(BrokerError, match=r"exited early; its log:(.|\n)*Address already in use"):
            broker.start()
    assert not broker.running
    assert "Address already in use" in (tmp_path / "broker.log").read_text()


@pytest.mark.integration
@needs_java
def test_a_setting_kafka_rejects_fails_at_once_with_the_reason() -> None:
    broker = KafkaBroker(configs={"num.network.threads": "many"})
    with pytest.raises(BrokerError, match=r"formatting the Kafka storage failed(.|\n)*num\.network\.threads"):
        broker.start()
    assert not broker.running


@pytest.mark.integration
@needs_java
def test_a_warm_start_runs_no_maven(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    kafka_classpath()  # resolved by the fixture already; make sure
    java = shutil.which("java")
    assert java is not None
    (tmp_path / "java").symlink_to(os.path.realpath(java))
    monkeypatch.setenv("PATH", str(tmp_path))  # java, and no mvn
    jars = kafka_classpath()
    assert any(Path(j).name.startswith(f"kafka_2.13-{kafka_version()}") for j in jars)


def _script(path: Path, body: str) -> None:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def test_the_classpath_is_cached_per_pom_and_resolved_again_when_a_jar_is_gone(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A fake ``mvn`` writes a classpath of two files and counts its runs."""
    bin_dir, jar_dir = tmp_path / "bin", tmp_path / "jars"
    bin_dir.mkdir()
    jar_dir.mkdir()
    runs = tmp_path / "runs"
    for name in ("a.jar", "b.jar"):
        (jar_dir / name).write_text("")
    _script(
        bin_dir / "mvn",
        f"echo run >> {runs}\n"
        'for arg; do case "$arg" in -Dmdep.outputFile=*) out="${arg#-Dmdep.outputFile=}";; esac; done\n'
        f'printf "{jar_dir}/a.jar:{jar_dir}/b.jar" > "$out"\n',
    )
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    pom = tmp_path / "pom.xml"
    pom.write_bytes(broker_pom().read_bytes())

    def mvn_runs() -> int:
        return len(runs.read_text().splitlines()) if runs.exists() else 0

    assert kafka_classpath(pom) == [str(jar_dir / "a.jar"), str(jar_dir / "b.jar")]
    assert mvn_runs() == 1
    assert (tmp_path / "cache" / "streamtasks" / f"kafka-{kafka_version(pom)}").is_dir()
    kafka_classpath(pom)
    assert mvn_runs() == 1  # cached
    pom.write_bytes(pom.read_bytes() + b"<!-- changed -->\n")
    kafka_classpath(pom)
    assert mvn_runs() == 2  # a changed pom is resolved again
    (jar_dir / "b.jar").unlink()
    with pytest.raises(BrokerError, match="missing jars"):
        kafka_classpath(pom)
    assert mvn_runs() == 3  # a jar gone from the local repository: resolved again


def test_failing_maven_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _script(tmp_path / "mvn", "echo 'Could not resolve dependencies' >&2\nexit 1\n")
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    with pytest.raises(BrokerError, match="Could not resolve dependencies"):
        kafka_classpath()


def test_java_versions_are_read_old_and_new(tmp_path: Path) -> None:
    for name, banner, major in (
        ("java8", 'openjdk version "1.8.0_392"', 8),
        ("java11", 'openjdk version "11.0.21" 2023-10-17', 11),
        ("java21", 'openjdk version "21" 2023-09-19', 21),
    ):
        _script(tmp_path / name, f"echo '{banner}' >&2\n")
        assert java_version(str(tmp_path / name)) == major


def test_an_old_java_is_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _script(tmp_path / "java", "echo 'openjdk version \"11.0.21\"' >&2\n")
    _script(tmp_path / "mvn", "exit 0\n")
    monkeypatch.setenv("PATH", str(tmp_path))
    assert kafka_requirements_missing() == "java on PATH is version 11, Kafka 4 needs 17+"
    with pytest.raises(BrokerError, match="install Java 17\\+ and Maven"):
        KafkaBroker().start()


def test_the_pom_names_the_kafka_version() -> None:
    assert kafka_version().startswith("4.")
