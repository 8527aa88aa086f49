"""The classic group member: a sans-IO state machine (KIP-429, KIP-341, KIP-568, KIP-814).

No IO and no clock: the driver passes ``now_ms`` to every call, executes the returned actions in
order and feeds back what happened as events. :class:`ClassicMember` is the one owner of the
member's state (frozen records, :mod:`.records`) and the only code that assigns it; the
per-phase logic is pure (:mod:`.phases`), legal transitions are in :mod:`.transitions`, error
reactions in :mod:`.reactions`, the leader's step in :mod:`.leader`; ``docs/membership.md`` tells
the whole story. The state, the action list and the requests in flight are held by the shared
:class:`~streamtasks.membership.common.kernel.Kernel` (composition), moved by trigger through
:data:`.transitions.TABLE`.

Components it holds own the rest: the commit before revoking (``CommitGate``), the coordinator
link and its timers (``CoordinatorLink``), the leader's follow-up (:mod:`.followup`).

Size note: this module is longer than the 600 lines aimed at. What is left is the classic
protocol's transitions with their effects (join, sync, apply, the error reactions); the next cut
is a component owning what the member owns (the listener calls and ``AssignmentChanged``, the
same for both members) and one applying a SyncGroup assignment, each a change of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from types import MappingProxyType
from typing import Any

from assignors.partition.types import RebalanceProtocol
from streamtasks.errors import LocalProtocolError
from streamtasks.membership.classic import phases as P
from streamtasks.membership.classic.actions import (
    Action,
    ListenerKind,
    Request,
    SendRequest,
)
from streamtasks.membership.classic.config import MemberConfig
from streamtasks.membership.classic.events import (
    CoordinatorDiscovered,
    CoordinatorLost,
    EnforceRebalance,
    Event,
    Leave,
    ListenerCompleted,
    MetadataUpdated,
    RequestFailed,
    ResponseReceived,
    Subscribe,
)
from streamtasks.membership.classic.followup import FollowUp
from streamtasks.membership.classic.metrics import RebalanceMetrics
from streamtasks.membership.classic.reactions import ANSWERS, Api, Reaction, reaction
from streamtasks.membership.classic.records import (
    Link,
    Membership,
    Ownership,
    Purpose,
    Rejoin,
    Round,
    Subscribed,
)
from streamtasks.membership.classic.states import HAS_GENERATION, REBALANCING
from streamtasks.membership.classic.states import MemberState as S
from streamtasks.membership.classic.transitions import TABLE
from streamtasks.membership.common import (
    CommitGate,
    CoordinatorLink,
    Kernel,
    ReadOnly,
    assignment_changed,
)
from streamtasks.membership.common.kernel import handler_for
from streamtasks.protocol.classic_group import (
    UNKNOWN_GENERATION,
    UNKNOWN_MEMBER_ID,
    DescribeGroupRequest,
    DescribeGroupResponse,
    HeartbeatResponse,
    JoinGroupResponse,
    OffsetCommitResponse,
    SyncGroupAssignment,
    SyncGroupResponse,
)
from streamtasks.protocol.errors import KafkaErrorCode
from topology.ids import TopicPartition

__all__ = ["ClassicMember"]

_FENCED = "fenced: partitions lost"
_ESCALATE = (Reaction.FATAL, Reaction.RESET_MEMBER, Reaction.RESET_GENERATION, Reaction.COORDINATOR)


class ClassicMember:
    """One member of a classic (JoinGroup/SyncGroup) consumer group.

    ``handle(event, now_ms)`` and ``poll(now_ms)`` return the actions to execute, in order;
    ``next_deadline_ms()`` says when ``poll`` has something to do. An event that is illegal in
    the current state raises :class:`~streamtasks.errors.LocalProtocolError`; anything wrong on
    the broker's or another member's side is reported as ``ErrorReported`` and never raises.
    """

    __slots__ = (
        "_config", "_followup", "_gate", "_k", "_link", "_membership", "_metrics",
        "_ownership", "_protocol", "_rejoin", "_round", "_sub",
    )  # fmt: skip

    def __init__(self, config: MemberConfig, now_ms: int = 0) -> None:
        self._config = config
        self._protocol = config.protocol
        self._k: Kernel[S, Api, Request, SendRequest] = Kernel(
            TABLE, S.UNJOINED if config.topics else S.CLOSED, SendRequest, ANSWERS
        )
        self._sub = Subscribed(topics=config.topics)
        self._membership = Membership()
        self._ownership = Ownership()
        self._rejoin = Rejoin()
        self._round = Round()
        self._followup = FollowUp(config)
        self._link = CoordinatorLink(Link.starting(now_ms), config, self._k)
        self._gate = CommitGate(self._k, Api.OFFSET_COMMIT)
        self._metrics = RebalanceMetrics(created_ms=now_ms)  # its own owner: counters only

    # ------------------------------------------------------------------ read-only view

    state = ReadOnly[S]("_k.state")
    member_id = ReadOnly[str]("_membership.member_id", "The coordinator's id for it ('': not joined yet).")
    generation = ReadOnly[int]("_membership.generation", "Of the last JoinGroup that succeeded (-1: none).")
    owned_generation = ReadOnly[int]("_ownership.owned_generation", "The generation of what it owns (-1).")
    protocol_name = ReadOnly[str | None]("_membership.protocol_name", "The assignor the coordinator chose.")
    owned_partitions = ReadOnly[frozenset[TopicPartition]]("_ownership.owned")
    assignment_user_data = ReadOnly[bytes]("_ownership.user_data", "Of the assignment it owns (b'': none).")
    is_leader = ReadOnly[bool]("_membership.is_leader", "The last JoinGroup answer named it the leader.")
    leader_id = ReadOnly[str]("_membership.leader_id", "The leader the last JoinGroup answer named.")
    group_topics = ReadOnly[tuple[str, ...]]("_followup.view.group_topics", "Leader: the group's topics.")
    subscription = ReadOnly[tuple[str, ...]]("_sub.topics")
    rejoin_needed = ReadOnly[bool]("_rejoin.needed", "A rejoin was asked for and is not sent yet.")
    coordinator_known = ReadOnly[bool]("_link.known")

    @property
    def config(self) -> MemberConfig:  # a property: the runtime's LoopMember protocol reads it
        return self._config

    @property
    def protocol(self) -> RebalanceProtocol | None:
        """The rebalance protocol this member follows; ``None`` once it left the group."""
        return None if self._k.state is S.CLOSED else self._protocol

    def metrics(self, now_ms: int) -> Mapping[str, float]:
        """KIP-429's rebalance metrics by name (see :mod:`.metrics`)."""
        return self._metrics.snapshot(now_ms)

    # ------------------------------------------------------------------ entry points

    def handle(self, event: Event, now_ms: int) -> list[Action]:
        """Feed one event; returns the actions to execute, in order."""
        self._k.start(event)
        handler_for(_ON, event)(self, event, now_ms)
        return self._k.flush()

    def poll(self, now_ms: int) -> list[Action]:
        """Run whatever is due: request timeouts, coordinator lookup, join / rejoin,
        heartbeats, commit retries and the commit deadline."""
        self._k.begin()
        if self._k.state in (S.CLOSED, S.FAILED):
            return self._k.flush()
        if any(f.deadline_ms <= now_ms for f in self._k.requests.inflight.values()):
            self._coordinator_lost(now_ms, "request timed out")
        if self._gate.expired(now_ms):
            self._report("offset commit before revocation timed out; revoking anyway", None)
            self._finish_gate(now_ms)
        if self._session_lapsed(now_ms):
            # librdkafka's rule: the coordinator (or the one the group moved to) may have
            # expired this member and handed its partitions to others, which would then be
            # processed twice; give them up (on_partitions_lost) and rejoin.
            silent = self._link.known and self._link.silent(now_ms, self._config.session_timeout_ms)
            self._report("no answer from the coordinator within the session timeout: partitions lost", None)
            self._reset(now_ms, member_id=False, trigger=_FENCED)
            if silent:
                self._coordinator_lost(now_ms, "no heartbeat answer within the session timeout")
        if not self._link.known:
            self._link.lookup(now_ms, self._membership.generation)
            return self._k.flush()
        if (
            self._k.state in HAS_GENERATION
            and self._membership.generation >= 0
            and self._link.silent(now_ms, self._config.session_timeout_ms)
        ):
            self._coordinator_lost(now_ms, "no heartbeat answer within the session timeout")
            return self._k.flush()
        self._maybe_followup(now_ms)
        self._maybe_join(now_ms)
        self._maybe_commit(now_ms)
        self._maybe_heartbeat(now_ms)
        return self._k.flush()

    def next_deadline_ms(self) -> int | None:
        """When ``poll`` next has something to do (possibly already past: poll now);
        ``None`` when only an event can move the member."""
        return P.next_deadline(
            self._k.state,
            self._config,
            generation=self._membership.generation,
            link=self._link.record,
            requests=self._k.requests,
            round_=self._round,
            gate=self._gate.gate,
            followup_due_ms=self._followup.due_ms,
            rejoin=self._rejoin,
        )

    def enforce_rebalance(self, reason: str = "") -> bool:
        """KIP-568: ask to rejoin on the next poll, keeping owned partitions.

        Returns ``True`` when this takes effect (the member is stable, or not in the group
        yet and about to join with current metadata) and ``False`` while a rebalance is in
        flight (no-op). Works for static members too. Raises ``LocalProtocolError`` when the
        member is not subscribed (closed, leaving, failed).
        """
        self._k.check_event(EnforceRebalance(reason=reason))
        if self._k.state in REBALANCING:
            return False
        if self._k.state is S.STABLE:
            self._request_rejoin(reason or "rebalance enforced by the application")
        return True

    # ------------------------------------------------------------------ bookkeeping

    def _send(self, api: Api, request: Request, now_ms: int) -> int:
        deadline = now_ms + P.request_timeout(self._config, api)
        return self._k.send(api, request, deadline, self._membership.generation)

    def _report(self, reason: str, code: KafkaErrorCode | None, *, fatal: bool = False) -> None:
        self._metrics.error_reported()
        self._k.report(reason, code, fatal=fatal)

    def _listener(self, kind: ListenerKind, partitions: frozenset[TopicPartition], now_ms: int) -> None:
        self._k.listener(kind, partitions, now_ms, self._membership.generation)

    def _set_owned(
        self,
        owned: frozenset[TopicPartition],
        generation: int,
        *,
        lost: frozenset[TopicPartition] = frozenset(),
    ) -> None:
        """``lost``: partitions given up without a revocation (``AssignmentChanged.lost``)."""
        o = self._ownership
        self._ownership = replace(o, owned=owned, owned_generation=generation)
        self._k.emit(assignment_changed(o.owned, owned, generation, o.user_data, lost))

    def _session_lapsed(self, now_ms: int) -> bool:
        """Whether the member is in a generation the coordinator has not vouched for within a
        session timeout (lookups and unanswered requests do not count)."""
        return (
            self._k.state in HAS_GENERATION
            and self._membership.generation >= 0
            and now_ms - self._link.record.session_ok_ms > self._config.session_timeout_ms
        )

    def _vouched(self, now_ms: int) -> None:
        """The coordinator answered for this membership: the session is alive at ``now_ms``."""
        self._link.change(hb_last_ok_ms=now_ms, session_ok_ms=now_ms)

    def _request_rejoin(self, reason: str) -> None:
        if not self._rejoin.needed:
            self._rejoin = Rejoin(needed=True, reason=reason)

    def _lose_all(self, now_ms: int) -> None:
        """KIP-429 1d: the member fell out of the group; every owned partition is lost."""
        self._ownership = replace(self._ownership, user_data=b"")  # no assignment any more
        if self._ownership.owned:
            self._listener(ListenerKind.LOST, self._ownership.owned, now_ms)
            self._set_owned(frozenset(), UNKNOWN_GENERATION, lost=self._ownership.owned)

    def _reset(self, now_ms: int, *, member_id: bool, trigger: str) -> None:
        """Reset generation (and member id): partitions lost, rejoin from scratch."""
        self._lose_all(now_ms)
        m = self._membership
        self._membership = replace(
            m,
            generation=UNKNOWN_GENERATION,
            member_id=UNKNOWN_MEMBER_ID if member_id else m.member_id,
            is_leader=False,
        )
        self._k.keep({None})
        self._new_round()
        if self._k.state is S.LEAVING:
            # ILLEGAL_GENERATION keeps the member id: the coordinator still counts this member,
            # so tell it we are gone instead of leaving it to the session timeout.
            self._send_leave("the application left", now_ms)
            self._close(f"{trigger}, left")
        else:
            self._k.goto(trigger)

    def _fail(self, now_ms: int, reason: str, code: KafkaErrorCode | None) -> None:
        self._lose_all(now_ms)
        self._report(reason, code, fatal=True)
        self._new_round()  # FAILED: nothing of the round is read again; Leave closes
        self._k.keep(())
        self._metrics.rebalance_abandoned()
        self._membership = replace(self._membership, is_leader=False)
        self._k.goto("fatal error")

    def _new_round(self) -> None:
        self._round = Round()
        self._gate.close()
        self._followup.reset()

    def _close(self, trigger: str) -> None:
        self._new_round()
        self._k.keep({Api.LEAVE_GROUP})
        self._membership = replace(
            self._membership, member_id=UNKNOWN_MEMBER_ID, generation=UNKNOWN_GENERATION, is_leader=False
        )
        self._rejoin = replace(self._rejoin, needed=False)
        self._metrics.rebalance_abandoned()
        self._k.goto(trigger)

    def _coordinator_lost(self, now_ms: int, reason: str) -> None:
        """Kafka's ``markCoordinatorUnknown``: every request in flight fails; membership and
        owned partitions are kept; a SyncGroup in flight means the rebalance must restart."""
        self._link.lost(now_ms, join_retry_ms=now_ms + self._config.retry_backoff_ms)
        self._k.keep(())
        self._gate.resend(now_ms)
        if self._k.state in (S.JOINING, S.SYNCING):
            self._round = replace(self._round, join_sent=False)
            self._metrics.rebalance_failed(now_ms)
            if self._k.state is S.SYNCING:
                self._k.goto("SyncGroup failed: rejoin")
        if reason:
            self._report(f"coordinator unknown: {reason}", None)

    def _send_leave(self, reason: str, now_ms: int) -> None:
        request = P.leave_request(self._config, self._membership, self._link.record, reason)
        if request is not None:
            self._send(Api.LEAVE_GROUP, request, now_ms)

    def _backoff_join(self, now_ms: int) -> None:
        self._link.change(join_retry_ms=now_ms + self._config.retry_backoff_ms)

    # ------------------------------------------------------------------ coordinator and application events

    def _on_discovered(self, event: CoordinatorDiscovered, now_ms: int) -> None:
        if not self._k.discovered(event.request_id):
            return
        if self._link.known or self._k.state in (S.CLOSED, S.FAILED):
            return
        self._link.found(now_ms, hb_last_ok_ms=now_ms)

    def _on_lost(self, event: CoordinatorLost, now_ms: int) -> None:
        self._coordinator_lost(now_ms, event.reason or "coordinator lost")

    def _on_subscribe(self, event: Subscribe, now_ms: int) -> None:
        if not event.topics:
            raise LocalProtocolError("Subscribe needs at least one topic; use Leave to unsubscribe")
        if self._k.state is S.CLOSED:
            self._sub = replace(self._sub, topics=event.topics)
            self._k.goto("subscribe")
            return
        if event.topics == self._sub.topics:
            return
        self._sub = replace(self._sub, topics=event.topics)
        if self._k.state is not S.UNJOINED:
            self._request_rejoin("subscription changed")

    def _on_leave(self, event: Leave, now_ms: int) -> None:
        if self._k.state is S.FAILED:
            self._close("leave")
            return
        self._k.keep({None})
        self._round = replace(self._round, join_sent=False)
        self._gate.close()
        owned = self._ownership.owned
        if owned and self._membership.generation >= 0 and self._membership.member_id:
            self._k.goto("leave: commit before revoking")
            self._start_gate(Purpose.LEAVE, owned, now_ms)
            return
        self._lose_all(now_ms)
        self._send_leave(event.reason or "the application left", now_ms)
        self._close("leave")

    def _on_metadata(self, event: MetadataUpdated, now_ms: int) -> None:
        counts = event.partitions_per_topic
        self._sub = replace(self._sub, metadata=counts)
        if self._k.state in (S.CLOSED, S.FAILED):
            return
        owned = self._ownership.owned
        gone = frozenset(tp for tp in owned if tp.partition >= counts.get(tp.topic, 0))
        if gone:  # KIP-429 1b: owned partitions that no longer exist are lost
            self._listener(ListenerKind.LOST, gone, now_ms)
            self._set_owned(owned - gone, self._ownership.owned_generation, lost=gone)
            self._gate.without(gone)
        leader = self._membership.is_leader
        if leader and self._k.state is S.STABLE and self._followup.metadata_changed(self._sub.metadata):
            self._request_rejoin("leader saw a partition count change")

    def _on_listener_completed(self, event: ListenerCompleted, now_ms: int) -> None:
        found = self._k.listener_completed(event)
        if found is None:  # reported twice, or too old to remember
            return
        kind, started = found
        self._metrics.listener_completed(kind, now_ms - started)
        if event.failed:
            self._report(f"rebalance listener {kind.value} raised; the assignment change stands", None)

    # ------------------------------------------------------------------ responses

    def _on_response(self, event: ResponseReceived, now_ms: int) -> None:
        pending = self._k.answer(event.request_id, event.response)
        if pending is None:
            self._metrics.stale_response()
            return
        resp = event.response
        if isinstance(resp, JoinGroupResponse):
            self._on_join(resp, now_ms)
        elif isinstance(resp, SyncGroupResponse):
            self._on_sync(resp, now_ms)
        elif isinstance(resp, HeartbeatResponse):
            self._on_heartbeat(resp, pending.generation, now_ms)
        elif isinstance(resp, OffsetCommitResponse):
            self._on_commit(resp, now_ms)
        elif isinstance(resp, DescribeGroupResponse):
            self._on_describe(resp, pending.generation, now_ms)
        # LeaveGroupResponse: nothing to do, the member is gone either way

    def _on_failed(self, event: RequestFailed, now_ms: int) -> None:
        pending = self._k.fail(event.request_id)
        if pending is None:
            self._metrics.stale_response()
            return
        if pending.api is None:
            self._link.lookup_failed(now_ms)
            return
        if pending.api in (Api.LEAVE_GROUP, Api.DESCRIBE_GROUP):
            return  # gone either way; the follow-up the describe could cancel stays armed
        self._coordinator_lost(now_ms, f"{pending.api.value} failed: {event.error.name}")

    def _on_reset_or_other(self, api: Api, act: Reaction, code: KafkaErrorCode, now_ms: int) -> None:
        """JoinGroup / SyncGroup answered an error other than REJOIN, or OffsetCommit one of
        ``_ESCALATE``: reset (1d), fail, forget the coordinator, or rejoin after the backoff."""
        if act in (Reaction.RESET_MEMBER, Reaction.RESET_GENERATION):  # 1d
            self._reset(now_ms, member_id=act is Reaction.RESET_MEMBER, trigger=_FENCED)
            self._maybe_join(now_ms)
        elif act is Reaction.FATAL:
            self._fail(now_ms, f"{api.value} failed with {code.name}", code)
        elif act is Reaction.COORDINATOR:
            self._coordinator_lost(now_ms, f"{api.value} answered {code.name}")
        else:
            if act is Reaction.REPORT:
                self._report(f"{api.value} failed with {code.name}; rejoining", code)
            self._backoff_join(now_ms)
            if self._k.state is S.SYNCING:
                self._k.goto("SyncGroup failed: rejoin")

    # ------------------------------------------------------------------ joining

    def _maybe_join(self, now_ms: int) -> None:
        if not P.wants_join(self._k.state, self._round, self._rejoin):
            return
        if not self._link.known or now_ms < self._link.record.join_retry_ms:
            return
        if self._k.state in (S.UNJOINED, S.STABLE) and self._round.needs_join_prepare:
            self._metrics.rebalance_started(now_ms)
            self._membership = replace(self._membership, is_leader=False)
            self._followup.rejoining()
            if self._membership.generation < 0:
                self._lose_all(now_ms)
            revoking = P.join_revocation(self._protocol, self._ownership.owned, self._sub.topics)
            if revoking:  # KIP-429 1a, and EAGER's revoke-everything
                self._k.goto("rejoin: commit before revoking")
                self._start_gate(Purpose.JOIN, revoking, now_ms)
                return
            self._round = replace(self._round, needs_join_prepare=False)
        self._send_join(now_ms)

    def _send_join(self, now_ms: int) -> None:
        if self._k.state is not S.JOINING:
            trigger = "join" if self._k.state is S.UNJOINED else "rejoin"
            self._k.goto(f"{trigger}: nothing to revoke, JoinGroup sent")
        if not self._link.known or now_ms < self._link.record.join_retry_ms:
            return
        self._metrics.rebalance_started(now_ms)
        request = P.join_request(
            self._config, self._sub.topics, self._membership, self._ownership, self._rejoin.reason
        )
        self._send(Api.JOIN_GROUP, request, now_ms)
        self._round = replace(self._round, join_sent=True)
        self._followup.join_sent()
        self._rejoin = Rejoin()

    def _on_join(self, resp: JoinGroupResponse, now_ms: int) -> None:
        self._round = replace(self._round, join_sent=False)
        act = reaction(Api.JOIN_GROUP, resp.error)
        if act is Reaction.PROCEED:
            self._joined(resp, now_ms)
            return
        if act is Reaction.MEMBER_ID_REQUIRED:  # 1e
            self._membership = replace(self._membership, member_id=resp.member_id)
            self._send_join(now_ms)
            return
        self._metrics.rebalance_failed(now_ms)
        if act is Reaction.REJOIN:
            self._send_join(now_ms)
        else:
            self._on_reset_or_other(Api.JOIN_GROUP, act, resp.error, now_ms)

    def _joined(self, resp: JoinGroupResponse, now_ms: int) -> None:
        problem = P.join_problem(self._config, self._membership, resp)
        if problem is not None:
            self._metrics.rebalance_failed(now_ms)
            self._report(problem + "; rejoining", None)
            self._backoff_join(now_ms)
            return
        missed = P.missed_generations(self._config, self._membership, self._ownership.owned, resp)
        # The JoinGroup the leader answers claimed what is owned now; if that is lost here, the
        # leader may still withhold it from others for a revocation this member cannot make.
        self._followup.claimed(self._ownership.owned if missed is not None else frozenset())
        if missed is not None:
            self._report(missed, None)
            self._lose_all(now_ms)
        self._membership = P.joined(self._membership, resp)
        self._vouched(now_ms)
        self._link.beat_at(now_ms + self._config.heartbeat_interval_ms)
        assignments: tuple[SyncGroupAssignment, ...] = ()
        if self._membership.is_leader:
            assignments, problems = self._followup.lead(
                self._membership.protocol_name, self._sub.metadata, resp
            )
            for leader_problem in problems:
                self._report(f"leader: {leader_problem}", None)
        request = P.sync_request(self._config, self._membership, assignments)
        self._k.goto("JoinGroup ok: SyncGroup sent")
        self._send(Api.SYNC_GROUP, request, now_ms)

    # ------------------------------------------------------------------ syncing

    def _on_sync(self, resp: SyncGroupResponse, now_ms: int) -> None:
        act = reaction(Api.SYNC_GROUP, resp.error)
        if act is Reaction.PROCEED:
            self._synced(resp, now_ms)
            return
        self._metrics.rebalance_failed(now_ms)
        if act is Reaction.REJOIN:  # 1c: keep generation and partitions
            self._k.goto("SyncGroup failed: rejoin")
            self._send_join(now_ms)
        else:
            self._on_reset_or_other(Api.SYNC_GROUP, act, resp.error, now_ms)

    def _synced(self, resp: SyncGroupResponse, now_ms: int) -> None:
        read = P.read_assignment(resp, self._membership.protocol_name, self._sub.topics)
        if isinstance(read, str):
            self._metrics.rebalance_failed(now_ms)
            self._report(read + "; rejoining", None)
            self._backoff_join(now_ms)
            self._k.goto("SyncGroup failed: rejoin")
            return
        assigned, user_data = read
        self._vouched(now_ms)
        revoked = self._ownership.owned - assigned
        if revoked:  # KIP-429 3c: commit, revoke, then rejoin
            self._k.goto("SyncGroup ok: commit before revoking")
            self._start_gate(Purpose.SYNC, revoked, now_ms, assignment=assigned, user_data=user_data)
            return
        self._k.goto("SyncGroup ok: assignment applied")
        self._apply(assigned, frozenset(), now_ms, user_data)

    def _apply(
        self,
        assigned: frozenset[TopicPartition],
        revoked: frozenset[TopicPartition],
        now_ms: int,
        user_data: bytes,
    ) -> None:
        """KIP-429 listener order: revoked (if any) → assignment → assigned (always).
        ``user_data``: the assignment's user data, carried by the AssignmentChanged."""
        added = assigned - self._ownership.owned
        if revoked:
            self._listener(ListenerKind.REVOKED, revoked, now_ms)
        generation = self._membership.generation
        self._ownership = replace(self._ownership, user_data=user_data)
        self._set_owned(assigned, generation)
        self._ownership = replace(
            self._ownership, previous=P.sorted_tps(assigned), previous_generation=generation
        )
        self._listener(ListenerKind.ASSIGNED, added, now_ms)
        self._metrics.rebalance_completed(now_ms)
        probe = self._config.followup_heartbeat_ms
        if probe and self._protocol is RebalanceProtocol.COOPERATIVE:
            # Hear of a follow-up rebalance (another member revoked and rejoined) soon, not an
            # interval from now: the follow-up's join waits for every member.
            self._link.beat_by(now_ms + probe)
        then = self._followup.applied(
            assigned, revoked, self._membership.is_leader, self._sub.metadata, now_ms
        )
        self._round = replace(self._round, needs_join_prepare=True)
        for reason in then.rejoin:
            self._request_rejoin(reason)
        if then.describe and self._link.known:
            self._send(Api.DESCRIBE_GROUP, DescribeGroupRequest(group_id=self._config.group_id), now_ms)
        if then.join_now:
            self._maybe_join(now_ms)

    def _on_describe(self, resp: DescribeGroupResponse, generation: int, now_ms: int) -> None:
        """The skip-assignment leader's check (:meth:`.FollowUp.described`)."""
        if generation != self._membership.generation:
            return  # a rebalance came since: it is the follow-up
        problem = self._followup.described(resp, now_ms)
        if problem is not None:
            self._report(problem, None if resp.error is KafkaErrorCode.NONE else resp.error)

    # ------------------------------------------------------------------ commit before revoking

    def _start_gate(
        self,
        purpose: Purpose,
        partitions: frozenset[TopicPartition],
        now_ms: int,
        assignment: frozenset[TopicPartition] = frozenset(),
        user_data: bytes = b"",
    ) -> None:
        deadline = now_ms + self._config.rebalance_timeout_ms
        self._gate.open(purpose, partitions, now_ms, deadline, assignment=assignment, user_data=user_data)
        self._maybe_commit(now_ms)

    def _maybe_followup(self, now_ms: int) -> None:
        if self._k.state is S.STABLE and self._followup.force(now_ms):
            self._request_rejoin("leader withheld partitions and no follow-up rebalance started")

    def _maybe_commit(self, now_ms: int) -> None:
        gate = self._gate.due(now_ms, self._link.known)
        if gate is None:
            return
        if not gate.partitions:
            self._finish_gate(now_ms)
            return
        rid = self._gate.commit(now_ms + self._config.request_timeout_ms, self._membership.generation)
        self._k.emit(P.commit_action(rid, self._config, self._membership, gate.partitions))

    def _on_commit(self, resp: OffsetCommitResponse, now_ms: int) -> None:
        if self._gate.answered() is None:
            return
        codes = sorted({code for _, code in resp.errors if code is not KafkaErrorCode.NONE})
        if not codes:
            self._finish_gate(now_ms)
            return
        act, code = P.commit_verdict(codes)
        if act is Reaction.RETRY:
            self._gate.retry_at(now_ms + self._config.retry_backoff_ms)
        elif act in _ESCALATE:
            self._on_reset_or_other(Api.OFFSET_COMMIT, act, code, now_ms)
        else:
            self._report(f"offset commit failed with {[c.name for c in codes]}; revoking anyway", code)
            self._finish_gate(now_ms)

    def _finish_gate(self, now_ms: int) -> None:
        gate = self._gate.finish()
        owned = self._ownership.owned
        if gate.purpose is Purpose.SYNC:
            self._k.goto("commit done: revoked, assignment applied")
            self._apply(gate.assignment, gate.partitions & owned, now_ms, gate.user_data)
            return
        revoked = gate.partitions & owned
        if revoked:
            self._listener(ListenerKind.REVOKED, revoked, now_ms)
            self._set_owned(owned - revoked, self._ownership.owned_generation)
        if gate.purpose is Purpose.LEAVE:
            self._send_leave("the application left", now_ms)
            self._close("commit done: revoked, left")
            return
        self._round = replace(self._round, needs_join_prepare=False)
        self._k.goto("commit done: revoked, JoinGroup sent")
        self._send_join(now_ms)

    # ------------------------------------------------------------------ heartbeat

    def _maybe_heartbeat(self, now_ms: int) -> None:
        m = self._membership
        if self._k.state not in HAS_GENERATION or m.generation < 0 or not m.member_id:
            return
        if self._k.requests.in_flight(Api.HEARTBEAT) or now_ms < self._link.record.hb_next_ms:
            return
        self._send(Api.HEARTBEAT, P.heartbeat_request(self._config, m), now_ms)
        self._link.beat_at(now_ms + self._config.heartbeat_interval_ms)

    def _on_heartbeat(self, resp: HeartbeatResponse, sent_generation: int, now_ms: int) -> None:
        act = reaction(Api.HEARTBEAT, resp.error)
        if act is Reaction.PROCEED:
            self._vouched(now_ms)
            return
        current = sent_generation == self._membership.generation and self._k.state in HAS_GENERATION
        if act is Reaction.FATAL:
            self._fail(now_ms, f"Heartbeat failed with {resp.error.name}", resp.error)
        elif act is Reaction.REJOIN:  # 1c
            self._vouched(now_ms)
            if self._k.state is S.STABLE:
                self._request_rejoin("the group is rebalancing")
        elif act in (Reaction.RESET_MEMBER, Reaction.RESET_GENERATION):  # 1d
            if current:
                self._reset(now_ms, member_id=act is Reaction.RESET_MEMBER, trigger=_FENCED)
        elif act is Reaction.COORDINATOR:
            self._coordinator_lost(now_ms, f"Heartbeat answered {resp.error.name}")
        else:
            self._link.beat_at(now_ms + self._config.retry_backoff_ms)
            if act is Reaction.REPORT:
                self._report(f"Heartbeat failed with {resp.error.name}", resp.error)


#: What :meth:`ClassicMember.handle` calls for each event type.
_ON: Mapping[type, Callable[[ClassicMember, Any, int], object]] = MappingProxyType(
    {
        ResponseReceived: ClassicMember._on_response,
        RequestFailed: ClassicMember._on_failed,
        CoordinatorDiscovered: ClassicMember._on_discovered,
        CoordinatorLost: ClassicMember._on_lost,
        Subscribe: ClassicMember._on_subscribe,
        EnforceRebalance: lambda member, event, _: member.enforce_rebalance(event.reason),
        Leave: ClassicMember._on_leave,
        MetadataUpdated: ClassicMember._on_metadata,
        ListenerCompleted: ClassicMember._on_listener_completed,
    }
)
