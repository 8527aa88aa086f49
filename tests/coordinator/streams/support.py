"""A streams coordinator with a log and well-behaved test members (each takes what it is given
at once, dropping the active tasks it loses, and reports its tasks on every heartbeat)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from assignors.types import TaskAssignor
from streamtasks.coordinator import MetadataImage, TopicMetadata
from streamtasks.coordinator.streams import (
    StreamsCoordinatorConfig,
    StreamsGroupCoordinator,
    StreamsRecord,
    StreamsResult,
)
from streamtasks.membership.streams.records import Task, task_ids, tasks_of
from streamtasks.protocol.streams_group import (
    StreamsGroupHeartbeatRequest,
    StreamsGroupHeartbeatResponse,
    Subtopology,
    TaskOffset,
    TopicInfo,
    Topology,
)

GROUP = "app"
R = TypeVar("R")


def image(topics: Mapping[str, int]) -> MetadataImage:
    return MetadataImage(
        tuple(
            TopicMetadata(topic_id=uuid.uuid5(uuid.NAMESPACE_OID, n), name=n, num_partitions=p)
            for n, p in topics.items()
        )
    )


def topology(epoch: int = 1, *, stateful: bool = True) -> Topology:
    """One subtopology reading ``input``, with the changelog ``app-store-changelog`` when stateful."""
    changelogs = (TopicInfo(name="app-store-changelog"),) if stateful else ()
    return Topology(
        epoch=epoch,
        subtopologies=(
            Subtopology(subtopology_id="0", source_topics=("input",), state_changelog_topics=changelogs),
        ),
    )


READY = {"input": 4, "app-store-changelog": 4}


@dataclass
class Member:
    member_id: str
    process_id: str
    instance_id: str | None = None
    epoch: int = 0
    active: frozenset[Task] = frozenset()
    standby: frozenset[Task] = frozenset()
    warmup: frozenset[Task] = frozenset()
    offsets: dict[Task, int] = field(default_factory=dict)
    end_offsets: dict[Task, int] = field(default_factory=dict)
    last: StreamsGroupHeartbeatResponse | None = None

    def request(self, topo: Topology | None = None) -> StreamsGroupHeartbeatRequest:
        joining = self.epoch == 0
        return StreamsGroupHeartbeatRequest(
            group_id=GROUP,
            member_id=self.member_id,
            member_epoch=self.epoch,
            instance_id=self.instance_id if joining or self.epoch == -2 else None,
            rebalance_timeout_ms=30_000 if joining else -1,
            topology=(topo or topology()) if joining else None,
            process_id=self.process_id if joining else None,
            active_tasks=task_ids(self.active),
            standby_tasks=task_ids(self.standby),
            warmup_tasks=task_ids(self.warmup),
            task_offsets=tuple(
                TaskOffset(subtopology_id=s, partition=p, offset=o)
                for (s, p), o in sorted(self.offsets.items())
            )
            or None,
            task_end_offsets=tuple(
                TaskOffset(subtopology_id=s, partition=p, offset=o)
                for (s, p), o in sorted(self.end_offsets.items())
            )
            or None,
        )

    def take(self, response: StreamsGroupHeartbeatResponse) -> None:
        self.last = response
        if response.error.value != 0:
            return
        self.epoch = response.member_epoch
        if response.active_tasks is not None:
            self.active = tasks_of(response.active_tasks)
            self.standby = tasks_of(response.standby_tasks)
            self.warmup = tasks_of(response.warmup_tasks)


class Harness:
    def __init__(
        self,
        config: StreamsCoordinatorConfig | None = None,
        *,
        topics: Mapping[str, int] = READY,
        assignor: TaskAssignor | None = None,
    ) -> None:
        self.coordinator = StreamsGroupCoordinator(config, assignor=assignor, image=image(topics))
        self.log: list[StreamsRecord] = []
        self.now = 0
        self.members: dict[str, Member] = {}

    def apply(self, result: StreamsResult[R]) -> R:
        self.log.extend(result.records)
        return self.coordinator.apply(result)

    def add(self, member_id: str, process_id: str | None = None, instance_id: str | None = None) -> Member:
        m = Member(member_id=member_id, process_id=process_id or f"p-{member_id}", instance_id=instance_id)
        self.members[member_id] = m
        return m

    def beat(self, m: Member, topo: Topology | None = None) -> StreamsGroupHeartbeatResponse:
        response = self.apply(self.coordinator.heartbeat(m.request(topo), self.now))
        m.take(response)
        self.check_exclusive()
        return response

    def round(self, times: int = 1) -> None:
        for _ in range(times):
            for m in list(self.members.values()):
                self.beat(m)

    def advance(self, ms: int) -> None:
        self.now += ms
        for result in self.coordinator.poll(self.now):
            self.log.extend(result.records)

    def check_exclusive(self) -> None:
        """No active task is owned by two members, in the members' own view."""
        seen: dict[Task, str] = {}
        for m in self.members.values():
            for t in m.active:
                assert t not in seen, f"task {t} active on {seen[t]} and {m.member_id}"
                seen[t] = m.member_id

    def all_active(self) -> frozenset[Task]:
        return frozenset(t for m in self.members.values() for t in m.active)
