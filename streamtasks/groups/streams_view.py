"""What ``streamtasks groups describe`` shows of a KIP-1071 streams group (pure: no IO), from
one StreamsGroupDescribe group: the topology the broker configured (subtopologies with their
source, repartition and changelog topics), the group, assignment and topology epochs, and per
member its process id, endpoint, current against target tasks (active, standby, warm-up) and the
task offsets it last reported, with the lag of each (end offset minus offset); and which
member's active task reads each input partition (``--offsets``' OWNER and TASK columns)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from streamtasks.groups.view import joined, member_identity, table
from streamtasks.protocol.streams_group import (
    DescribedStreamsGroup,
    DescribedStreamsMember,
    TaskAssignment,
    TaskIds,
    TaskOffset,
)
from topology.ids import TopicPartition

__all__ = [
    "StreamsGroupView",
    "StreamsMemberView",
    "StreamsSubtopologyView",
    "StreamsTasks",
    "render_streams",
    "streams_group_view",
    "streams_owners",
]


def _tasks(ids: Iterable[TaskIds]) -> tuple[str, ...]:
    found = {(t.subtopology_id, p) for t in ids for p in t.partitions}
    return tuple(f"{s}_{p}" for s, p in sorted(found, key=lambda sp: (_key(sp[0]), sp[1])))


def _key(subtopology: str) -> tuple[int, str]:
    """Numeric subtopology ids in numeric order, others after them."""
    return (int(subtopology), "") if subtopology.isdigit() else (1 << 31, subtopology)


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsTasks:
    active: tuple[str, ...]
    standby: tuple[str, ...]
    warmup: tuple[str, ...]

    @classmethod
    def of(cls, assignment: TaskAssignment) -> StreamsTasks:
        return cls(
            active=_tasks(assignment.active_tasks),
            standby=_tasks(assignment.standby_tasks),
            warmup=_tasks(assignment.warmup_tasks),
        )

    def roles(self) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
        """(active, standby, warm-up)."""
        return self.active, self.standby, self.warmup

    def to_json(self) -> dict[str, list[str]]:
        return {"active": list(self.active), "standby": list(self.standby), "warmup": list(self.warmup)}


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsSubtopologyView:
    subtopology_id: str
    source_topics: tuple[str, ...]
    repartition_sink_topics: tuple[str, ...]
    changelog_topics: tuple[str, ...]
    repartition_source_topics: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "subtopology_id": self.subtopology_id,
            "source_topics": list(self.source_topics),
            "repartition_sink_topics": list(self.repartition_sink_topics),
            "changelog_topics": list(self.changelog_topics),
            "repartition_source_topics": list(self.repartition_source_topics),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsMemberView:
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    rack_id: str | None
    process_id: str
    endpoint: str | None
    member_epoch: int
    topology_epoch: int
    current: StreamsTasks
    target: StreamsTasks
    #: Per task: the offset the member last reported, and the lag (end offset - offset).
    task_offsets: tuple[tuple[str, int], ...]
    task_lags: tuple[tuple[str, int], ...]

    def to_json(self) -> dict[str, Any]:
        return {
            **member_identity(self),
            "rack_id": self.rack_id,
            "process_id": self.process_id,
            "endpoint": self.endpoint,
            "member_epoch": self.member_epoch,
            "topology_epoch": self.topology_epoch,
            "current_assignment": self.current.to_json(),
            "target_assignment": self.target.to_json(),
            "task_offsets": dict(self.task_offsets),
            "task_lags": dict(self.task_lags),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsGroupView:
    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    #: -1 while the group has no configured topology.
    topology_epoch: int
    assignor: str | None
    #: ``None`` while the broker has not configured the topology (missing source topics).
    subtopologies: tuple[StreamsSubtopologyView, ...] | None
    members: tuple[StreamsMemberView, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "group_id": self.group_id,
            "type": "streams",
            "state": self.state,
            "group_epoch": self.group_epoch,
            "assignment_epoch": self.assignment_epoch,
            "topology_epoch": self.topology_epoch,
            "assignor": self.assignor,
            "subtopologies": None
            if self.subtopologies is None
            else [s.to_json() for s in self.subtopologies],
            "members": [m.to_json() for m in self.members],
        }


def _offsets(offsets: Iterable[TaskOffset]) -> dict[str, int]:
    return {f"{o.subtopology_id}_{o.partition}": o.offset for o in offsets}


def _member(m: DescribedStreamsMember) -> StreamsMemberView:
    offsets = _offsets(m.task_offsets)
    ends = _offsets(m.task_end_offsets)
    lags = {t: max(0, ends[t] - o) for t, o in offsets.items() if t in ends}
    endpoint = None if m.user_endpoint is None else f"{m.user_endpoint.host}:{m.user_endpoint.port}"
    return StreamsMemberView(
        member_id=m.member_id,
        instance_id=m.instance_id,
        client_id=m.client_id,
        client_host=m.client_host,
        rack_id=m.rack_id,
        process_id=m.process_id,
        endpoint=endpoint,
        member_epoch=m.member_epoch,
        topology_epoch=m.topology_epoch,
        current=StreamsTasks.of(m.assignment),
        target=StreamsTasks.of(m.target_assignment),
        task_offsets=tuple(sorted(offsets.items())),
        task_lags=tuple(sorted(lags.items())),
    )


def streams_group_view(group: DescribedStreamsGroup) -> StreamsGroupView:
    """The view of one StreamsGroupDescribe group (its error already checked by the caller)."""
    topology = group.topology
    subtopologies = None
    if topology is not None and topology.subtopologies is not None:
        subtopologies = tuple(
            StreamsSubtopologyView(
                subtopology_id=s.subtopology_id,
                source_topics=tuple(s.source_topics),
                repartition_sink_topics=tuple(s.repartition_sink_topics),
                changelog_topics=tuple(t.name for t in s.state_changelog_topics),
                repartition_source_topics=tuple(t.name for t in s.repartition_source_topics),
            )
            for s in sorted(topology.subtopologies, key=lambda s: _key(s.subtopology_id))
        )
    return StreamsGroupView(
        group_id=group.group_id,
        state=group.group_state,
        group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch,
        topology_epoch=-1 if topology is None else topology.epoch,
        assignor=group.assignor_name,
        subtopologies=subtopologies,
        members=tuple(sorted((_member(m) for m in group.members), key=lambda m: (m.client_id, m.member_id))),
    )


def streams_owners(view: StreamsGroupView) -> tuple[dict[TopicPartition, str], dict[TopicPartition, str]]:
    """Each input partition of a member's current active task: its owner (client id) and task.

    Task ``<subtopology>_<p>`` reads partition ``p`` of each of its subtopology's source and
    repartition source topics (the topology the broker configured; none before it has one)."""
    inputs = {
        s.subtopology_id: (*s.source_topics, *s.repartition_source_topics) for s in view.subtopologies or ()
    }
    owners: dict[TopicPartition, str] = {}
    tasks: dict[TopicPartition, str] = {}
    for m in view.members:
        for task in m.current.active:
            subtopology, _, partition = task.rpartition("_")
            for topic in inputs.get(subtopology, ()):
                tp = TopicPartition(topic, int(partition))
                owners[tp] = m.client_id
                tasks[tp] = task
    return owners, tasks


def render_streams(view: StreamsGroupView, *, members: bool = True) -> str:
    lines = [
        f"group {view.group_id}: streams (KIP-1071), state {view.state}, group epoch {view.group_epoch}, "
        f"assignment epoch {view.assignment_epoch}, topology epoch {view.topology_epoch}, "
        f"assignor {view.assignor or '-'}, {len(view.members)} member(s)"
    ]
    if view.subtopologies is None:
        lines.append("topology: not configured yet (missing or badly partitioned source topics)")
    else:
        rows = [
            (s.subtopology_id, joined(s.source_topics), joined(s.repartition_source_topics),
             joined(s.repartition_sink_topics), joined(s.changelog_topics))
            for s in view.subtopologies
        ]  # fmt: skip
        lines.append(
            table(("SUBTOPOLOGY", "SOURCES", "REPARTITION-SOURCES", "REPARTITION-SINKS", "CHANGELOGS"), rows)
        )
    if members and view.members:
        member_rows: list[tuple[str, ...]] = []
        for m in view.members:
            c, t = m.current, m.target
            member_rows.append(
                (m.member_id, m.client_id, m.process_id, m.endpoint or "-", str(m.member_epoch),
                 joined(c.active), joined(c.standby), joined(c.warmup),
                 joined(t.active), joined(t.standby), joined(t.warmup),
                 joined(f"{task}={lag}" for task, lag in m.task_lags))
            )  # fmt: skip
        header = ("MEMBER", "CLIENT-ID", "PROCESS", "ENDPOINT", "EPOCH", "ACTIVE", "STANDBY", "WARMUP",
                  "TARGET-ACTIVE", "TARGET-STANDBY", "TARGET-WARMUP", "TASK-LAGS")  # fmt: skip
        lines.append(table(header, member_rows))
    return "\n".join(lines)
