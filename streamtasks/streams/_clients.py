"""The leader's view of the group: decoded subscriptions, ownership, and KIP-924 client states.

Pure helpers of :class:`~streamtasks.streams.assignor.StreamsPartitionAssignor`; see
``docs/streams.md`` for the rules (previous tasks, lags from offset sums).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from assignors.cooperative import OwnedClaim, valid_claims
from assignors.partition.types import GroupSubscription, MemberId
from assignors.types import RUNNING_LAG, ClientState
from streamtasks.errors import StreamTasksError
from streamtasks.protocol.userdata import (
    LATEST_VERSION,
    RUNNING_OFFSET_SUM,
    UNKNOWN_OFFSET_SUM,
    SubscriptionInfo,
    decode_subscription_info,
    peek_version,
)
from streamtasks.streams._table import TaskTable
from topology.ids import TaskId, TopicPartition, partition_order
from topology.model import TaskInfo

__all__ = [
    "DecodedMembers",
    "GroupView",
    "MemberView",
    "build_view",
    "decode_subscription_infos",
    "merge_offset_sums",
]

_MAX_LISTED = 8


@dataclass(frozen=True, slots=True, kw_only=True)
class DecodedMembers:
    """Every member's streamtasks subscription as far as it could be read."""

    infos: Mapping[MemberId, SubscriptionInfo]
    #: ``(version, latest_supported_version)`` of every member whose header reads.
    versions: Mapping[MemberId, tuple[int, int]]
    #: Members whose SubscriptionInfo could not be decoded (sorted).
    bad: tuple[MemberId, ...]


def decode_subscription_infos(
    group: GroupSubscription, problems: list[str], *, latest: int = LATEST_VERSION
) -> DecodedMembers:
    """Decode each member's ``user_data``, reading versions up to ``latest`` (above it: the
    header and process id only); a member that fails is listed in ``bad``."""
    infos: dict[MemberId, SubscriptionInfo] = {}
    versions: dict[MemberId, tuple[int, int]] = {}
    bad: list[MemberId] = []
    for member in sorted(group.members):
        data = group.members[member].user_data
        with contextlib.suppress(StreamTasksError, ValueError):
            versions[member] = peek_version(data)
        try:
            infos[member] = decode_subscription_info(data, latest=latest)
        except (StreamTasksError, ValueError) as exc:
            bad.append(member)
            problems.append(f"member {member!r}: undecodable streamtasks subscription, gets nothing: {exc}")
    return DecodedMembers(infos=MappingProxyType(infos), versions=MappingProxyType(versions), bad=tuple(bad))


def merge_offset_sums(sums: Sequence[Mapping[TaskId, int]]) -> dict[TaskId, int]:
    """One process's offset sums from its members': running wins, else the highest sum
    (:data:`UNKNOWN_OFFSET_SUM` is below every real sum)."""
    out: dict[TaskId, int] = {}
    for one in sums:
        for task, value in one.items():
            old = out.get(task)
            if old is None or value == RUNNING_OFFSET_SUM:
                out[task] = value
            elif old != RUNNING_OFFSET_SUM:
                out[task] = max(old, value)
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberView:
    """What the leader knows of one decodable member, restricted to the topology's tasks."""

    member_id: MemberId
    process_id: uuid.UUID
    #: Tasks with at least one source partition this member validly owns (KIP-341).
    owned: frozenset[TaskId]
    #: Tasks it reports running as active (:data:`RUNNING_OFFSET_SUM`).
    running: frozenset[TaskId]
    #: Tasks it reports other local state for.
    state: frozenset[TaskId]
    endpoint: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupView:
    """The processes of the group with their members and KIP-924 client states."""

    members: Mapping[MemberId, MemberView]
    #: Process id -> its members, sorted; processes in id order.
    processes: Mapping[uuid.UUID, tuple[MemberId, ...]]
    clients: tuple[ClientState, ...]
    #: Valid claims of *every* member of the group on the topology's partitions (KIP-341),
    #: generations clamped to >= -1: the claims the cooperative hand-over respects.
    claims: Mapping[MemberId, OwnedClaim]


def _claims(
    group: GroupSubscription, partition_task: Mapping[TopicPartition, TaskId]
) -> dict[MemberId, OwnedClaim]:
    """Each member's claim on the topology's partitions (others cannot matter here)."""
    return {
        member: OwnedClaim(
            partitions=tuple(
                sorted(
                    {tp for tp in group.members[member].owned_partitions if tp in partition_task},
                    key=partition_order,
                )
            ),
            generation=max(-1, group.members[member].generation),
        )
        for member in sorted(group.members)
    }


def _listed(tasks: frozenset[TaskId]) -> str:
    names = [str(t) for t in sorted(tasks)]
    more = f" and {len(names) - _MAX_LISTED} more" if len(names) > _MAX_LISTED else ""
    return ", ".join(names[:_MAX_LISTED]) + more


def _lag(task: TaskInfo, offset_sum: int, end_offsets: Mapping[TopicPartition, int]) -> int | None:
    """Lag of one reported (non-running) offset sum; ``None``: unknown."""
    ends = [end_offsets.get(tp) for tp in task.changelog_partitions]
    if any(end is None for end in ends):  # end offsets not known (yet)
        return 0 if offset_sum >= 0 else None
    total = max(0, sum(e for e in ends if e is not None))
    if offset_sum == UNKNOWN_OFFSET_SUM:
        return total
    return max(0, total - offset_sum)


def build_view(
    group: GroupSubscription,
    infos: Mapping[MemberId, SubscriptionInfo],
    table: TaskTable,
    end_offsets: Mapping[TopicPartition, int],
    problems: list[str],
) -> GroupView:
    """Members, processes and client states (rules in ``docs/streams.md``)."""
    by_id = table.by_id
    partition_task = table.partition_task
    claims = _claims(group, partition_task)
    valid = valid_claims(claims) if claims else {}
    owned_by: dict[MemberId, frozenset[TaskId]] = {
        member: frozenset(partition_task[tp] for tp in parts) for member, parts in valid.items()
    }
    owned_anywhere = frozenset().union(*owned_by.values()) if owned_by else frozenset()
    views: dict[MemberId, MemberView] = {}
    sums_of: dict[MemberId, dict[TaskId, int]] = {}
    processes: dict[uuid.UUID, list[MemberId]] = {}
    for member in sorted(infos):
        info = infos[member]
        sums = {t: s for t, s in info.task_offset_sums.items() if t in by_id}
        unknown = frozenset(info.task_offset_sums) - frozenset(sums)
        if unknown:
            problems.append(
                f"member {member!r}: ignoring offset sums of tasks the topology does not have: "
                f"{_listed(unknown)}"
            )
        sums_of[member] = sums
        views[member] = MemberView(
            member_id=member,
            process_id=info.process_id,
            owned=owned_by.get(member, frozenset()),
            running=frozenset(t for t, s in sums.items() if s == RUNNING_OFFSET_SUM),
            state=frozenset(t for t, s in sums.items() if s != RUNNING_OFFSET_SUM),
            endpoint=info.endpoint,
        )
        processes.setdefault(info.process_id, []).append(member)
    clients: list[ClientState] = []
    for pid in sorted(processes):
        members = processes[pid]
        first = infos[members[0]]
        rack = next((r for r in (_rack(infos[m], group, m) for m in members) if r is not None), None)
        sums = merge_offset_sums([sums_of[m] for m in members])
        owned = frozenset().union(*(views[m].owned for m in members))
        # Eager members own nothing when they join: a task they report running that nobody
        # owns is theirs as much as anyone's.
        running_free = frozenset(t for t, s in sums.items() if s == RUNNING_OFFSET_SUM) - owned_anywhere
        previous_active = owned | running_free
        lags: dict[TaskId, int] = dict.fromkeys(previous_active, RUNNING_LAG)
        for task, offset_sum in sums.items():
            if task in previous_active:
                continue
            if offset_sum == RUNNING_OFFSET_SUM:
                lag: int | None = RUNNING_LAG
            else:
                lag = _lag(by_id[task], offset_sum, end_offsets)
            if lag is not None:
                lags[task] = lag
        clients.append(
            ClientState(
                process_id=pid,
                capacity=len(members),
                rack=rack,
                client_tags=first.client_tags,
                previous_active=previous_active,
                previous_standby=frozenset(t for t, s in sums.items() if s != RUNNING_OFFSET_SUM)
                - previous_active,
                task_lags=lags,
            )
        )
    return GroupView(
        members=MappingProxyType(views),
        processes=MappingProxyType({pid: tuple(processes[pid]) for pid in sorted(processes)}),
        clients=tuple(clients),
        claims=MappingProxyType(claims),
    )


def _rack(info: SubscriptionInfo, group: GroupSubscription, member: MemberId) -> str | None:
    return info.rack if info.rack is not None else group.members[member].rack
