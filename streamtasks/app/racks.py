"""The racks of partitions' replicas, from the cluster metadata, for KIP-925's rack-aware
active placement (``rack.aware.assignment.strategy``; :mod:`assignors.task.rack_aware`).

The Metadata response names every broker with its rack and every partition with its replicas'
broker ids; :func:`replica_racks` joins the two. A partition with a replica on a broker that has
no rack (or that the response does not name) is left out: the assignor then leaves the
rack-aware placement off, as Kafka Streams does when a rack is missing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from topology.ids import TopicPartition

__all__ = ["cluster_partition_racks", "replica_racks"]


def replica_racks(
    brokers: Mapping[int, str | None], replicas: Mapping[TopicPartition, Sequence[int]]
) -> dict[TopicPartition, frozenset[str]]:
    """Per partition, the racks of its replicas (``brokers``: node id -> rack)."""
    out: dict[TopicPartition, frozenset[str]] = {}
    for tp, nodes in replicas.items():
        racks = [brokers.get(node) for node in nodes]
        if nodes and all(r is not None for r in racks):
            out[tp] = frozenset(r for r in racks if r is not None)
    return out


def cluster_partition_racks(cluster: Any, topics: Iterable[str]) -> dict[TopicPartition, frozenset[str]]:
    """:func:`replica_racks` of an aiokafka ``ClusterMetadata`` (its last Metadata response) for
    ``topics``. aiokafka keeps the replicas only in the partitions' metadata records, which it
    does not expose otherwise."""
    brokers = {b.nodeId: b.rack for b in cluster.brokers()}
    by_topic: Mapping[str, Mapping[int, Any]] = getattr(cluster, "_partitions", {})
    replicas = {
        TopicPartition(topic, p): tuple(meta.replicas)
        for topic in topics
        for p, meta in by_topic.get(topic, {}).items()
    }
    return replica_racks(brokers, replicas)
