"""A node of the three-broker cluster: the settings it shares with the others, a clean stop, a
start on the same ports and data, and a pause that hangs it (``kafka_cluster``, Apache Kafka only)."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamtasks.embedded.cluster_broker import ClusterBroker, cluster_settings
from streamtasks.embedded.fault_proxy import FaultProxy
from streamtasks.embedded.kafka_cluster import KafkaCluster
from streamtasks.errors import BrokerError


def test_settings_are_a_production_clusters() -> None:
    three = cluster_settings(3)
    assert three["default.replication.factor"] == "3"
    assert three["offsets.topic.replication.factor"] == "3"
    assert three["transaction.state.log.replication.factor"] == "3"
    assert three["min.insync.replicas"] == "2"
    assert cluster_settings(1)["default.replication.factor"] == "1"
    assert cluster_settings(1)["min.insync.replicas"] == "1"


def test_a_proxied_node_advertises_its_proxy_to_clients_and_itself_to_brokers(tmp_path: Path) -> None:
    ports = {"PLAINTEXT": 9001, "INTERNAL": 9002, "CONTROLLER": 9003}
    node = ClusterBroker(
        node_id=2,
        host="127.0.0.1",
        ports=ports,
        quorum="127.0.0.1:9003,127.0.0.1:9013",
        initial_controllers="2@127.0.0.1:9003:AAAAAAAAAAAAAAAAAAAAAA",
        cluster_id="BBBBBBBBBBBBBBBBBBBBBB",
        directory=tmp_path,
        configs=cluster_settings(3),
        proxy=FaultProxy("127.0.0.1", 9001, listen_port=9100),  # not started: only its address
    )
    lines = set(node._write_properties(tmp_path).read_text().splitlines())
    assert {
        "node.id=2",
        "listeners=PLAINTEXT://127.0.0.1:9001,INTERNAL://127.0.0.1:9002,CONTROLLER://127.0.0.1:9003",
        "advertised.listeners=PLAINTEXT://127.0.0.1:9100,INTERNAL://127.0.0.1:9002,CONTROLLER://127.0.0.1:9003",
        "inter.broker.listener.name=INTERNAL",
        "controller.quorum.bootstrap.servers=127.0.0.1:9003,127.0.0.1:9013",
        f"log.dirs={tmp_path / 'data'}",
        "min.insync.replicas=2",
    } <= lines
    assert node.address == "127.0.0.1:9100"
    assert node.bootstrap_servers == "127.0.0.1:9001"


@pytest.mark.integration
def test_a_stopped_broker_shuts_down_cleanly_and_a_paused_one_hangs(cluster_to_break: KafkaCluster) -> None:
    cluster = cluster_to_break
    cluster.create_topics({"cluster-paused": 1})
    victim = cluster.brokers[-1]
    port, directory = victim.port, victim.directory
    victim.stop()
    assert not victim.running
    assert (directory / "data" / "meta.properties").is_file()
    assert victim.node_id not in {int(b.node_id) for b in cluster.metadata(()).brokers}
    victim.start()
    assert (victim.port, victim.directory) == (port, directory)
    cluster.wait_ready()

    victim.pause()
    with pytest.raises(BrokerError):
        victim.api_versions()  # accepted by the kernel, never answered
    victim.resume()
    assert victim.api_versions()
