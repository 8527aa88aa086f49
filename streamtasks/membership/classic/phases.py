"""The classic member's per-phase logic as pure functions over its records.

Join (KIP-429 1a, 1e; KIP-341's missed generation), the leader's step (KIP-814 SkipAssignment),
sync (reading the assignment), the commit gate's verdict, heartbeats and the next deadline.
Nothing here changes state: each function reads records (:mod:`.records`) and returns a value,
a request or a new record, which :class:`~streamtasks.membership.classic.machine.ClassicMember`
assigns.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType

from assignors.partition.types import PartitionAssignor, RebalanceProtocol
from streamtasks.errors import DecodeError
from streamtasks.membership.classic.actions import CommitOffsets
from streamtasks.membership.classic.config import MemberConfig
from streamtasks.membership.classic.leader import DecodedGroup, decode_members, lead
from streamtasks.membership.classic.reactions import Api, Reaction, reaction
from streamtasks.membership.classic.records import (
    LeaderView,
    Link,
    Membership,
    Ownership,
    Rejoin,
    Requests,
    Round,
)
from streamtasks.membership.classic.states import HAS_GENERATION
from streamtasks.membership.classic.states import MemberState as S
from streamtasks.membership.classic.subscription import join_protocols
from streamtasks.membership.common import Gate, sorted_tps
from streamtasks.protocol.classic_group import (
    UNKNOWN_GENERATION,
    UNKNOWN_MEMBER_ID,
    DescribeGroupResponse,
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    SyncGroupAssignment,
    SyncGroupRequest,
    SyncGroupResponse,
)
from streamtasks.protocol.consumer_protocol import decode_assignment
from streamtasks.protocol.errors import KafkaErrorCode
from topology.ids import TopicPartition

__all__ = [
    "LeaderStep",
    "commit_action",
    "commit_verdict",
    "heartbeat_due",
    "heartbeat_request",
    "join_problem",
    "join_request",
    "join_revocation",
    "joined",
    "leader_step",
    "leave_request",
    "metadata_changed",
    "missed_generations",
    "next_deadline",
    "read_assignment",
    "request_timeout",
    "reset",
    "session_checked",
    "session_lapsed",
    "sorted_tps",
    "sync_request",
    "unassigned_partitions",
    "unclaimed_partitions",
    "wants_join",
]

#: The most severe reaction among an OffsetCommit's partition errors decides.
_SEVERITY = {
    r: i
    for i, r in enumerate(
        (
            Reaction.FATAL,
            Reaction.RESET_MEMBER,
            Reaction.RESET_GENERATION,
            Reaction.COORDINATOR,
            Reaction.RETRY,
        )
    )
}


def request_timeout(config: MemberConfig, api: Api | None) -> int:
    """How long a request may go unanswered (JoinGroup waits out the rebalance, as in Kafka)."""
    if api is Api.JOIN_GROUP:
        return max(config.request_timeout_ms, config.rebalance_timeout_ms + 5_000)
    return config.request_timeout_ms


# ---------------------------------------------------------------------- joining


def wants_join(state: S, round_: Round, rejoin: Rejoin) -> bool:
    if state is S.UNJOINED:
        return True
    if state is S.JOINING:
        return not round_.join_sent
    return state is S.STABLE and rejoin.needed


def join_revocation(
    protocol: RebalanceProtocol, owned: frozenset[TopicPartition], topics: tuple[str, ...]
) -> frozenset[TopicPartition]:
    """What to revoke before JoinGroup: EAGER everything, COOPERATIVE what is no longer subscribed
    (KIP-429 1a)."""
    if protocol is RebalanceProtocol.EAGER:
        return owned
    return frozenset(tp for tp in owned if tp.topic not in topics)


def join_request(
    config: MemberConfig, topics: tuple[str, ...], membership: Membership, ownership: Ownership, reason: str
) -> JoinGroupRequest:
    protocols = join_protocols(
        config,
        topics=topics,
        owned=sorted_tps(ownership.owned),
        owned_generation=ownership.owned_generation,
        previous=ownership.previous,
        previous_generation=ownership.previous_generation,
    )
    return JoinGroupRequest(
        group_id=config.group_id,
        member_id=membership.member_id,
        group_instance_id=config.group_instance_id,
        session_timeout_ms=config.session_timeout_ms,
        rebalance_timeout_ms=config.rebalance_timeout_ms,
        protocol_type=config.protocol_type,
        protocols=protocols,
        reason=reason or None,
    )


def join_problem(config: MemberConfig, membership: Membership, resp: JoinGroupResponse) -> str | None:
    """Why a successful JoinGroup answer cannot be used (``None``: it can)."""
    names = [a.name for a in config.assignors]
    if resp.protocol_name not in names:
        return f"coordinator selected protocol {resp.protocol_name!r}, not one of {names}"
    if resp.generation_id < max(membership.generation, 0):
        return f"JoinGroup generation {resp.generation_id} is older than ours ({membership.generation})"
    return None


def missed_generations(
    config: MemberConfig, membership: Membership, owned: frozenset[TopicPartition], resp: JoinGroupResponse
) -> str | None:
    """KIP-429/KIP-341: a generation went by without this member's JoinGroup (a static member
    paused past the rebalance timeout); the leader of that generation worked from a stale copy
    of its claims, so what it owns may have moved: lost, not revoked. The report, or ``None``."""
    generation = membership.generation
    if config.lose_on_missed_generation and owned and generation >= 0 and resp.generation_id > generation + 1:
        return f"missed generation(s) {generation + 1}..{resp.generation_id - 1}: owned partitions lost"
    return None


def joined(membership: Membership, resp: JoinGroupResponse) -> Membership:
    member_id = resp.member_id or membership.member_id
    return Membership(
        member_id=member_id,
        generation=resp.generation_id,
        protocol_name=resp.protocol_name,
        leader_id=resp.leader,
        is_leader=resp.leader == member_id,
    )


def reset(membership: Membership, *, member_id: bool) -> Membership:
    """Out of the generation (KIP-429 1d), and out of the member id too when ``member_id``."""
    m = membership
    new_id = UNKNOWN_MEMBER_ID if member_id else m.member_id
    return replace(m, generation=UNKNOWN_GENERATION, member_id=new_id, is_leader=False)


def session_checked(state: S, generation: int) -> bool:
    """Whether the session rule (:func:`session_lapsed`) watches a member in ``state``: one in a
    generation, but not while its SyncGroup is in flight (nor its JoinGroup: JOINING is not in
    :data:`HAS_GENERATION`). Those are the coordinator's to answer when the rebalance is done:
    a follower's SyncGroup waits for the leader's (up to the rebalance timeout; Tansu held one
    ~5 s before answering REBALANCE_IN_PROGRESS), and the heartbeats sent meanwhile on the same
    connection are answered only after it, so the silence says nothing about the session.
    librdkafka checks only its steady state; a commit before a revocation (PREPARING,
    REVOKING, LEAVING) is answered at once by a live coordinator and heartbeats go on, so a
    session without an answer there means what it means in STABLE."""
    return state in HAS_GENERATION and state is not S.SYNCING and generation >= 0


def session_lapsed(state: S, membership: Membership, link: Link, config: MemberConfig, now_ms: int) -> bool:
    """Whether a member the rule watches (:func:`session_checked`) is in a generation the
    coordinator has not vouched for within a session timeout (lookups and unanswered requests do
    not count).
    librdkafka's rule: the coordinator (or the one the group moved to) may have expired the
    member and handed its partitions to others, which would then be processed twice; the member
    gives them up (lost) and rejoins."""
    return (
        session_checked(state, membership.generation)
        and now_ms - link.session_ok_ms > config.session_timeout_ms
    )


def heartbeat_due(state: S, membership: Membership, heartbeat_in_flight: bool, due: bool) -> bool:
    """Whether a member in ``state`` sends a heartbeat now (``due``: its time has come)."""
    m = membership
    in_generation = state in HAS_GENERATION and m.generation >= 0 and bool(m.member_id)
    return in_generation and not heartbeat_in_flight and due


def sync_request(
    config: MemberConfig, membership: Membership, assignments: tuple[SyncGroupAssignment, ...]
) -> SyncGroupRequest:
    return SyncGroupRequest(
        group_id=config.group_id,
        generation_id=membership.generation,
        member_id=membership.member_id,
        group_instance_id=config.group_instance_id,
        protocol_type=config.protocol_type,
        protocol_name=membership.protocol_name,
        assignments=assignments,
    )


# ---------------------------------------------------------------------- the leader


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderStep:
    """The leader's SyncGroup assignments, what it learnt, and the problems to report."""

    view: LeaderView
    assignments: tuple[SyncGroupAssignment, ...]
    problems: tuple[str, ...]


def _snapshot(group_topics: tuple[str, ...], metadata: Mapping[str, int] | None) -> Mapping[str, int | None]:
    current = metadata or {}
    return MappingProxyType({t: current.get(t) for t in group_topics})


def leader_step(
    config: MemberConfig,
    protocol_name: str | None,
    metadata: Mapping[str, int] | None,
    resp: JoinGroupResponse,
) -> LeaderStep:
    """Leader step; KIP-814: with SkipAssignment only learn the group's topics."""
    marker = config.generation_marker
    if resp.skip_assignment:
        selected = next((a for a in config.assignors if a.name == protocol_name), None)
        decoded = decode_members(resp.members, assignor=selected, generation_marker=marker)
        topics = decoded.topics
        # Only a COOPERATIVE leader's previous incarnation can have claimed what it withheld
        # (an EAGER member claims nothing); others' claims are visible and they rejoin after
        # revoking. With SkipAssignment this incarnation never saw what was withheld.
        cooperative = config.protocol is RebalanceProtocol.COOPERATIVE
        view = LeaderView(
            group_topics=topics,
            snapshot=_snapshot(topics, metadata),
            snapshot_lazy=True,
            unclaimed=unclaimed_partitions(decoded, metadata) if cooperative else frozenset(),
        )
        return LeaderStep(view=view, assignments=(), problems=decoded.problems)
    assignor: PartitionAssignor = next(a for a in config.assignors if a.name == protocol_name)
    result = lead(
        resp.members, assignor=assignor, partitions_per_topic=metadata or {}, generation_marker=marker
    )
    view = LeaderView(
        group_topics=result.group_topics,
        snapshot=_snapshot(result.group_topics, metadata),
        followup_needed=result.followup_needed,
    )
    return LeaderStep(view=view, assignments=result.assignments, problems=result.problems)


def unclaimed_partitions(
    decoded: DecodedGroup, metadata: Mapping[str, int] | None
) -> frozenset[TopicPartition]:
    """The partitions of the group's topics (those with a known count) that no member claims."""
    counts = metadata or {}
    claimed = {tp for sub in decoded.subscriptions.values() for tp in sub.owned_partitions}
    return frozenset(
        tp
        for topic in decoded.topics
        for tp in (TopicPartition(topic, p) for p in range(counts.get(topic, 0)))
        if tp not in claimed
    )


def unassigned_partitions(
    candidates: frozenset[TopicPartition], resp: DescribeGroupResponse
) -> frozenset[TopicPartition] | str:
    """Which of ``candidates`` no member of a DescribeGroups answer is assigned, or why the
    answer cannot tell (an error, a group not Stable, an assignment that does not decode)."""
    if resp.error is not KafkaErrorCode.NONE:
        return f"answered {resp.error.name}"
    if resp.group_state != "Stable":
        return f"group is {resp.group_state or 'in no state'}, not Stable"
    left = set(candidates)
    for member in resp.members:
        try:
            left.difference_update(decode_assignment(member.assignment).assigned_partitions)
        except DecodeError as exc:
            return f"member {member.member_id!r}: malformed assignment: {exc}"
    return frozenset(left)


def metadata_changed(view: LeaderView, metadata: Mapping[str, int] | None) -> tuple[bool, LeaderView]:
    """Leader: has a partition count of a group topic changed since the assignment? Also the
    view with the counts a lazy (KIP-814) snapshot learnt from ``metadata``."""
    current = metadata or {}
    if view.snapshot_lazy:
        learnt = {t: current[t] for t, n in view.snapshot.items() if n is None and t in current}
        if learnt:
            view = replace(view, snapshot=MappingProxyType({**view.snapshot, **learnt}))
    return any(current.get(t) != view.snapshot.get(t) for t in view.group_topics), view


# ---------------------------------------------------------------------- syncing


def read_assignment(
    resp: SyncGroupResponse, protocol_name: str | None, topics: tuple[str, ...]
) -> tuple[frozenset[TopicPartition], bytes] | str:
    """The assigned partitions and user data of a successful SyncGroup, or why it is unusable."""
    if resp.protocol_name is not None and resp.protocol_name != protocol_name:
        return f"SyncGroup protocol {resp.protocol_name!r} != {protocol_name!r}"
    try:
        decoded = decode_assignment(resp.assignment)
    except DecodeError as exc:
        return f"malformed assignment: {exc}"
    assigned = frozenset(decoded.assigned_partitions)
    foreign = sorted({tp.topic for tp in assigned} - set(topics))
    if foreign:
        return f"assignment names topics we do not subscribe to: {foreign}"
    return assigned, decoded.user_data or b""


# ---------------------------------------------------------------------- commit before revoking


def commit_action(
    request_id: int, config: MemberConfig, membership: Membership, partitions: frozenset[TopicPartition]
) -> CommitOffsets:
    return CommitOffsets(
        request_id=request_id,
        group_id=config.group_id,
        member_id=membership.member_id,
        generation_id=membership.generation,
        group_instance_id=config.group_instance_id,
        partitions=sorted_tps(partitions),
    )


def commit_verdict(codes: Iterable[KafkaErrorCode]) -> tuple[Reaction, KafkaErrorCode]:
    """The reaction to a failed OffsetCommit: the most severe among its partitions' errors."""
    return min(
        ((reaction(Api.OFFSET_COMMIT, c), c) for c in codes),
        key=lambda ac: _SEVERITY.get(ac[0], len(_SEVERITY)),
    )


# ---------------------------------------------------------------------- heartbeat and leaving


def heartbeat_request(config: MemberConfig, membership: Membership) -> HeartbeatRequest:
    return HeartbeatRequest(
        group_id=config.group_id,
        generation_id=membership.generation,
        member_id=membership.member_id,
        group_instance_id=config.group_instance_id,
    )


def leave_request(
    config: MemberConfig, membership: Membership, link: Link, reason: str
) -> LeaveGroupRequest | None:
    """KIP-345: static members do not send LeaveGroup (their session timeout decides)."""
    if config.is_static or not membership.member_id or not link.coordinator_known:
        return None
    return LeaveGroupRequest(group_id=config.group_id, member_id=membership.member_id, reason=reason)


# ---------------------------------------------------------------------- timers


def next_deadline(
    state: S,
    config: MemberConfig,
    *,
    generation: int,
    link: Link,
    requests: Requests[Api],
    round_: Round,
    rejoin: Rejoin,
    gate: Gate | None = None,
    followup_due_ms: int | None = None,
) -> int | None:
    """When ``poll`` next has something to do; ``None`` when only an event can move the member."""
    if state in (S.CLOSED, S.FAILED):
        return None
    times = [f.deadline_ms for f in requests.inflight.values()]
    if gate is not None:
        times.append(gate.deadline_ms)
    if session_checked(state, generation):  # the session may lapse, coordinator or not
        times.append(link.session_ok_ms + config.session_timeout_ms + 1)
    if not link.coordinator_known:
        if not requests.finds_in_flight():
            times.append(link.find_retry_ms)
        return min(times)
    asking = state is S.UNJOINED and requests.in_flight(Api.HEARTBEAT)  # a lapsed member (.readopt)
    if wants_join(state, round_, rejoin) and not asking:
        times.append(link.join_retry_ms)
    if followup_due_ms is not None and state is S.STABLE:
        times.append(followup_due_ms)
    if gate is not None and gate.commit_id is None:
        times.append(gate.retry_at_ms)
    if state in HAS_GENERATION and generation >= 0:
        if not requests.in_flight(Api.HEARTBEAT):
            times.append(link.hb_next_ms)
        times.append(link.hb_last_ok_ms + config.session_timeout_ms + 1)
    return min(times) if times else None
