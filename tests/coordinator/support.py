"""A coordinator with a log and well-behaved test members (they revoke at once, own what they
are given, and send their epoch and owned partitions on every heartbeat)."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from streamtasks.coordinator import (
    CoordinatorConfig,
    GroupCoordinator,
    MetadataImage,
    Record,
    Result,
    TopicMetadata,
    TopicPartitionSet,
)
from streamtasks.protocol.assignment_rpc import (
    ConsumerGroupInstallAssignmentRequest,
    ConsumerGroupInstallAssignmentResponse,
    ConsumerGroupPrepareAssignmentRequest,
    ConsumerGroupPrepareAssignmentResponse,
    InstalledMember,
)
from streamtasks.protocol.consumer_group import (
    ClientAssignor,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    TopicIdPartitions,
)

R = TypeVar("R")
GROUP = "g"


def topic_id(name: str) -> uuid.UUID:
    return uuid.uuid5(uuid.NAMESPACE_OID, name)


def image(topics: Mapping[str, int]) -> MetadataImage:
    return MetadataImage(
        tuple(TopicMetadata(topic_id=topic_id(n), name=n, num_partitions=p) for n, p in topics.items())
    )


def tps(**topics: Iterable[int]) -> TopicPartitionSet:
    """``tps(foo=[0, 1])``"""
    return TopicPartitionSet({topic_id(n): p for n, p in topics.items()})


def wire(partitions: TopicPartitionSet) -> tuple[TopicIdPartitions, ...]:
    return partitions.to_wire()


@dataclass
class Member:
    member_id: str
    epoch: int = 0
    owned: TopicPartitionSet = field(default_factory=TopicPartitionSet)
    should_compute: bool = False
    #: What the member sent when it joined: sent again while its epoch is 0.
    joined_with: dict[str, Any] = field(default_factory=dict)


class Harness:
    def __init__(
        self,
        topics: Mapping[str, int] | None = None,
        *,
        config: CoordinatorConfig | None = None,
        assignors: Mapping[str, Any] | None = None,
    ) -> None:
        self.coordinator = GroupCoordinator(config, assignors=assignors, image=image(topics or {"foo": 3}))
        self.log: list[Record] = []
        self.now = 0
        self.members: dict[str, Member] = {}

    def apply(self, result: Result[R]) -> R:
        self.log += result.records
        return self.coordinator.apply(result)

    @property
    def group(self) -> Any:
        return self.coordinator.group(GROUP)

    def join(
        self,
        member_id: str,
        topics: tuple[str, ...] = ("foo",),
        *,
        instance_id: str | None = None,
        server_assignor: str | None = None,
        client_assignors: tuple[ClientAssignor, ...] | None = None,
        rebalance_timeout_ms: int = 30_000,
        rack_id: str | None = None,
    ) -> ConsumerGroupHeartbeatResponse:
        member = self.members.setdefault(member_id, Member(member_id))
        member.epoch, member.owned = 0, TopicPartitionSet()
        member.joined_with = {
            "instance_id": instance_id,
            "rack_id": rack_id,
            "rebalance_timeout_ms": rebalance_timeout_ms,
            "subscribed_topic_names": topics,
            "server_assignor": server_assignor,
            "client_assignors": client_assignors,
        }
        request = ConsumerGroupHeartbeatRequest(
            group_id=GROUP, member_id=member_id, member_epoch=0, topic_partitions=(), **member.joined_with
        )
        return self.send(member, request)

    def heartbeat(self, member_id: str, **changes: Any) -> ConsumerGroupHeartbeatResponse:
        """A heartbeat with the member's epoch and owned partitions, plus ``changes``; at epoch 0
        (still waiting for a first assignment) it repeats what it joined with, as a join must."""
        member = self.members[member_id]
        fields: dict[str, Any] = {
            "group_id": GROUP,
            "member_id": member_id,
            "member_epoch": member.epoch,
            "topic_partitions": wire(member.owned),
        }
        if member.epoch == 0 and changes.get("member_epoch", 0) == 0:
            fields.update(member.joined_with)
        fields.update(changes)
        return self.send(member, ConsumerGroupHeartbeatRequest(**fields))

    def send(self, member: Member, request: ConsumerGroupHeartbeatRequest) -> ConsumerGroupHeartbeatResponse:
        response = self.apply(self.coordinator.heartbeat(request, self.now))
        if response.error == 0:
            member.epoch = response.member_epoch
            if response.assignment is not None:
                member.owned = TopicPartitionSet.from_wire(response.assignment.topic_partitions)
            member.should_compute = response.should_compute_assignment
        return response

    def settle(self, rounds: int = 6) -> None:
        """Every member heartbeats, a few rounds: the group converges."""
        for _ in range(rounds):
            for member_id in sorted(self.members):
                if self.group is not None and self.group.member(member_id) is not None:
                    self.heartbeat(member_id)

    def prepare(self, member_id: str, epoch: int | None = None) -> ConsumerGroupPrepareAssignmentResponse:
        member = self.members[member_id]
        request = ConsumerGroupPrepareAssignmentRequest(
            group_id=GROUP, member_id=member_id, member_epoch=member.epoch if epoch is None else epoch
        )
        return self.apply(self.coordinator.prepare_assignment(request, self.now))

    def install(
        self,
        member_id: str,
        group_epoch: int,
        assignment: Mapping[str, TopicPartitionSet],
        *,
        versions: Mapping[str, int] | None = None,
        metadata: Mapping[str, bytes] | None = None,
        error: int = 0,
    ) -> ConsumerGroupInstallAssignmentResponse:
        request = ConsumerGroupInstallAssignmentRequest(
            group_id=GROUP,
            member_id=member_id,
            member_epoch=self.members[member_id].epoch,
            group_epoch=group_epoch,
            error=error,
            members=tuple(
                InstalledMember(
                    member_id=m,
                    topic_partitions=wire(p),
                    metadata_version=(versions or {}).get(m, 0),
                    metadata_bytes=(metadata or {}).get(m, b""),
                )
                for m, p in assignment.items()
            ),
        )
        return self.apply(self.coordinator.install_assignment(request, self.now))

    def advance(self, ms: int) -> list[Result[None]]:
        self.now += ms
        results = self.coordinator.poll(self.now)
        for result in results:
            self.log += result.records
        return results

    def current(self, member_id: str) -> Any:
        return self.group.current(member_id)

    def target(self, member_id: str) -> TopicPartitionSet:
        record = self.group.target(member_id)
        return TopicPartitionSet() if record is None else record.partitions

    def replayed(self) -> GroupCoordinator:
        """A fresh coordinator loaded from the log."""
        fresh = GroupCoordinator(
            self.coordinator.config, assignors=self.coordinator.assignors, image=self.coordinator.image
        )
        for record in self.log:
            fresh.replay(record)
        return fresh


def assert_exclusive(coordinator: GroupCoordinator) -> None:
    """No partition is owned (assigned or pending revocation) by two members."""
    for group in coordinator.groups.values():
        seen: dict[tuple[uuid.UUID, int], str] = {}
        for member_id, current in group.current_assignments.items():
            for pair in (*current.assigned.pairs(), *current.pending_revocation.pairs()):
                assert pair not in seen or seen[pair] == member_id, (
                    f"{pair} owned by {seen[pair]} and {member_id}"
                )
                seen[pair] = member_id
