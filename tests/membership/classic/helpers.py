"""Test helpers: build configs, drive one member through scripted broker answers.

The broker's answers are plain response values; the member under test is the real one.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, TypeVar

from assignors.partition.range import RangeAssignor
from assignors.partition.sticky import CooperativeStickyAssignor
from assignors.partition.types import PartitionAssignor
from streamtasks.membership.classic import (
    Action,
    ClassicMember,
    CommitOffsets,
    CoordinatorDiscovered,
    FindCoordinator,
    InvokeListener,
    MemberConfig,
    ResponseReceived,
    SendRequest,
)
from streamtasks.protocol.classic_group import (
    JoinGroupMember,
    JoinGroupRequest,
    JoinGroupResponse,
    OffsetCommitResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from streamtasks.protocol.consumer_protocol import ConsumerProtocolAssignment, encode_assignment
from streamtasks.protocol.errors import KafkaErrorCode
from tests.ids import tp
from topology.ids import TopicPartition

__all__ = [
    "E",
    "commit_ok",
    "config",
    "cooperative",
    "eager",
    "join",
    "join_ok",
    "kinds",
    "listeners",
    "of",
    "one",
    "rejoin",
    "stable",
    "sync_ok",
    "tp",
    "tps",
]

E = KafkaErrorCode
T = TypeVar("T")


def tps(spec: str) -> tuple[TopicPartition, ...]:
    """``"t0 t1 u3"`` -> (t-0, t-1, u-3): topic letter(s) then partition number."""
    out = []
    for item in spec.split():
        name = item.rstrip("0123456789")
        out.append(TopicPartition(name, int(item[len(name) :])))
    return tuple(sorted(out))


def config(*, assignors: Sequence[PartitionAssignor] | None = None, **kw: Any) -> MemberConfig:
    kw.setdefault("group_id", "g")
    kw.setdefault("topics", ("t",))
    kw.setdefault("session_timeout_ms", 10_000)
    kw.setdefault("rebalance_timeout_ms", 30_000)
    kw.setdefault("heartbeat_interval_ms", 1_000)
    kw.setdefault("retry_backoff_ms", 100)
    kw.setdefault("request_timeout_ms", 5_000)
    return MemberConfig(assignors=tuple(assignors or (CooperativeStickyAssignor(),)), **kw)


def cooperative(**kw: Any) -> ClassicMember:
    return ClassicMember(config(**kw))


def eager(**kw: Any) -> ClassicMember:
    return ClassicMember(config(assignors=(RangeAssignor(),), **kw))


def of(actions: Iterable[Action], kind: type[T]) -> list[T]:
    return [a for a in actions if isinstance(a, kind)]


def one(actions: Iterable[Action], kind: type[T]) -> T:
    found = of(actions, kind)
    assert len(found) == 1, f"expected one {kind.__name__}, got {found} in {list(actions)}"
    return found[0]


def request(actions: Iterable[Action], kind: type[T]) -> tuple[int, T]:
    sends = [a for a in of(actions, SendRequest) if isinstance(a.request, kind)]
    assert len(sends) == 1, f"expected one {kind.__name__} in {list(actions)}"
    req = sends[0].request
    assert isinstance(req, kind)
    return sends[0].request_id, req


def listeners(actions: Iterable[Action]) -> list[tuple[str, tuple[TopicPartition, ...]]]:
    return [(a.kind.name, a.partitions) for a in of(actions, InvokeListener)]


def kinds(actions: Iterable[Action]) -> list[str]:
    """Action names in order, listener calls as their kind, requests as their class."""
    out = []
    for a in actions:
        if isinstance(a, InvokeListener):
            out.append(a.kind.name)
        elif isinstance(a, SendRequest):
            out.append(type(a.request).__name__)
        else:
            out.append(type(a).__name__)
    return out


def join(member: ClassicMember, now: int = 0) -> tuple[int, JoinGroupRequest]:
    """From a fresh member: find the coordinator, then the first JoinGroup."""
    find = one(member.poll(now), FindCoordinator)
    assert member.handle(CoordinatorDiscovered(request_id=find.request_id), now) == []
    return request(member.poll(now), JoinGroupRequest)


def join_ok(
    member: ClassicMember,
    rid: int,
    *,
    generation: int = 1,
    member_id: str = "m1",
    leader: str = "other",
    members: tuple[JoinGroupMember, ...] = (),
    skip_assignment: bool = False,
    protocol: str | None = None,
    now: int = 0,
) -> tuple[list[Action], int, SyncGroupRequest]:
    actions = member.handle(
        ResponseReceived(
            request_id=rid,
            response=JoinGroupResponse(
                error=E.NONE,
                generation_id=generation,
                protocol_type="consumer",
                protocol_name=protocol or member.config.assignors[0].name,
                leader=leader,
                member_id=member_id,
                members=members,
                skip_assignment=skip_assignment,
            ),
        ),
        now,
    )
    sid, sreq = request(actions, SyncGroupRequest)
    return actions, sid, sreq


def assignment_bytes(partitions: Iterable[TopicPartition]) -> bytes:
    return encode_assignment(
        ConsumerProtocolAssignment(assigned_partitions=tuple(partitions), user_data=None)
    )


def sync_ok(
    member: ClassicMember, rid: int, partitions: Iterable[TopicPartition], now: int = 0
) -> list[Action]:
    return member.handle(
        ResponseReceived(
            request_id=rid,
            response=SyncGroupResponse(
                error=E.NONE,
                protocol_type="consumer",
                protocol_name=member.protocol_name,
                assignment=assignment_bytes(partitions),
            ),
        ),
        now,
    )


def commit_ok(member: ClassicMember, actions: Iterable[Action], now: int = 0) -> list[Action]:
    commit = one(actions, CommitOffsets)
    errors = tuple((p, E.NONE) for p in commit.partitions)
    return member.handle(
        ResponseReceived(request_id=commit.request_id, response=OffsetCommitResponse(errors=errors)), now
    )


def stable(
    member: ClassicMember, partitions: Iterable[TopicPartition], *, generation: int = 1, now: int = 0
) -> list[Action]:
    """Bring a fresh member to STABLE owning ``partitions``."""
    rid, _ = join(member, now)
    _, sid, _ = join_ok(member, rid, generation=generation, now=now)
    return sync_ok(member, sid, partitions, now)


def rejoin(member: ClassicMember, now: int) -> tuple[list[Action], int, JoinGroupRequest]:
    actions = member.poll(now)
    rid, req = request(actions, JoinGroupRequest)
    return actions, rid, req
