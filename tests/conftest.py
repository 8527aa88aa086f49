"""Shared test configuration.

Hypothesis runs derandomized (a fixed seed) when ``CI`` is set and with random seeds and more
examples locally; ``HYPOTHESIS_PROFILE`` picks a profile explicitly. A failing example is
printed together with the ``@reproduce_failure`` blob that replays it.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    derandomize=True,
    max_examples=100,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", max_examples=300, deadline=None, print_blob=True)
settings.register_profile("nightly", max_examples=5_000, deadline=None, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))


# -- the Kafka broker for integration tests -------------------------------------------------

from collections.abc import Iterator  # noqa: E402

import pytest  # noqa: E402

from streamtasks.embedded import Cluster, cluster_from_env  # noqa: E402


@pytest.fixture(scope="session")
def kafka() -> Iterator[Cluster]:
    """A Kafka-compatible cluster: the broker ``STREAMTASKS_BROKER`` names (``auto`` by default:
    Apache Kafka where Java 17+ and Maven are on PATH, else Tansu; or ``kafka`` / ``tansu``)
    started for this test session, or the cluster named by ``STREAMTASKS_BOOTSTRAP``."""
    cluster = cluster_from_env()
    try:
        yield cluster
    finally:
        cluster.stop()


# -- the secured Apache Kafka (SASL_SSL, mutual TLS, ACLs) -----------------------------------

from typing import TYPE_CHECKING  # noqa: E402

if TYPE_CHECKING:
    from streamtasks.embedded.secure_cluster import SecuredCluster


@pytest.fixture(scope="session")
def secure_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredCluster]:
    """Apache Kafka with PLAINTEXT (a super user), SASL_SSL (PLAIN, SCRAM-SHA-256/512,
    OAUTHBEARER) and mutual-TLS SSL listeners, KRaft's StandardAuthorizer and the users
    ``admin`` (super), ``app`` (All on ``app-*``/``secure-*``) and ``norights`` (no ACL), as a
    frozen :class:`SecuredCluster` (docs/testing.md, "The secured broker"). Started once per
    session, on first use, beside whatever ``kafka`` is; skipped when Java 17+/Maven are
    missing or ``STREAMTASKS_BOOTSTRAP`` names a cluster (it cannot be reconfigured)."""
    from streamtasks.embedded import BOOTSTRAP_ENV
    from streamtasks.embedded.certs import make_cert_kit
    from streamtasks.embedded.kafka_broker import INSTALL_HINT, kafka_requirements_missing
    from streamtasks.embedded.secure_broker import SecureKafkaBroker

    if os.environ.get(BOOTSTRAP_ENV):
        pytest.skip(f"secured broker: {BOOTSTRAP_ENV} names an existing cluster; it needs its own broker")
    missing = kafka_requirements_missing()
    if missing is not None:
        pytest.skip(f"secured broker (Apache Kafka only): {missing}; {INSTALL_HINT}")
    certs = make_cert_kit(tmp_path_factory.mktemp("secure-kafka-certs"))
    with SecureKafkaBroker(certs=certs) as broker:
        yield broker.secured()


# -- the three-broker Apache Kafka cluster -------------------------------------------------

if TYPE_CHECKING:
    from streamtasks.embedded.kafka_cluster import KafkaCluster


@pytest.fixture(scope="session")
def kafka_cluster() -> Iterator[KafkaCluster]:
    """Three Apache Kafka brokers (KRaft, each its own process; replication factor 3,
    ``min.insync.replicas=2``), each behind a :class:`~streamtasks.embedded.fault_proxy.FaultProxy`
    that clients reach it through (docs/testing.md, "The three-broker cluster"). Started once
    per session, on first use (about 25 s on two cores); a test that breaks it calls
    ``recover()`` when done. Skipped under Tansu, without Java 17+/Maven, or when
    ``STREAMTASKS_BOOTSTRAP`` names a cluster."""
    from streamtasks.embedded import BOOTSTRAP_ENV, BROKER_ENV
    from streamtasks.embedded.kafka_broker import INSTALL_HINT, kafka_requirements_missing
    from streamtasks.embedded.kafka_cluster import start_cluster

    if os.environ.get(BOOTSTRAP_ENV):
        pytest.skip(f"the three-broker cluster: {BOOTSTRAP_ENV} names an existing cluster")
    if os.environ.get(BROKER_ENV, "").strip().lower() == "tansu":
        pytest.skip(f"the three-broker cluster is Apache Kafka only ({BROKER_ENV}=tansu)")
    missing = kafka_requirements_missing()
    if missing is not None:
        pytest.skip(f"the three-broker cluster (Apache Kafka only): {missing}; {INSTALL_HINT}")
    cluster = start_cluster(3, proxied=True)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def cluster_to_break(kafka_cluster: KafkaCluster) -> Iterator[KafkaCluster]:
    """The session's ``kafka_cluster`` for a test that kills, stops or pauses brokers or sets
    proxy faults: whole again after the test (:meth:`KafkaCluster.recover`), whatever it broke."""
    try:
        yield kafka_cluster
    finally:
        kafka_cluster.recover()


# -- sockets a live test leaves behind ------------------------------------------------------

import gc  # noqa: E402
import warnings  # noqa: E402

_LEFT_BEHIND = pytest.StashKey[list[str]]()


@pytest.fixture(autouse=True)
def _live_resource_warnings(request: pytest.FixtureRequest) -> Iterator[None]:
    """A live test's ResourceWarnings (an unclosed socket or transport) are collected at its own
    teardown and reported in the summary under its name, instead of failing whichever test
    happens to run when the garbage collector finalizes them (CI failed a pure hypothesis test
    that way on a connected socket to the broker; docs/testing.md). Every other warning, and
    every ResourceWarning in the pure tests, is still an error."""
    if request.node.get_closest_marker("integration") is None:
        yield
        return
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        yield
        gc.collect()
    found = [f"{request.node.nodeid}: {w.message}" for w in caught if issubclass(w.category, ResourceWarning)]
    request.config.stash.setdefault(_LEFT_BEHIND, []).extend(found)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    found = config.stash.get(_LEFT_BEHIND, [])
    if found:
        terminalreporter.section("resources live tests left behind (ResourceWarning)")
        for line in found:
            terminalreporter.line(line)
