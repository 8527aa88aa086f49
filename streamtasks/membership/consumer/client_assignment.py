"""The client-side assignor step (seed KIP-848): from a PrepareAssignment answer to the members
of the InstallAssignment request. Pure: no state, no IO.

Every member's subscription is rebuilt from the answer (topic ids to names, its *target* as the
partitions it owns, its member epoch as the generation, its assignor metadata as the user
data) and the assignor's plain ``assign`` runs on it: under KIP-848 the assignor computes the
target, and the coordinator does the hand-over (revoke before assign), so there is no
``cooperative.adjust`` step. An assignor that withholds moving partitions itself (KIP-429
style, like the streams assignor) would leave them unassigned, which the coordinator refuses:
so an assignor that can compute the target directly says so by having ``assign_target``
(:class:`TargetAssignor`; the streams assignor does), which is then called instead. Any other
assignor whose result leaves partitions out is run once more without owned partitions.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Protocol, runtime_checkable

from assignors.partition.types import GroupAssignment, GroupSubscription, PartitionAssignor, Subscription
from streamtasks.errors import StreamTasksError
from streamtasks.protocol.assignment_rpc import ConsumerGroupPrepareAssignmentResponse, InstalledMember
from streamtasks.protocol.consumer_group import TopicIdPartitions
from topology.ids import TopicPartition

__all__ = ["AssignmentProblem", "TargetAssignor", "compute_assignment", "group_subscription"]


@runtime_checkable
class TargetAssignor(Protocol):
    """A partition assignor that can also compute a KIP-848 target: the whole assignment,
    nothing withheld for a KIP-429 hand-over (the coordinator does the hand-over)."""

    def assign_target(self, group: GroupSubscription) -> GroupAssignment: ...


class AssignmentProblem(StreamTasksError):
    """The assignor's result cannot be installed (a partition unassigned or assigned twice, a
    member the group does not have), or the assignor raised."""


def group_subscription(
    response: ConsumerGroupPrepareAssignmentResponse, *, with_owned: bool = True
) -> GroupSubscription:
    """The group as a partition assignor sees it (module docstring)."""
    names = {t.topic_id: t.topic_name for t in response.topics}
    counts = {t.topic_name: t.num_partitions for t in response.topics}
    members: dict[str, Subscription] = {}
    for m in response.members:
        topics = tuple(sorted(names[t] for t in m.subscribed_topic_ids if t in names))
        owned: tuple[TopicPartition, ...] = ()
        if with_owned:
            owned = tuple(
                sorted(
                    TopicPartition(names[item.topic_id], p)
                    for item in m.topic_partitions
                    if item.topic_id in names
                    for p in item.partitions
                    if 0 <= p < counts[names[item.topic_id]]
                )
            )
        members[m.member_id] = Subscription(
            topics=topics,
            owned_partitions=owned,
            generation=max(-1, m.member_epoch),
            rack=m.rack_id,
            group_instance_id=m.instance_id,
            user_data=m.assignor.metadata_bytes,
        )
    return GroupSubscription(members=members, partitions_per_topic=counts)


def _gaps(result: GroupAssignment, group: GroupSubscription) -> list[str]:
    """Why ``result`` is not a full assignment of ``group`` (empty: it is)."""
    problems: list[str] = []
    owner: dict[TopicPartition, str] = {}
    for member, partitions in result.members.items():
        sub = group.members.get(member)
        if sub is None:
            problems.append(f"unknown member {member!r}")
            continue
        for tp in partitions:
            if tp in owner:
                problems.append(f"{tp} assigned to {owner[tp]!r} and {member!r}")
            elif tp.topic not in sub.topics:
                problems.append(f"{tp} assigned to {member!r}, which does not subscribe to {tp.topic!r}")
            elif not 0 <= tp.partition < group.partitions_per_topic.get(tp.topic, 0):
                problems.append(f"{tp} does not exist")
            owner[tp] = member
    subscribed = {t for s in group.members.values() for t in s.topics}
    missing = [
        TopicPartition(t, p)
        for t in sorted(subscribed)
        for p in range(group.partitions_per_topic.get(t, 0))
        if TopicPartition(t, p) not in owner
    ]
    if missing:
        shown = ", ".join(str(tp) for tp in missing[:8])
        problems.append(f"{len(missing)} partition(s) unassigned: {shown}")
    return problems


def _run(assignor: PartitionAssignor, group: GroupSubscription) -> GroupAssignment:
    try:
        if isinstance(assignor, TargetAssignor):
            return assignor.assign_target(group)
        return assignor.assign(group)
    except Exception as exc:  # a plug-in's failure is reported, never raised into the driver
        raise AssignmentProblem(f"assignor {assignor.name!r} failed: {type(exc).__name__}: {exc}") from exc


def compute_assignment(
    response: ConsumerGroupPrepareAssignmentResponse, assignor: PartitionAssignor
) -> tuple[InstalledMember, ...]:
    """The InstallAssignment members for ``response`` (every member once, in id order), each
    with the assignor's user data for it as metadata bytes, written at the assignor's
    version clamped into that member's range. Raises :class:`AssignmentProblem`."""
    group = group_subscription(response)
    result = _run(assignor, group)
    if _gaps(result, group):  # withheld moving partitions: run again without owned partitions
        group = group_subscription(response, with_owned=False)
        result = _run(assignor, group)
        problems = _gaps(result, group)
        if problems:
            raise AssignmentProblem(f"assignor {assignor.name!r}: " + "; ".join(problems[:4]))
    ids: Mapping[str, uuid.UUID] = {t.topic_name: t.topic_id for t in response.topics}
    installed = []
    for m in sorted(response.members, key=lambda m: m.member_id):
        by_topic: dict[uuid.UUID, list[int]] = {}
        for tp in result.members.get(m.member_id, ()):
            by_topic.setdefault(ids[tp.topic], []).append(tp.partition)
        version = min(max(assignor.version, m.assignor.minimum_version), m.assignor.maximum_version)
        installed.append(
            InstalledMember(
                member_id=m.member_id,
                topic_partitions=tuple(
                    TopicIdPartitions(topic_id=t, partitions=tuple(sorted(p)))
                    for t, p in sorted(by_topic.items())
                ),
                metadata_version=version,
                metadata_bytes=result.user_data.get(m.member_id, b""),
            )
        )
    return tuple(installed)
