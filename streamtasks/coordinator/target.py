"""Target assignments, Kafka's ``TargetAssignmentBuilder``: run a server-side assignor over the
members and their current targets, validate what a client-side assignor installs against the
epoch it was prepared for, and write records only for the members whose target changed."""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from assignors.partition.types import GroupSubscription, PartitionAssignor, Subscription
from streamtasks.coordinator.records import (
    PreparedAssignmentRecord,
    Record,
    TargetAssignmentMemberRecord,
    TargetAssignmentMetadataRecord,
)
from streamtasks.coordinator.types import TopicMetadata, TopicPartitionSet
from streamtasks.errors import RemoteProtocolError
from streamtasks.protocol.assignment_rpc import InstalledMember
from topology.ids import TopicPartition

__all__ = ["InvalidAssignment", "run_server_assignor", "target_records", "validate_installed"]


class InvalidAssignment(RemoteProtocolError):
    """An installed assignment breaks a rule; the message says which (INVALID_ASSIGNMENT): the
    member that computed it broke the protocol."""


def run_server_assignor(
    assignor: PartitionAssignor,
    *,
    members: Mapping[str, tuple[frozenset[str], str | None, str | None]],
    targets: Mapping[str, TopicPartitionSet],
    topics: Mapping[str, TopicMetadata],
    epoch: int,
) -> dict[str, TopicPartitionSet]:
    """The new target per member. ``members``: member id -> (subscribed topic names, rack,
    instance id); ``targets``: the current target per member (the assignor's "owned"
    partitions, for stickiness); ``topics``: the subscribed topics that exist, by name."""
    names_by_id = {t.topic_id: t.name for t in topics.values()}
    subscriptions = {}
    for member_id, (subscribed, rack, instance_id) in members.items():
        current = targets.get(member_id)
        owned: tuple[TopicPartition, ...] = ()
        if current is not None:
            # topic by topic: one id lookup per topic, not one per partition (10,000 members)
            pairs: list[TopicPartition] = []
            for topic_id, partitions in current.items():
                name = names_by_id.get(topic_id)
                if name is not None:
                    pairs += [TopicPartition(name, p) for p in partitions]
            owned = tuple(pairs)
        subscriptions[member_id] = Subscription(
            topics=tuple(sorted(n for n in subscribed if n in topics)),
            owned_partitions=owned,
            generation=epoch,
            rack=rack,
            group_instance_id=instance_id,
        )
    group = GroupSubscription(
        members=subscriptions, partitions_per_topic={n: t.num_partitions for n, t in topics.items()}
    )
    result = assignor.assign(group)
    ids = {name: t.topic_id for name, t in topics.items()}
    out: dict[str, TopicPartitionSet] = {}
    for member_id in members:
        by_topic: dict[uuid.UUID, list[int]] = {}
        for tp in result.members.get(member_id, ()):
            topic_id = ids[tp.topic]
            listed = by_topic.get(topic_id)
            if listed is None:
                by_topic[topic_id] = [tp.partition]
            else:
                listed.append(tp.partition)
        out[member_id] = TopicPartitionSet(by_topic)
    return out


def target_records(
    group_id: str,
    old: Mapping[str, TargetAssignmentMemberRecord],
    new: Mapping[str, TargetAssignmentMemberRecord],
    *,
    epoch: int,
    assignor_name: str,
) -> list[Record]:
    """Records for the members whose target changed, then the target's metadata (the epoch)."""
    records: list[Record] = [
        record for member_id, record in sorted(new.items()) if old.get(member_id) != record
    ]
    records.append(
        TargetAssignmentMetadataRecord(group_id=group_id, assignment_epoch=epoch, assignor_name=assignor_name)
    )
    return records


def validate_installed(
    prepared: PreparedAssignmentRecord,
    installed: tuple[InstalledMember, ...],
) -> dict[str, tuple[TopicPartitionSet, InstalledMember]]:
    """Check an installed assignment against what PrepareAssignment showed for its epoch (the
    seed's rules: every member id is one of that epoch's members, every partition of the
    subscribed topics is assigned, and only once; and streamtasks': only to a member that
    subscribes to its topic, with metadata in a version that member reads). Raises
    :class:`InvalidAssignment`; returns each member's partitions."""
    specs = {m.member_id: m for m in prepared.members}
    sizes = {t.topic_id: t.num_partitions for t in prepared.topics}
    seen: dict[tuple[uuid.UUID, int], str] = {}
    out: dict[str, tuple[TopicPartitionSet, InstalledMember]] = {}
    for member in installed:
        spec = specs.get(member.member_id)
        if spec is None:
            raise InvalidAssignment(
                f"member {member.member_id!r} was not in the group at epoch {prepared.group_epoch}"
            )
        if member.member_id in out:
            raise InvalidAssignment(f"member {member.member_id!r} is listed twice")
        if not spec.minimum_version <= member.metadata_version <= spec.maximum_version:
            raise InvalidAssignment(
                f"member {member.member_id!r} reads metadata versions {spec.minimum_version}-"
                f"{spec.maximum_version}, not {member.metadata_version}"
            )
        for item in member.topic_partitions:
            size = sizes.get(item.topic_id)
            if size is None:
                raise InvalidAssignment(
                    f"topic {item.topic_id} is not a subscribed topic of epoch {prepared.group_epoch}"
                )
            if item.topic_id not in spec.subscribed_topic_ids:
                raise InvalidAssignment(
                    f"member {member.member_id!r} does not subscribe to topic {item.topic_id}"
                )
            for partition in item.partitions:
                if not 0 <= partition < size:
                    raise InvalidAssignment(f"topic {item.topic_id} has no partition {partition}")
                if (item.topic_id, partition) in seen:
                    raise InvalidAssignment(
                        f"partition {item.topic_id}-{partition} is assigned more than once"
                    )
                seen[item.topic_id, partition] = member.member_id
        out[member.member_id] = (TopicPartitionSet.from_wire(member.topic_partitions), member)
    missing = sum(sizes.values()) - len(seen)
    if missing:
        raise InvalidAssignment(f"{missing} partition(s) of the subscribed topics are not assigned")
    return out
