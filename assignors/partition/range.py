"""``range``: Kafka's classic range assignor (EAGER only).

Topic by topic, the topic's subscribers are put in Kafka's member order (static members, i.e.
with a ``group.instance.id``, first by instance id; then dynamic members by member id) and
the partitions, in order, are cut into consecutive ranges: with ``P`` partitions and ``N``
subscribers each gets ``P // N`` and the first ``P % N`` one more. Topics with the same
subscribers and the same partition count therefore line up: the subscriber that gets
partition ``k`` of one gets partition ``k`` of the others (co-partitioning, what joins need).
The result ignores previous ownership, and with many topics the first members can end up with
up to one extra partition per topic.

Racks (``partition_racks``) are not used yet.
"""

from __future__ import annotations

from typing import ClassVar

from assignors.partition._layout import Layout
from assignors.partition.types import GroupAssignment, GroupSubscription, RebalanceProtocol

__all__ = ["RangeAssignor"]


class RangeAssignor:
    """Per-topic consecutive ranges in Kafka's member order."""

    name: ClassVar[str] = "range"
    version: ClassVar[int] = 0

    def supported_protocols(self) -> tuple[RebalanceProtocol, ...]:
        return (RebalanceProtocol.EAGER,)

    def assign(self, group: GroupSubscription) -> GroupAssignment:
        layout = Layout(group)
        order = layout.kafka_member_order()
        subscribers: list[list[int]] = [[] for _ in layout.topics]
        for member in order:
            for topic in layout.member_topics[member]:
                subscribers[topic].append(member)
        numbers: list[list[int]] = [[] for _ in layout.member_ids]
        for topic, members in enumerate(subscribers):
            each, extra = divmod(layout.counts[topic], len(members))
            start = layout.offsets[topic]
            for rank, member in enumerate(members):
                length = each + 1 if rank < extra else each
                numbers[member].extend(range(start, start + length))
                start += length
        return layout.assignment(numbers)
