"""Subscriptions against topic metadata: finding and dropping topics without a partition count.

The partition assignors treat a subscribed topic that has no entry in
``GroupSubscription.partitions_per_topic`` as bad input and raise
:class:`~streamtasks.errors.AssignorInputError` naming the topic and its subscribers. That is
what KIP-848's server-side assignors do, and it keeps a leader bug or stale metadata from
passing silently. Kafka's classic consumer leader instead skips such topics (and later notices
that its metadata was stale). A leader that wants that behaviour calls
:func:`prune_unknown_topics` first: it gets the group without those topics *and* their names,
so it can refresh metadata and ask for another rebalance.
"""

from __future__ import annotations

from dataclasses import replace

from assignors.partition._layout import topic_names
from assignors.partition.types import GroupSubscription, MemberId

__all__ = ["prune_unknown_topics", "unknown_topics"]


def unknown_topics(group: GroupSubscription) -> dict[str, tuple[MemberId, ...]]:
    """Subscribed topics that have no partition count, each with its subscribers (sorted)."""
    counts = group.partitions_per_topic
    found: dict[str, list[MemberId]] = {}
    # Members decoded from equal bytes share one topics object: look at each object once.
    unknown_in: dict[int, list[str]] = {}
    for member in sorted(group.members):
        topics = group.members[member].topics
        unknown = unknown_in.get(id(topics))
        if unknown is None:
            unknown = [topic for topic in topic_names(member, topics) if topic not in counts]
            unknown_in[id(topics)] = unknown
        for topic in unknown:
            found.setdefault(topic, []).append(member)
    return {topic: tuple(found[topic]) for topic in sorted(found)}


def prune_unknown_topics(group: GroupSubscription) -> tuple[GroupSubscription, tuple[str, ...]]:
    """The group with every topic that lacks a partition count removed from the subscriptions,
    and the sorted names of the removed topics. Owned partitions are left as they are."""
    unknown = unknown_topics(group)
    if not unknown:
        return group, ()
    members = {}
    for member, subscription in group.members.items():
        kept = tuple(t for t in topic_names(member, subscription.topics) if t not in unknown)
        members[member] = replace(subscription, topics=kept) if kept != subscription.topics else subscription
    pruned = GroupSubscription(
        members=members,
        partitions_per_topic=group.partitions_per_topic,
        partition_racks=group.partition_racks,
    )
    return pruned, tuple(unknown)
