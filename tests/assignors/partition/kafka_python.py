"""Running kafka-python 3's assignors (a peer implementation nobody here wrote) on our groups."""

from __future__ import annotations

import warnings
from types import SimpleNamespace
from typing import Any

from assignors.partition.types import GroupSubscription
from topology.ids import TopicPartition

with warnings.catch_warnings():
    # kafka-python 3 reads its schemas with a deprecated importlib.resources call.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription

__all__ = ["RangePartitionAssignor", "RoundRobinPartitionAssignor", "run"]


class _Cluster:
    def __init__(self, partitions: dict[str, int]) -> None:
        self._partitions = partitions

    def topics(self) -> set[str]:
        return set(self._partitions)

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        count = self._partitions.get(topic)
        return None if count is None else set(range(count))


def run(assignor: Any, g: GroupSubscription) -> dict[str, tuple[TopicPartition, ...]]:
    """kafka-python's assignment of ``g``, in our types."""
    members = [
        SimpleNamespace(
            member_id=member,
            group_instance_id=s.group_instance_id,
            metadata=ConsumerProtocolSubscription(version=0, topics=list(s.topics), user_data=b""),
        )
        for member, s in g.members.items()
    ]
    result = assignor.assign(_Cluster(dict(g.partitions_per_topic)), members)
    return {
        member: tuple(sorted(TopicPartition(tp.topic, tp.partition) for tp in assignment.partitions()))
        for member, assignment in result.items()
    }
