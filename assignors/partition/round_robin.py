"""``round_robin``: Kafka's classic round-robin assignor (EAGER only).

All subscribed partitions, sorted by (topic, partition), are dealt one at a time to the
members in Kafka's member order (static members first by ``group.instance.id``, then dynamic
members by member id), cycling; a member that does not subscribe to a partition's topic is
skipped. With identical subscriptions member counts differ by at most one; with different
subscriptions the result can be unbalanced, as in Kafka. Previous ownership is ignored.
"""

from __future__ import annotations

from typing import ClassVar

from assignors.partition._layout import Layout
from assignors.partition.types import GroupAssignment, GroupSubscription, RebalanceProtocol

__all__ = ["RoundRobinAssignor"]


class RoundRobinAssignor:
    """Partitions dealt in turn to the members, skipping non-subscribers."""

    #: The JoinGroup protocol name, Kafka's (the registry knows it as ``round_robin``).
    name: ClassVar[str] = "roundrobin"
    version: ClassVar[int] = 0

    def supported_protocols(self) -> tuple[RebalanceProtocol, ...]:
        return (RebalanceProtocol.EAGER,)

    def assign(self, group: GroupSubscription) -> GroupAssignment:
        layout = Layout(group)
        order = layout.kafka_member_order()
        numbers: list[list[int]] = [[] for _ in layout.member_ids]
        size = len(order)
        if layout.homogeneous:
            for rank, member in enumerate(order):
                numbers[member] = list(range(rank, layout.total, size))
            return layout.assignment(numbers)
        topic_of = layout.topic_of()
        subscribed = [frozenset(topics) for topics in layout.member_topics]
        turn = 0
        for number in range(layout.total):
            topic = topic_of[number]
            # Every topic in the layout has a subscriber, so this finds one.
            while topic not in subscribed[order[turn]]:
                turn = (turn + 1) % size
            numbers[order[turn]].append(number)
            turn = (turn + 1) % size
        return layout.assignment(numbers)
