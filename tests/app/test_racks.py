"""The replica racks of partitions, from a Metadata response (KIP-925's input)."""

from __future__ import annotations

from aiokafka.cluster import ClusterMetadata
from aiokafka.protocol.metadata import MetadataResponse_v1

from streamtasks.app.racks import cluster_partition_racks, replica_racks
from topology.ids import TopicPartition


def test_each_partition_gets_its_replicas_racks() -> None:
    racks = replica_racks(
        {1: "a", 2: "b", 3: None},
        {TopicPartition("t", 0): (1, 2), TopicPartition("t", 1): (2,), TopicPartition("t", 2): (1, 3)},
    )
    # a replica on a broker without rack: the partition is left out (rack-awareness stays off)
    assert racks == {TopicPartition("t", 0): frozenset({"a", "b"}), TopicPartition("t", 1): frozenset({"b"})}


def test_read_from_aiokafkas_cluster_metadata() -> None:
    cluster = ClusterMetadata()
    cluster.update_metadata(
        MetadataResponse_v1(
            brokers=[(1, "h1", 9092, "eu-1a"), (2, "h2", 9092, "eu-1b")],
            controller_id=1,
            topics=[
                (0, "orders", False, [(0, 0, 1, [1, 2], [1, 2]), (0, 1, 2, [2], [2])]),
                (0, "other", False, [(0, 0, 1, [1], [1])]),
            ],
        )
    )
    assert cluster_partition_racks(cluster, ["orders", "missing"]) == {
        TopicPartition("orders", 0): frozenset({"eu-1a", "eu-1b"}),
        TopicPartition("orders", 1): frozenset({"eu-1b"}),
    }
