"""What ``streamtasks groups`` shows, decoded from the group RPCs' answers (pure: no IO).

A classic group's members carry consumer-protocol bytes (subscription and assignment); under
streamtasks' task assignor (protocol ``"streamtasks"``) their userdata is streamtasks'
``SubscriptionInfo`` / ``AssignmentInfo``, from which each member's active, standby and
warm-up tasks come. A KIP-848 consumer group's members carry their current and target
assignments. Bad bytes in a member's metadata are a :class:`~streamtasks.errors.DecodeError`
naming the group, the member and the field.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from streamtasks.errors import DecodeError, StreamTasksError
from streamtasks.protocol import classic_group as cg
from streamtasks.protocol import consumer_group as kip848
from streamtasks.protocol.consumer_protocol import (
    CONSUMER_PROTOCOL_TYPE,
    decode_assignment,
    decode_subscription,
)
from streamtasks.protocol.kstreams_userdata import (
    KAFKA_STREAMS_PROTOCOL,
    decode_kstreams_assignment,
    decode_kstreams_subscription,
)
from streamtasks.protocol.userdata import decode_assignment_info, decode_subscription_info
from streamtasks.runtime.group_admin import GroupListing
from topology.ids import TaskId, TopicPartition

__all__ = [
    "STREAMTASKS_PROTOCOL",
    "ClassicGroupView",
    "ClassicMemberView",
    "ConsumerGroupView",
    "ConsumerMemberView",
    "MemberTasks",
    "classic_group_view",
    "consumer_group_view",
    "render_classic",
    "render_consumer",
    "joined",
    "member_identity",
    "render_listing",
    "table",
]

#: The classic protocol name of streamtasks' task assignor (``StreamsPartitionAssignor.name``).
STREAMTASKS_PROTOCOL = "streamtasks"


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberTasks:
    """A member's tasks as streamtasks' leader assigned them (its ``AssignmentInfo``)."""

    active: tuple[TaskId, ...]
    standby: tuple[TaskId, ...]
    warmup: tuple[TaskId, ...]

    def to_json(self) -> dict[str, list[str]]:
        return {
            "active": [str(t) for t in self.active],
            "standby": [str(t) for t in self.standby],
            "warmup": [str(t) for t in self.warmup],
        }


def member_identity(member: Any) -> dict[str, Any]:
    """The JSON keys every group type's member has: member id, instance id, client id and host."""
    return {
        "member_id": member.member_id,
        "instance_id": member.instance_id,
        "client_id": member.client_id,
        "client_host": member.client_host,
    }


@dataclass(frozen=True, slots=True, kw_only=True)
class ClassicMemberView:
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    partitions: tuple[TopicPartition, ...]
    #: Set when the group runs streamtasks' task assignor and the member has an assignment.
    tasks: MemberTasks | None = None
    #: From the member's streamtasks ``SubscriptionInfo`` (``None`` under another assignor).
    process_id: str | None = None
    endpoint: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            **member_identity(self),
            "partitions": [str(tp) for tp in self.partitions],
            "tasks": None if self.tasks is None else self.tasks.to_json(),
            "process_id": self.process_id,
            "endpoint": self.endpoint,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class ClassicGroupView:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: tuple[ClassicMemberView, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "group_id": self.group_id,
            "type": "classic",
            "state": self.state,
            "protocol_type": self.protocol_type,
            "protocol": self.protocol,
            "members": [m.to_json() for m in self.members],
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerMemberView:
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    rack_id: str | None
    member_epoch: int
    current: tuple[TopicPartition, ...]
    target: tuple[TopicPartition, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            **member_identity(self),
            "rack_id": self.rack_id,
            "member_epoch": self.member_epoch,
            "current_assignment": [str(tp) for tp in self.current],
            "target_assignment": [str(tp) for tp in self.target],
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupView:
    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    assignor: str
    members: tuple[ConsumerMemberView, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "group_id": self.group_id,
            "type": "consumer",
            "state": self.state,
            "group_epoch": self.group_epoch,
            "assignment_epoch": self.assignment_epoch,
            "assignor": self.assignor,
            "members": [m.to_json() for m in self.members],
        }


# -- decoding ---------------------------------------------------------------------------------


def _decoded(group_id: str, member_id: str, what: str, decode: Any, data: bytes) -> Any:
    try:
        return decode(data)
    except StreamTasksError as exc:  # DecodeError, or a LocalProtocolError from a value check
        raise DecodeError(f"group {group_id!r}, member {member_id!r}: bad {what}: {exc}") from None


def _streamtasks_tasks(data: bytes) -> MemberTasks:
    info = decode_assignment_info(data)
    return MemberTasks(
        active=tuple(sorted(info.active_tasks)),
        standby=tuple(sorted(info.standby_tasks)),
        warmup=tuple(sorted(info.warmup_tasks)),
    )


def _streamtasks_process(data: bytes) -> tuple[str, str | None]:
    info = decode_subscription_info(data)
    return str(info.process_id), info.endpoint


def _kafka_streams_tasks(data: bytes) -> MemberTasks:
    """Kafka Streams' protocol does not tell warm-ups from standbys: they are standbys here."""
    info = decode_kstreams_assignment(data)
    return MemberTasks(active=tuple(sorted(set(info.active_tasks))), standby=info.standby_tasks, warmup=())


def _kafka_streams_process(data: bytes) -> tuple[str, str | None]:
    info = decode_kstreams_subscription(data)
    return str(info.process_id), info.endpoint


#: The assignors whose userdata describe reads: protocol -> (whose, tasks of, process of).
_USERDATA: dict[
    str, tuple[str, Callable[[bytes], MemberTasks], Callable[[bytes], tuple[str, str | None]]]
] = {
    STREAMTASKS_PROTOCOL: ("streamtasks", _streamtasks_tasks, _streamtasks_process),
    KAFKA_STREAMS_PROTOCOL: ("Kafka Streams", _kafka_streams_tasks, _kafka_streams_process),
}


def _classic_member(
    group_id: str, protocol_type: str, protocol: str, m: cg.DescribedMember
) -> ClassicMemberView:
    partitions: tuple[TopicPartition, ...] = ()
    tasks = process_id = endpoint = None
    userdata = _USERDATA.get(protocol) if protocol_type == CONSUMER_PROTOCOL_TYPE else None
    if protocol_type == CONSUMER_PROTOCOL_TYPE and m.assignment:
        assignment = _decoded(group_id, m.member_id, "assignment", decode_assignment, m.assignment)
        partitions = tuple(sorted(assignment.assigned_partitions))
        if userdata is not None and assignment.user_data:
            what = f"{userdata[0]} assignment userdata"
            tasks = _decoded(group_id, m.member_id, what, userdata[1], assignment.user_data)
    if userdata is not None and m.metadata:
        sub = _decoded(group_id, m.member_id, "subscription", decode_subscription, m.metadata)
        if sub.user_data:
            what = f"{userdata[0]} subscription userdata"
            process_id, endpoint = _decoded(group_id, m.member_id, what, userdata[2], sub.user_data)
    return ClassicMemberView(
        member_id=m.member_id,
        instance_id=m.group_instance_id,
        client_id=m.client_id,
        client_host=m.client_host,
        partitions=partitions,
        tasks=tasks,
        process_id=process_id,
        endpoint=endpoint,
    )


def classic_group_view(group_id: str, response: cg.DescribeGroupResponse) -> ClassicGroupView:
    """The view of a DescribeGroups answer (its error already checked by the caller)."""
    members = (
        _classic_member(group_id, response.protocol_type, response.protocol_name, m) for m in response.members
    )
    return ClassicGroupView(
        group_id=group_id,
        state=response.group_state,
        protocol_type=response.protocol_type,
        protocol=response.protocol_name,
        members=tuple(sorted(members, key=lambda m: (m.client_id, m.member_id))),
    )


def _partitions(assignment: kip848.DescribedAssignment) -> tuple[TopicPartition, ...]:
    return tuple(
        sorted(TopicPartition(t.topic_name, p) for t in assignment.topic_partitions for p in t.partitions)
    )


def consumer_group_view(group: kip848.DescribedGroup) -> ConsumerGroupView:
    """The view of one ConsumerGroupDescribe group (its error already checked by the caller)."""
    members = (
        ConsumerMemberView(
            member_id=m.member_id,
            instance_id=m.instance_id,
            client_id=m.client_id,
            client_host=m.client_host,
            rack_id=m.rack_id,
            member_epoch=m.member_epoch,
            current=_partitions(m.assignment),
            target=_partitions(m.target_assignment),
        )
        for m in group.members
    )
    return ConsumerGroupView(
        group_id=group.group_id,
        state=group.group_state,
        group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch,
        assignor=group.assignor_name,
        members=tuple(sorted(members, key=lambda m: (m.client_id, m.member_id))),
    )


# -- rendering --------------------------------------------------------------------------------


def table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    lines = [list(header), *(list(r) for r in rows)]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in lines
    )


def joined(items: Iterable[object]) -> str:
    return ",".join(str(i) for i in items) or "-"


def render_listing(groups: Iterable[GroupListing]) -> str:
    rows = [(g.group_id, g.group_type, g.protocol_type or "-", g.state) for g in groups]
    if not rows:
        return "no groups"
    return table(("GROUP", "TYPE", "PROTOCOL-TYPE", "STATE"), rows)


def render_classic(view: ClassicGroupView, *, members: bool = True) -> str:
    head = (
        f"group {view.group_id}: classic, state {view.state}, protocol type {view.protocol_type or '-'}, "
        f"protocol {view.protocol or '-'}, {len(view.members)} member(s)"
    )
    if not members or not view.members:
        return head
    tasks = any(m.tasks is not None for m in view.members)
    header = ["MEMBER", "INSTANCE", "CLIENT-ID", "HOST", "PARTITIONS"]
    if tasks:
        header += ["ACTIVE", "STANDBY", "WARMUP"]
    rows = []
    for m in view.members:
        row = [m.member_id, m.instance_id or "-", m.client_id, m.client_host, joined(m.partitions)]
        if tasks:
            t = m.tasks
            row += ["-", "-", "-"] if t is None else [joined(t.active), joined(t.standby), joined(t.warmup)]
        rows.append(row)
    return head + "\n" + table(header, rows)


def render_consumer(view: ConsumerGroupView, *, members: bool = True) -> str:
    head = (
        f"group {view.group_id}: consumer (KIP-848), state {view.state}, group epoch {view.group_epoch}, "
        f"assignment epoch {view.assignment_epoch}, assignor {view.assignor or '-'}, "
        f"{len(view.members)} member(s)"
    )
    if not members or not view.members:
        return head
    rows = [
        (
            m.member_id,
            m.instance_id or "-",
            m.client_id,
            m.client_host,
            m.rack_id or "-",
            str(m.member_epoch),
            joined(m.current),
            joined(m.target),
        )
        for m in view.members
    ]
    header = ("MEMBER", "INSTANCE", "CLIENT-ID", "HOST", "RACK", "EPOCH", "CURRENT", "TARGET")
    return head + "\n" + table(header, rows)
