"""The KIP-848 member's per-phase logic as pure functions over its records.

Each function reads records (:mod:`.records`) and returns a value, a request, an action or a new
record; none changes anything. :class:`~streamtasks.membership.consumer.machine.ConsumerMember`
calls them and assigns what they return.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Mapping
from dataclasses import replace

from streamtasks.errors import LocalProtocolError
from streamtasks.membership.common import sorted_tps
from streamtasks.membership.common.states import MemberState as S
from streamtasks.membership.consumer.actions import CommitOffsets
from streamtasks.membership.consumer.client_assignment import AssignmentProblem, compute_assignment
from streamtasks.membership.consumer.config import UNRELEASED_WINDOW_INTERVALS, ConsumerMemberConfig
from streamtasks.membership.consumer.events import AssignorMetadata
from streamtasks.membership.consumer.records import (
    Api,
    Gate,
    Link,
    Membership,
    Ownership,
    Requests,
    Round,
    Sent,
    Subscribed,
    Target,
)
from streamtasks.membership.consumer.transitions import IN_GROUP
from streamtasks.protocol.assignment_rpc import (
    ConsumerGroupInstallAssignmentRequest,
    ConsumerGroupPrepareAssignmentRequest,
    ConsumerGroupPrepareAssignmentResponse,
)
from streamtasks.protocol.classic_group import OffsetCommitResponse
from streamtasks.protocol.consumer_group import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ClientAssignor,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    TopicIdPartitions,
)
from streamtasks.protocol.errors import KafkaErrorCode as E
from topology.ids import TopicPartition

__all__ = [
    "COORDINATOR_CODES",
    "FATAL_CODES",
    "FENCING_CODES",
    "MAX_REASON",
    "Commit",
    "bumped_reasons",
    "check_assignor_metadata",
    "client_assignors",
    "commit_action",
    "commit_verdict",
    "dropped",
    "heartbeat_request",
    "install_request",
    "leave_request",
    "new_epoch_coming",
    "next_deadline",
    "next_heartbeat_ms",
    "next_pending",
    "owned_wire",
    "prepare_request",
    "resolve",
    "unread_assignment",
    "unreleased_since",
]

#: Heartbeat errors the member cannot go on after (Apache Kafka's consumer treats them as fatal).
FATAL_CODES = frozenset(
    {
        E.UNRELEASED_INSTANCE_ID,
        E.GROUP_MAX_SIZE_REACHED,
        E.INVALID_REQUEST,
        E.UNSUPPORTED_ASSIGNOR,
        E.GROUP_AUTHORIZATION_FAILED,
        E.UNSUPPORTED_VERSION,
        E.FENCED_INSTANCE_ID,
    }
)
FENCING_CODES = (E.FENCED_MEMBER_EPOCH, E.UNKNOWN_MEMBER_ID)
COORDINATOR_CODES = (E.COORDINATOR_NOT_AVAILABLE, E.NOT_COORDINATOR)

#: The assignor ``Reason`` is an int8; enforce_rebalance steps it through 1..127.
MAX_REASON = 127

_IDLE = (S.UNSUBSCRIBED, S.FATAL, S.STALE)


# ------------------------------------------------------------------ heartbeats


def client_assignors(config: ConsumerMemberConfig, sub: Subscribed) -> tuple[ClientAssignor, ...]:
    out = []
    for assignor in config.client_assignors:
        m = sub.assignor_metadata[assignor.name]
        out.append(
            ClientAssignor(
                name=assignor.name,
                minimum_version=m.minimum_version,
                maximum_version=m.maximum_version,
                reason=sub.reasons[assignor.name],
                metadata_version=m.metadata_version,
                metadata_bytes=m.metadata_bytes,
            )
        )
    return tuple(out)


def owned_wire(
    owned: frozenset[TopicPartition], ids: Mapping[str, uuid.UUID]
) -> tuple[TopicIdPartitions, ...]:
    by_topic: dict[uuid.UUID, list[int]] = {}
    for tp in owned:
        topic_id = ids.get(tp.topic)
        if topic_id is not None:
            by_topic.setdefault(topic_id, []).append(tp.partition)
    return tuple(
        TopicIdPartitions(topic_id=t, partitions=tuple(sorted(p))) for t, p in sorted(by_topic.items())
    )


def heartbeat_request(
    config: ConsumerMemberConfig,
    sub: Subscribed,
    ids: Mapping[str, uuid.UUID],
    membership: Membership,
    owned: frozenset[TopicPartition],
) -> tuple[ConsumerGroupHeartbeatRequest, Sent]:
    """Epoch 0: a full join. Otherwise only what changed since the coordinator last heard
    it (everything after a failed heartbeat: it may have missed the last one). Returns the
    request and what the coordinator has from the member once it is taken."""
    sent = membership.sent
    joining = membership.epoch == 0
    full = joining or sent is None
    assignors = client_assignors(config, sub)
    topics = sub.topics
    owned = frozenset() if joining else owned
    request = ConsumerGroupHeartbeatRequest(
        group_id=config.group_id,
        member_id=config.member_id,
        member_epoch=membership.epoch,
        instance_id=config.group_instance_id,
        rack_id=config.rack if full else None,
        rebalance_timeout_ms=config.rebalance_timeout_ms if full else -1,
        subscribed_topic_names=topics if full or sent is None or sent.topics != topics else None,
        server_assignor=config.server_assignor if full else None,
        client_assignors=(
            assignors if assignors and (full or sent is None or sent.assignors != assignors) else None
        ),
        topic_partitions=(owned_wire(owned, ids) if full or sent is None or sent.owned != owned else None),
    )
    return request, Sent(topics=topics, assignors=assignors, owned=owned)


def leave_request(config: ConsumerMemberConfig) -> ConsumerGroupHeartbeatRequest:
    """The leave heartbeat: epoch -1, or -2 for a static member (it will come back)."""
    return ConsumerGroupHeartbeatRequest(
        group_id=config.group_id,
        member_id=config.member_id,
        member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH if config.is_static else LEAVE_GROUP_MEMBER_EPOCH,
        instance_id=config.group_instance_id,
    )


def next_pending(
    state: S, epoch: int, resp: ConsumerGroupHeartbeatResponse, pending: Target | None
) -> Target | None:
    """The assignment to reconcile to after a successful heartbeat answer at ``epoch``."""
    assignment = resp.assignment
    if state is S.JOINING and epoch == 0:
        return pending  # no epoch yet (a client-side group without a first target): keep joining
    if assignment is not None:
        return Target(
            epoch=epoch,
            partitions=assignment.topic_partitions,
            unreleased=assignment.pending_topic_partitions,
            error=assignment.error,
            metadata_version=assignment.metadata_version,
            metadata_bytes=assignment.metadata_bytes,
        )
    if state is S.JOINING:
        return Target(epoch=epoch, partitions=())
    return pending


def answered_round(
    state: S, resp: ConsumerGroupHeartbeatResponse, round_: Round, now_ms: int
) -> tuple[Round, int | None]:
    """The round after a successful heartbeat answer, and since when the member waits (for
    unreleased partitions, or for the assignment it asked for; ``None``: it does not)."""
    pending = next_pending(state, resp.member_epoch, resp, round_.pending)
    since = unreleased_since(resp, round_.unreleased_since_ms, now_ms)
    asked = asked_since(resp, round_.asked_since_ms, round_.asked_at_epoch)
    after = replace(round_, pending=pending, unreleased_since_ms=since, asked_since_ms=asked)
    return after, since if since is not None else asked


def unreleased_since(resp: ConsumerGroupHeartbeatResponse, since_ms: int | None, now_ms: int) -> int | None:
    """Since when the member waits for unreleased partitions after this answer: kept while the
    coordinator names some (an answer without an assignment changes nothing), ``None`` once an
    assignment names none."""
    assignment = resp.assignment
    if assignment is None:
        return since_ms
    if not any(item.partitions for item in assignment.pending_topic_partitions):
        return None
    return now_ms if since_ms is None else since_ms


def asked_since(
    resp: ConsumerGroupHeartbeatResponse, since_ms: int | None, asked_at_epoch: int
) -> int | None:
    """Since when the member still waits, after this answer, for the assignment its ``Reason``
    asked for: until an answer gives it an epoch past the one it asked at (the coordinator moves
    every member to the new target's epoch, whether its partitions change or not)."""
    if since_ms is None or resp.member_epoch > asked_at_epoch:
        return None
    return since_ms


def next_heartbeat_ms(config: ConsumerMemberConfig, link: Link, since_ms: int | None, now_ms: int) -> int:
    """When the next heartbeat is due after an answer at ``now_ms``: sooner while the member
    waits (since ``since_ms``: for unreleased partitions, or for the assignment it asked for),
    within the window, else as scheduled."""
    fast = config.unreleased_heartbeat_ms
    if since_ms is None or not fast or now_ms >= since_ms + UNRELEASED_WINDOW_INTERVALS * link.interval_ms:
        return link.hb_next_ms
    return min(link.hb_next_ms, now_ms + fast)


# ------------------------------------------------------------------ reconciliation


def resolve(target: Target, names: Mapping[uuid.UUID, str]) -> tuple[frozenset[TopicPartition], int]:
    """The target's partitions by name, and how many could not be resolved (unknown topic id)."""
    out: set[TopicPartition] = set()
    unresolved = 0
    for item in target.partitions:
        name = names.get(item.topic_id)
        if name is None:
            unresolved += len(item.partitions)
        else:
            out.update(TopicPartition(name, p) for p in item.partitions)
    return frozenset(out), unresolved


def known_topics(round_: Round, names: Mapping[uuid.UUID, str], owned: frozenset[TopicPartition]) -> Round:
    """The round once the metadata names more topics: the last assignment applied is pending
    again if it names partitions of them that are not owned yet."""
    last = round_.last_target
    if round_.pending is None and last is not None and resolve(last, names)[0] - owned:
        return replace(round_, pending=last)
    return round_


def unread_assignment(resp: object) -> bool:
    """Whether ``resp``, an answer to a heartbeat the member no longer waits for (a duplicate,
    or one it gave up on), carries an assignment: the coordinator counts that assignment as
    delivered and does not repeat it, so the next heartbeat says everything again, owned
    partitions included; a coordinator that finds them different from the assignment sends it
    again (Kafka's client sends a full heartbeat after one whose answer it did not read)."""
    return (
        isinstance(resp, ConsumerGroupHeartbeatResponse)
        and resp.error is E.NONE
        and resp.assignment is not None
    )


def new_epoch_coming(state: S, epoch: int, sent_epoch: int, requests: Requests[Api]) -> bool:
    """After a commit sent at ``sent_epoch`` answered STALE_MEMBER_EPOCH: whether a newer epoch
    is here or can come (a member in the group heartbeats on; one preparing to leave only
    through the answer to a heartbeat still in flight)."""
    if epoch != sent_epoch or state is not S.PREPARE_LEAVING:
        return True
    return any(f.api is Api.HEARTBEAT for f in requests.inflight.values())


def dropped(round_: Round) -> Round:
    """The round once every request in flight is gone: an acknowledgement owed is due again
    (the commit and the assignment job forget their requests themselves: ``CommitGate``,
    ``AssignmentJob``)."""
    return replace(round_, ack_rid=None if round_.ack_rid is None else 0)


# ------------------------------------------------------------------ commit before revoking


def commit_action(
    rid: int, config: ConsumerMemberConfig, epoch: int, partitions: frozenset[TopicPartition]
) -> CommitOffsets:
    return CommitOffsets(
        request_id=rid,
        group_id=config.group_id,
        member_id=config.member_id,
        generation_id=epoch,
        group_instance_id=config.group_instance_id,
        partitions=sorted_tps(partitions),
    )


class Commit(enum.Enum):
    """What an OffsetCommit answer before a revocation means."""

    DONE = "revoke"
    UNKNOWN_MEMBER = "fenced"
    COORDINATOR = "coordinator lost"
    RETRY = "retry after the backoff"
    #: Sent with an epoch the coordinator has moved past: retried with the member's epoch once
    #: a heartbeat answer brought the new one (as Apache Kafka's consumer retries its commit
    #: before a revocation), else as GIVE_UP.
    STALE = "retry at the new epoch"
    GIVE_UP = "report, revoke anyway"


def commit_verdict(resp: OffsetCommitResponse) -> tuple[Commit, list[E]]:
    """The verdict on an OffsetCommit answer, and its error codes (sorted, no NONE)."""
    codes: list[E] = sorted({code for _, code in resp.errors if code is not E.NONE})
    if not codes:
        return Commit.DONE, codes
    if E.UNKNOWN_MEMBER_ID in codes:
        return Commit.UNKNOWN_MEMBER, codes
    if any(c in COORDINATOR_CODES for c in codes):
        return Commit.COORDINATOR, codes
    if all(c.retriable for c in codes):
        return Commit.RETRY, codes
    if E.STALE_MEMBER_EPOCH in codes and all(c.retriable or c is E.STALE_MEMBER_EPOCH for c in codes):
        return Commit.STALE, codes
    return Commit.GIVE_UP, codes


# ------------------------------------------------------------------ application events


def prepare_request(config: ConsumerMemberConfig, epoch: int) -> ConsumerGroupPrepareAssignmentRequest:
    return ConsumerGroupPrepareAssignmentRequest(
        group_id=config.group_id, member_id=config.member_id, member_epoch=epoch
    )


def install_request(
    config: ConsumerMemberConfig, epoch: int, resp: ConsumerGroupPrepareAssignmentResponse
) -> ConsumerGroupInstallAssignmentRequest | str:
    """The InstallAssignment for a PrepareAssignment answer: the named assignor run over the
    group's subscriptions; a string says why there is none to install (reported)."""
    assignor = next((a for a in config.client_assignors if a.name == resp.assignor_name), None)
    if assignor is None:
        return f"asked to run assignor {resp.assignor_name!r}, which this member does not have"
    try:
        members = compute_assignment(resp, assignor)
    except AssignmentProblem as exc:
        return f"client-side assignment not installed: {exc}"
    return ConsumerGroupInstallAssignmentRequest(
        group_id=config.group_id,
        member_id=config.member_id,
        member_epoch=epoch,
        group_epoch=resp.group_epoch,
        members=members,
    )


def bumped_reasons(reasons: Mapping[str, int]) -> dict[str, int]:
    """Every client-side assignor's ``Reason`` stepped (1..127, wrapping)."""
    return {name: value % MAX_REASON + 1 for name, value in reasons.items()}


def check_assignor_metadata(known: Mapping[str, AssignorMetadata], name: str, m: AssignorMetadata) -> None:
    if name not in known:
        raise LocalProtocolError(f"no client-side assignor named {name!r}")
    if not (-1 <= m.minimum_version <= m.metadata_version <= m.maximum_version and m.maximum_version >= 0):
        raise LocalProtocolError(f"assignor {name!r}: invalid metadata versions {m}")


# ------------------------------------------------------------------ timers


def next_deadline(
    state: S,
    config: ConsumerMemberConfig,
    *,
    membership: Membership,
    ownership: Ownership,
    link: Link,
    round_: Round,
    gate: Gate | None = None,
    requests: Requests[Api],
) -> int | None:
    """When ``poll`` next has something to do; ``None`` when only an event can move the member."""
    times = [f.deadline_ms for f in requests.inflight.values()]
    if state in _IDLE:
        return min(times) if times else None
    if gate is not None:
        times.append(gate.deadline_ms)
    if state in IN_GROUP and (membership.epoch > 0 or ownership.owned):
        times.append(link.hb_last_ok_ms + config.session_timeout_ms + 1)
    if not link.coordinator_known:
        if not requests.finds_in_flight():
            times.append(link.find_retry_ms)
        return min(times) if times else None
    if state is S.FENCED:
        times.append(link.hb_next_ms)
    if gate is not None and gate.commit_id is None:
        times.append(gate.retry_at_ms)
    if state in IN_GROUP and not requests.in_flight(Api.HEARTBEAT):
        times.append(link.hb_next_ms if round_.ack_rid != 0 else min(link.hb_next_ms, 0))
    return min(times) if times else None
