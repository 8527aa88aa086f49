"""Test helpers: a wordcount topology, real encoded subscriptions, the real leader step.

Nothing here replaces the layer under test: subscriptions are encoded with the protocol
codecs, the assignment is computed by :func:`streamtasks.membership.classic.leader.lead`
running :class:`~streamtasks.streams.StreamsPartitionAssignor`, and the answers are decoded
with the protocol codecs again.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from assignors.task.high_availability import HighAvailabilityTaskAssignor
from assignors.types import AssignmentConfigs, TaskAssignor
from streamtasks.membership.classic.leader import lead
from streamtasks.membership.classic.leader_result import LeaderResult
from streamtasks.protocol.classic_group import JoinGroupMember
from streamtasks.protocol.consumer_protocol import (
    ConsumerProtocolSubscription,
    decode_assignment,
    encode_subscription,
)
from streamtasks.protocol.userdata import AssignmentInfo, decode_assignment_info
from streamtasks.streams import StreamsPartitionAssignor
from tests.ids import pid, task
from topology import TopicPartition, Topology, TopologyBuilder

__all__ = [
    "CHANGELOG",
    "NOW",
    "REPARTITION",
    "Answer",
    "assignor",
    "changelog_ends",
    "counts",
    "member",
    "pid",
    "run",
    "source_partitions",
    "task",
    "wordcount",
]

NOW = 1_000_000
REPARTITION = "wc-words-repartition"
CHANGELOG = "wc-counts-changelog"


def wordcount() -> Topology:
    """Two subtopologies: 0 reads ``text`` (stateless) and writes ``words``; 1 reads the
    repartition topic and counts into the ``counts`` store (changelogged)."""
    builder = TopologyBuilder("wc")
    builder.stream("text").repartition("words").store("counts")
    return builder.build()


def counts(n: int = 4) -> dict[str, int]:
    return {"text": n, REPARTITION: n}


def changelog_ends(end: int = 1_000, n: int = 4) -> dict[TopicPartition, int]:
    return {TopicPartition(CHANGELOG, p): end for p in range(n)}


def source_partitions(*tasks: str) -> tuple[TopicPartition, ...]:
    """The source partitions of the wordcount tasks named ``"0_1"``..."""
    out = []
    for name in tasks:
        t = task(name)
        out.append(TopicPartition("text" if t.subtopology == 0 else REPARTITION, t.partition))
    return tuple(sorted(out))


def assignor(
    *,
    topology: Topology | None = None,
    task_assignor: TaskAssignor | None = None,
    standbys: int = 0,
    acceptable_recovery_lag: int = 100,
    ends: Mapping[TopicPartition, int] | None = None,
) -> StreamsPartitionAssignor:
    offsets = changelog_ends() if ends is None else dict(ends)
    return StreamsPartitionAssignor(
        topology or wordcount(),
        task_assignor=task_assignor or HighAvailabilityTaskAssignor(),
        configs=AssignmentConfigs(
            num_standby_replicas=standbys, acceptable_recovery_lag=acceptable_recovery_lag
        ),
        end_offsets=lambda: offsets,
        now_ms=lambda: NOW,
    )


def member(
    member_id: str,
    process: uuid.UUID,
    *,
    of: StreamsPartitionAssignor,
    sums: Mapping[str, int] | None = None,
    owned: Iterable[TopicPartition] = (),
    generation: int = -1,
    endpoint: str | None = None,
    version: int | None = None,
    user_data: bytes | None = None,
) -> JoinGroupMember:
    """A JoinGroup member with a real consumer-protocol subscription and streamtasks user data."""
    if user_data is None:
        user_data = of.subscription_user_data(
            process_id=process,
            task_offset_sums={task(t): s for t, s in (sums or {}).items()},
            endpoint=endpoint,
            version=version,
        )
    metadata = encode_subscription(
        ConsumerProtocolSubscription(
            topics=of.topology.subscribed_topics(),
            user_data=user_data,
            owned_partitions=tuple(sorted(owned)),
            generation_id=generation,
        )
    )
    return JoinGroupMember(member_id=member_id, group_instance_id=None, metadata=metadata)


@dataclass(frozen=True, slots=True)
class Answer:
    """What every member received: partitions and the decoded AssignmentInfo."""

    result: LeaderResult
    partitions: dict[str, tuple[TopicPartition, ...]]
    infos: dict[str, AssignmentInfo]
    raw: dict[str, bytes]

    def active(self, member_id: str) -> set[str]:
        return {str(t) for t in self.infos[member_id].active_tasks}

    def standby(self, member_id: str) -> set[str]:
        return {str(t) for t in self.infos[member_id].standby_tasks}

    def warmup(self, member_id: str) -> set[str]:
        return {str(t) for t in self.infos[member_id].warmup_tasks}


def run(
    members: Iterable[JoinGroupMember],
    of: StreamsPartitionAssignor,
    partitions_per_topic: Mapping[str, int] | None = None,
) -> Answer:
    """The leader step over ``members``; every member's answer decoded."""
    result = lead(
        members,
        assignor=of,
        partitions_per_topic=counts() if partitions_per_topic is None else partitions_per_topic,
    )
    partitions: dict[str, tuple[TopicPartition, ...]] = {}
    infos: dict[str, AssignmentInfo] = {}
    raw: dict[str, bytes] = {}
    for sync in result.assignments:
        decoded = decode_assignment(sync.assignment)
        partitions[sync.member_id] = decoded.assigned_partitions
        raw[sync.member_id] = sync.assignment
        if decoded.user_data is not None:
            infos[sync.member_id] = decode_assignment_info(decoded.user_data)
    return Answer(result=result, partitions=partitions, infos=infos, raw=raw)
