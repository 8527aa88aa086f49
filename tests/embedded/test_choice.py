"""Broker choice: STREAMTASKS_BROKER / --broker pick Apache Kafka or Tansu; ``auto`` falls back to
Tansu where Java or Maven is missing, ``kafka`` then says what to install; STREAMTASKS_BOOTSTRAP
wins over both."""

from __future__ import annotations

import argparse
import io
from pathlib import Path

import pytest

from streamtasks.cli import build_parser
from streamtasks.embedded import (
    BOOTSTRAP_ENV,
    BROKER_ENV,
    EmbeddedBroker,
    ExternalCluster,
    KafkaBroker,
    add_broker_arguments,
    choose_broker,
    client_settings,
    cluster_from_env,
    run_on_broker,
    start_broker,
)
from streamtasks.embedded.kafka_broker import INSTALL_HINT, kafka_requirements_missing
from streamtasks.errors import BrokerError

_missing = kafka_requirements_missing()
needs_java = pytest.mark.skipif(
    _missing is not None, reason=f"Apache Kafka broker: {_missing}; {INSTALL_HINT} to run this test"
)


@pytest.fixture
def no_java(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A PATH with neither java nor mvn on it."""
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv(BOOTSTRAP_ENV, raising=False)


@needs_java
def test_the_default_is_auto_which_is_apache_kafka_here(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(BROKER_ENV, raising=False)
    assert choose_broker().kind == "kafka"


@pytest.mark.usefixtures("no_java")
def test_the_default_without_java_is_tansu_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(BROKER_ENV, raising=False)
    choice = choose_broker()
    assert choice.kind == "tansu"
    assert "install Java 17+ and Maven" in choice.describe()


def test_the_environment_and_the_argument_choose(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(BROKER_ENV, "tansu")
    assert choose_broker().kind == "tansu"
    monkeypatch.setenv(BROKER_ENV, "bogus")
    with pytest.raises(BrokerError, match="unknown broker 'bogus'"):
        choose_broker()
    assert choose_broker("tansu").kind == "tansu"  # the argument wins over the environment


@needs_java
def test_auto_is_apache_kafka_where_java_and_maven_are(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(BROKER_ENV, "auto")
    choice = choose_broker()
    assert choice.kind == "kafka"
    assert choice.describe().startswith(f"Apache Kafka {choice.version} (java ")
    assert choice.describe().endswith("mvn found)")


@pytest.mark.usefixtures("no_java")
def test_without_java_auto_falls_back_to_tansu_and_says_why() -> None:
    choice = choose_broker("auto")
    assert choice.kind == "tansu"
    assert choice.describe() == "Tansu (no java on PATH: install Java 17+ and Maven for Apache Kafka)"


@pytest.mark.usefixtures("no_java")
def test_without_java_kafka_is_an_error_saying_what_to_install() -> None:
    with pytest.raises(BrokerError, match=r"no java on PATH: install Java 17\+ and Maven"):
        choose_broker("kafka")
    with pytest.raises(BrokerError, match=r"install Java 17\+ and Maven"):
        KafkaBroker().start()


@pytest.mark.integration
@pytest.mark.usefixtures("no_java")
def test_without_java_auto_starts_tansu_and_prints_the_choice() -> None:
    said = io.StringIO()
    broker = start_broker("auto", announce=said)
    try:
        assert isinstance(broker, EmbeddedBroker)
        assert broker.api_versions()
    finally:
        broker.stop()
    assert said.getvalue() == (
        "streamtasks: broker = Tansu (no java on PATH: install Java 17+ and Maven for Apache Kafka)\n"
    )


@pytest.mark.integration
@needs_java
def test_cluster_from_env_starts_the_broker_streamtasks_broker_names(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv(BOOTSTRAP_ENV, raising=False)
    monkeypatch.setenv(BROKER_ENV, "kafka")
    cluster = cluster_from_env()
    try:
        assert isinstance(cluster, KafkaBroker)
        assert cluster.api_versions()
    finally:
        cluster.stop()
    assert capsys.readouterr().err.startswith(f"streamtasks: broker = Apache Kafka {cluster.version} (java ")
    monkeypatch.setenv(BROKER_ENV, "tansu")
    cluster = cluster_from_env()
    try:
        assert isinstance(cluster, EmbeddedBroker)
    finally:
        cluster.stop()


def test_streamtasks_bootstrap_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(BOOTSTRAP_ENV, "127.0.0.1:1")
    monkeypatch.setenv(BROKER_ENV, "kafka")
    cluster = cluster_from_env()
    assert isinstance(cluster, ExternalCluster)
    assert cluster.bootstrap_servers == "127.0.0.1:1"


def test_demo_takes_a_broker_choice() -> None:
    assert build_parser().parse_args(["demo", "--broker", "kafka"]).broker == "kafka"
    assert build_parser().parse_args(["demo"]).broker is None
    with pytest.raises(SystemExit):
        build_parser().parse_args(["demo", "--broker", "redpanda"])


def test_only_tansu_members_turn_the_missed_generation_rule_off() -> None:
    """Tansu skips generation numbers for members that took part (docs/testing.md, "generation
    gaps"); on Apache Kafka and an existing cluster the library's defaults (Kafka's) hold."""
    assert client_settings(EmbeddedBroker()) == {"lose_on_missed_generation": False}
    assert client_settings(KafkaBroker()) == {}
    assert client_settings(ExternalCluster("127.0.0.1:9092")) == {}


def test_a_script_runs_its_main_on_the_cluster_bootstrap_servers_names() -> None:
    """The examples' runner: ``--bootstrap-servers`` names a cluster, no broker is started."""
    parser = argparse.ArgumentParser()
    add_broker_arguments(parser)
    args = parser.parse_args(["--bootstrap-servers", "host:9092"])
    assert args.broker is None
    seen: list[str] = []

    async def main(bootstrap_servers: str) -> int:
        seen.append(bootstrap_servers)
        return 3

    assert run_on_broker(args, main) == 3
    assert seen == ["host:9092"]


def test_a_script_offers_the_embedded_brokers() -> None:
    parser = argparse.ArgumentParser()
    add_broker_arguments(parser)
    assert parser.parse_args(["--broker", "tansu"]).broker == "tansu"
    with pytest.raises(SystemExit):
        parser.parse_args(["--broker", "redpanda"])
