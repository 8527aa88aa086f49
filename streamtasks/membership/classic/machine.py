"""The classic group member: a sans-IO state machine (KIP-429, KIP-341, KIP-568, KIP-814).

No IO and no clock: the driver passes ``now_ms`` to every call, executes the returned actions in order and
feeds back what happened as events. :class:`ClassicMember` is the one owner of the member's state (frozen
records, :mod:`.records`) and the only code that assigns it; the per-phase logic is pure (:mod:`.phases`),
legal transitions are in :mod:`.transitions`, error reactions in :mod:`.reactions`, the leader's step in
:mod:`.leader`, a lapsed member's question in :mod:`.readopt` (``docs/membership.md``). Components it holds
own the rest: state, actions, requests in flight (``Kernel``, moved through :data:`.transitions.TABLE`),
what it owns (``Holdings``), the commit before revoking (``CommitGate``), the link (``CoordinatorLink``),
SyncGroup (``SyncApply``), the follow-up; its read-only view is :class:`.view.MemberView`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from types import MappingProxyType
from typing import Any

from streamtasks.errors import LocalProtocolError
from streamtasks.membership.classic import events as ev
from streamtasks.membership.classic import phases as P
from streamtasks.membership.classic.actions import Action, Request, SendRequest
from streamtasks.membership.classic.config import MemberConfig
from streamtasks.membership.classic.followup import FollowUp
from streamtasks.membership.classic.metrics import RebalanceMetrics
from streamtasks.membership.classic.reactions import ANSWERS, Api, Reaction, reaction
from streamtasks.membership.classic.readopt import Lapsed, lapsed
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
from streamtasks.membership.classic.sync_apply import SyncApply
from streamtasks.membership.classic.transitions import TABLE
from streamtasks.membership.classic.view import MemberView
from streamtasks.membership.common import CommitGate, CoordinatorLink, Holdings, Kernel
from streamtasks.membership.common.kernel import handler_for
from streamtasks.protocol import classic_group as cg
from streamtasks.protocol.classic_group import UNKNOWN_GENERATION
from streamtasks.protocol.errors import KafkaErrorCode
from topology.ids import TopicPartition

__all__ = ["ClassicMember"]

_FENCED = "fenced: partitions lost"
_ESCALATE = (Reaction.FATAL, Reaction.RESET_MEMBER, Reaction.RESET_GENERATION, Reaction.COORDINATOR)
_TPs = frozenset[TopicPartition]


class ClassicMember(MemberView):
    """One member of a classic (JoinGroup/SyncGroup) consumer group.

    ``handle(event, now_ms)`` and ``poll(now_ms)`` return the actions to execute, in order;
    ``next_deadline_ms()`` says when ``poll`` has something to do. An event that is illegal in
    the current state raises :class:`~streamtasks.errors.LocalProtocolError`; anything wrong on
    the broker's or another member's side is reported as ``ErrorReported`` and never raises.
    """

    __slots__ = (
        "_config", "_followup", "_gate", "_held", "_k", "_lapsed", "_link", "_membership", "_metrics",
        "_protocol", "_rejoin", "_round", "_sub", "_sync",
    )  # fmt: skip

    def __init__(self, config: MemberConfig, now_ms: int = 0) -> None:
        self._config = config
        self._protocol = config.protocol
        self._k: Kernel[S, Api, Request, SendRequest] = Kernel(
            TABLE, S.UNJOINED if config.topics else S.CLOSED, SendRequest, ANSWERS
        )
        self._sub = Subscribed(topics=config.topics)
        self._membership = Membership()
        self._rejoin = Rejoin()
        self._round = Round()
        self._followup = FollowUp(config)
        self._link = CoordinatorLink(Link.starting(now_ms), config, self._k)
        self._gate = CommitGate(self._k, Api.OFFSET_COMMIT)
        self._held = Holdings(self._k, Ownership(), cg.UNKNOWN_GENERATION)
        self._metrics = RebalanceMetrics(created_ms=now_ms)  # its own owner: counters only
        self._sync = SyncApply(config, self._held, self._followup, self._link, self._metrics)
        self._lapsed: Lapsed | None = None  # what the session rule ended, until the coordinator says

    # ------------------------------------------------------------------ entry points

    def handle(self, event: ev.Event, now_ms: int) -> list[Action]:
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
            self._coordinator_lost(now_ms, "request timed out", silent=True)
        if self._gate.expired(now_ms):
            self._report("offset commit before revocation timed out; revoking anyway", None)
            self._finish_gate(now_ms)
        if P.session_lapsed(self._k.state, self._membership, self._link.record, self._config, now_ms):
            silent = self._link.known and self._link.silent(now_ms, self._config.session_timeout_ms)
            self._report("no answer from the coordinator within the session timeout: partitions lost", None)
            self._lapsed = lapsed(self._k.state, self._membership, self._held.record)
            self._reset(now_ms, member_id=False, trigger=_FENCED)
            if silent:
                self._coordinator_lost(now_ms, "no heartbeat answer within the session timeout", silent=True)
        if not self._link.known:
            self._link.lookup(now_ms, self._membership.generation)
            return self._k.flush()
        if (
            self._k.state in HAS_GENERATION
            and self._membership.generation >= 0
            and self._link.silent(now_ms, self._config.session_timeout_ms)
        ):
            self._coordinator_lost(now_ms, "no heartbeat answer within the session timeout", silent=True)
            return self._k.flush()
        if self._k.state is S.STABLE and self._followup.force(now_ms):
            self._request_rejoin("leader withheld partitions and no follow-up rebalance started")
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
        self._k.check_event(ev.EnforceRebalance(reason=reason))
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

    def _vouched(self, now_ms: int) -> None:
        """The coordinator answered for this membership: the session is alive at ``now_ms``."""
        self._link.change(hb_last_ok_ms=now_ms, session_ok_ms=now_ms)

    def _request_rejoin(self, reason: str) -> None:
        if not self._rejoin.needed:
            self._rejoin = Rejoin(needed=True, reason=reason)

    def _reset(self, now_ms: int, *, member_id: bool, trigger: str) -> None:
        """Reset generation (and member id): partitions lost, rejoin from scratch."""
        self._held.lose_all(now_ms, self._membership.generation)
        self._membership = P.reset(self._membership, member_id=member_id)
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
        self._held.lose_all(now_ms, self._membership.generation)
        self._report(reason, code, fatal=True)
        self._new_round()  # FAILED: nothing of the round is read again; Leave closes
        self._k.keep(())
        self._metrics.rebalance_abandoned()
        self._membership = replace(self._membership, is_leader=False)
        self._lapsed = None
        self._k.goto("fatal error")

    def _new_round(self) -> None:
        self._round = Round()
        self._gate.close()
        self._followup.reset()

    def _close(self, trigger: str) -> None:
        self._new_round()
        self._k.keep({Api.LEAVE_GROUP})
        self._membership = P.reset(self._membership, member_id=True)
        self._rejoin, self._lapsed = replace(self._rejoin, needed=False), None
        self._metrics.rebalance_abandoned()
        self._k.goto(trigger)

    def _coordinator_lost(self, now_ms: int, reason: str, *, silent: bool = False) -> None:
        """Kafka's ``markCoordinatorUnknown``: every request in flight fails; membership and
        owned partitions are kept; a SyncGroup in flight means the rebalance must restart.
        ``silent``: the coordinator answered nothing in time, its connection is dropped."""
        self._link.lost(now_ms, silent=silent, join_retry_ms=now_ms + self._config.retry_backoff_ms)
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

    def _on_discovered(self, event: ev.CoordinatorDiscovered, now_ms: int) -> None:
        known = self._link.known or self._k.state in (S.CLOSED, S.FAILED)
        if self._k.discovered(event.request_id) and not known:
            self._link.found(now_ms, hb_last_ok_ms=now_ms)

    def _on_lost(self, event: ev.CoordinatorLost, now_ms: int) -> None:
        self._coordinator_lost(now_ms, event.reason or "coordinator lost")

    def _on_subscribe(self, event: ev.Subscribe, now_ms: int) -> None:
        if not event.topics:
            raise LocalProtocolError("Subscribe needs at least one topic; use Leave to unsubscribe")
        if self._k.state is S.CLOSED:
            self._sub = replace(self._sub, topics=event.topics)
            self._k.goto("subscribe")
            return
        if event.topics == self._sub.topics:
            return
        self._sub, self._lapsed = replace(self._sub, topics=event.topics), None
        if self._k.state is not S.UNJOINED:
            self._request_rejoin("subscription changed")

    def _on_leave(self, event: ev.Leave, now_ms: int) -> None:
        if self._k.state is S.FAILED:
            self._close("leave")
            return
        self._k.keep({None})
        self._round = replace(self._round, join_sent=False)
        self._gate.close()
        owned = self._held.owned
        if self._k.state in (S.JOINING, S.SYNCING):  # a join / sync in flight is no silence
            self._link.change(hb_last_ok_ms=now_ms, session_ok_ms=now_ms)  # (session_checked)
        if owned and self._membership.generation >= 0 and self._membership.member_id:
            self._k.goto("leave: commit before revoking")
            self._start_gate(Purpose.LEAVE, owned, now_ms)
            return
        self._held.lose_all(now_ms, self._membership.generation)
        self._send_leave(event.reason or "the application left", now_ms)
        self._close("leave")

    def _on_metadata(self, event: ev.MetadataUpdated, now_ms: int) -> None:
        counts = event.partitions_per_topic
        self._sub = replace(self._sub, metadata=counts)
        if self._k.state in (S.CLOSED, S.FAILED):
            return
        # KIP-429 1b: owned partitions that no longer exist are lost
        self._gate.without(self._held.lose_gone(counts, now_ms, self._membership.generation))
        leader = self._membership.is_leader
        if leader and self._k.state is S.STABLE and self._followup.metadata_changed(self._sub.metadata):
            self._request_rejoin("leader saw a partition count change")

    def _on_listener_completed(self, event: ev.ListenerCompleted, now_ms: int) -> None:
        found = self._k.listener_completed(event)
        if found is None:  # reported twice, or too old to remember
            return
        kind, started = found
        self._metrics.listener_completed(kind, now_ms - started)
        if event.failed:
            self._report(f"rebalance listener {kind.value} raised; the assignment change stands", None)

    # ------------------------------------------------------------------ responses

    def _on_response(self, event: ev.ResponseReceived, now_ms: int) -> None:
        pending = self._k.answer(event.request_id, event.response)
        if pending is None:
            self._metrics.stale_response()
            return
        resp = event.response
        if isinstance(resp, cg.JoinGroupResponse):
            self._on_join(resp, now_ms)
        elif isinstance(resp, cg.SyncGroupResponse):
            self._on_sync(resp, now_ms)
        elif isinstance(resp, cg.HeartbeatResponse) and self._k.state is S.UNJOINED:
            self._on_probe(resp, now_ms)
        elif isinstance(resp, cg.HeartbeatResponse):
            self._on_heartbeat(resp, pending.generation, now_ms)
        elif isinstance(resp, cg.OffsetCommitResponse):
            self._on_commit(resp, now_ms)
        elif isinstance(resp, cg.DescribeGroupResponse):
            self._on_describe(resp, pending.generation, now_ms)
        # LeaveGroupResponse: nothing to do, the member is gone either way

    def _on_failed(self, event: ev.RequestFailed, now_ms: int) -> None:
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
        if self._k.state is S.UNJOINED and self._lapsed is not None:  # ask first (.readopt)
            if not self._k.requests.in_flight(Api.HEARTBEAT):
                self._send(Api.HEARTBEAT, P.heartbeat_request(self._config, self._lapsed.membership), now_ms)
            return
        if self._k.state in (S.UNJOINED, S.STABLE) and self._round.needs_join_prepare:
            self._metrics.rebalance_started(now_ms)
            self._membership = replace(self._membership, is_leader=False)
            self._followup.rejoining()
            if self._membership.generation < 0:
                self._held.lose_all(now_ms, self._membership.generation)
            revoking = P.join_revocation(self._protocol, self._held.owned, self._sub.topics)
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
            self._config, self._sub.topics, self._membership, self._held.record, self._rejoin.reason
        )
        self._send(Api.JOIN_GROUP, request, now_ms)
        self._round = replace(self._round, join_sent=True)
        self._followup.join_sent()
        self._rejoin, self._lapsed = Rejoin(), None

    def _on_join(self, resp: cg.JoinGroupResponse, now_ms: int) -> None:
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

    def _joined(self, resp: cg.JoinGroupResponse, now_ms: int) -> None:
        problem = P.join_problem(self._config, self._membership, resp)
        if problem is not None:
            self._metrics.rebalance_failed(now_ms)
            self._report(problem + "; rejoining", None)
            self._backoff_join(now_ms)
            return
        missed = P.missed_generations(self._config, self._membership, self._held.owned, resp)
        # The JoinGroup the leader answers claimed what is owned now; if that is lost here, the
        # leader may still withhold it from others for a revocation this member cannot make.
        self._followup.claimed(self._held.owned if missed is not None else frozenset())
        if missed is not None:
            self._report(missed, None)
            self._held.lose_all(now_ms, self._membership.generation)
        self._membership = P.joined(self._membership, resp)
        self._vouched(now_ms)
        self._link.beat_at(now_ms + self._config.heartbeat_interval_ms)
        request, problems = self._sync.request(self._membership, self._sub.metadata, resp)
        for leader_problem in problems:
            self._report(f"leader: {leader_problem}", None)
        self._k.goto("JoinGroup ok: SyncGroup sent")
        self._send(Api.SYNC_GROUP, request, now_ms)

    # ------------------------------------------------------------------ syncing

    def _on_sync(self, resp: cg.SyncGroupResponse, now_ms: int) -> None:
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

    def _synced(self, resp: cg.SyncGroupResponse, now_ms: int) -> None:
        read = self._sync.read(resp, self._membership, self._sub.topics, now_ms)
        if isinstance(read, str):
            self._report(read + "; rejoining", None)
            self._backoff_join(now_ms)
            self._k.goto("SyncGroup failed: rejoin")
            return
        assigned, user_data = read
        self._vouched(now_ms)
        revoked = self._held.owned - assigned
        if revoked:  # KIP-429 3c: commit, revoke, then rejoin
            self._k.goto("SyncGroup ok: commit before revoking")
            self._start_gate(Purpose.SYNC, revoked, now_ms, assignment=assigned, user_data=user_data)
            return
        self._k.goto("SyncGroup ok: assignment applied")
        self._apply(assigned, frozenset(), now_ms, user_data)

    def _apply(self, assigned: _TPs, revoked: _TPs, now_ms: int, ud: bytes, readopted: bool = False) -> None:
        """Take the assignment (:class:`.SyncApply`), then what follows it."""
        m, md = self._membership, self._sub.metadata
        then = self._sync.apply(assigned, revoked, now_ms, ud, m, metadata=md, readopted=readopted)
        self._round = replace(self._round, needs_join_prepare=True)
        for reason in then.rejoin:
            self._request_rejoin(reason)
        if then.describe and self._link.known:
            self._send(Api.DESCRIBE_GROUP, cg.DescribeGroupRequest(group_id=self._config.group_id), now_ms)
        if then.join_now:
            self._maybe_join(now_ms)

    def _on_describe(self, resp: cg.DescribeGroupResponse, generation: int, now_ms: int) -> None:
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
        partitions: _TPs,
        now_ms: int,
        assignment: _TPs = frozenset(),
        user_data: bytes = b"",
    ) -> None:
        deadline = now_ms + self._config.rebalance_timeout_ms
        self._gate.open(purpose, partitions, now_ms, deadline, assignment=assignment, user_data=user_data)
        self._maybe_commit(now_ms)

    def _maybe_commit(self, now_ms: int) -> None:
        gate = self._gate.due(now_ms, self._link.known)
        if gate is None:
            return
        if not gate.partitions:
            self._finish_gate(now_ms)
            return
        rid = self._gate.commit(now_ms + self._config.request_timeout_ms, self._membership.generation)
        self._k.emit(P.commit_action(rid, self._config, self._membership, gate.partitions))

    def _on_commit(self, resp: cg.OffsetCommitResponse, now_ms: int) -> None:
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
        if gate.purpose is Purpose.SYNC:
            self._k.goto("commit done: revoked, assignment applied")
            self._apply(gate.assignment, gate.partitions & self._held.owned, now_ms, gate.user_data)
            return
        self._held.revoke(gate.partitions, now_ms, self._membership.generation)
        if gate.purpose is Purpose.LEAVE:
            self._send_leave("the application left", now_ms)
            self._close("commit done: revoked, left")
            return
        self._round = replace(self._round, needs_join_prepare=False)
        self._k.goto("commit done: revoked, JoinGroup sent")
        self._send_join(now_ms)

    # ------------------------------------------------------------------ heartbeat

    def _maybe_heartbeat(self, now_ms: int) -> None:
        m, in_flight = self._membership, self._k.requests.in_flight(Api.HEARTBEAT)
        if not P.heartbeat_due(self._k.state, m, in_flight, now_ms >= self._link.record.hb_next_ms):
            return
        self._send(Api.HEARTBEAT, P.heartbeat_request(self._config, m), now_ms)
        self._link.beat_at(now_ms + self._config.heartbeat_interval_ms)

    def _on_heartbeat(self, resp: cg.HeartbeatResponse, sent_generation: int, now_ms: int) -> None:
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

    def _on_probe(self, resp: cg.HeartbeatResponse, now_ms: int) -> None:
        """A lapsed member's heartbeat answered (:mod:`.readopt`): NONE takes the assignment back."""
        back, act = self._lapsed, reaction(Api.HEARTBEAT, resp.error)
        if act in (Reaction.FATAL, Reaction.COORDINATOR):  # fail, or ask the next coordinator
            self._on_heartbeat(resp, UNKNOWN_GENERATION, now_ms)
        elif act is Reaction.PROCEED and back is not None:
            self._membership, self._lapsed = back.membership, None
            self._vouched(now_ms)
            self._link.beat_at(now_ms + self._config.heartbeat_interval_ms)
            self._k.goto("Heartbeat ok: lapsed assignment taken back")
            self._apply(back.assignment, frozenset(), now_ms, back.user_data, readopted=True)
        else:
            self._lapsed = None
            self._membership = P.reset(self._membership, member_id=act is Reaction.RESET_MEMBER)
            self._maybe_join(now_ms)


#: What :meth:`ClassicMember.handle` calls for each event type.
_ON: Mapping[type, Callable[[ClassicMember, Any, int], object]] = MappingProxyType(
    {
        ev.ResponseReceived: ClassicMember._on_response,
        ev.RequestFailed: ClassicMember._on_failed,
        ev.CoordinatorDiscovered: ClassicMember._on_discovered,
        ev.CoordinatorLost: ClassicMember._on_lost,
        ev.Subscribe: ClassicMember._on_subscribe,
        ev.EnforceRebalance: lambda member, event, _: member.enforce_rebalance(event.reason),
        ev.Leave: ClassicMember._on_leave,
        ev.MetadataUpdated: ClassicMember._on_metadata,
        ev.ListenerCompleted: ClassicMember._on_listener_completed,
    }
)
