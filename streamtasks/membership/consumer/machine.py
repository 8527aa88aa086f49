"""The KIP-848 consumer group member: a sans-IO state machine (ConsumerGroupHeartbeat,
reconciliation, and the seed KIP's client-side assignment through PrepareAssignment /
InstallAssignment).

No IO and no clock: the driver passes ``now_ms`` to every call, executes the returned actions in
order (every member's vocabulary and listener rule, :mod:`streamtasks.membership.common`) and
feeds back what happened as events. :class:`ConsumerMember` is the one owner of the member's
state (frozen records, :mod:`.records`) and the only code that assigns it; the per-phase logic is
pure (:mod:`.phases`), legal transitions are in :mod:`.transitions`; ``docs/membership.md`` ("The
KIP-848 member") tells the whole story. The state, the action list and the requests in flight
are held by the shared :class:`~streamtasks.membership.common.kernel.Kernel` (composition),
moved by trigger through :data:`.transitions.TABLE`.

Components it holds own the rest: what it owns (``Holdings``: the listener calls and
``AssignmentChanged``), the commit before a revocation (``CommitGate``), the coordinator link
and its timers (``CoordinatorLink``), the client-side assignment job (:mod:`.assignment_job`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from types import MappingProxyType
from typing import Any

from streamtasks.errors import LocalProtocolError
from streamtasks.membership.common import (
    CommitGate,
    CoordinatorLink,
    Holdings,
    InFlight,
    Kernel,
    Purpose,
)
from streamtasks.membership.common.kernel import handler_for
from streamtasks.membership.common.states import MemberState as S
from streamtasks.membership.consumer import events as ev
from streamtasks.membership.consumer import phases as P
from streamtasks.membership.consumer.actions import Action, Request, SendRequest
from streamtasks.membership.consumer.assignment_job import AssignmentJob
from streamtasks.membership.consumer.config import ConsumerMemberConfig
from streamtasks.membership.consumer.lapse import Lapse, answered, asking, lapsed, trigger
from streamtasks.membership.consumer.records import (
    ANSWERS,
    Api,
    Cluster,
    Link,
    Membership,
    Ownership,
    Round,
    Subscribed,
)
from streamtasks.membership.consumer.transitions import IN_GROUP, TABLE
from streamtasks.membership.consumer.view import ConsumerMemberView
from streamtasks.protocol.assignment_rpc import (
    ConsumerGroupInstallAssignmentResponse,
    ConsumerGroupPrepareAssignmentResponse,
)
from streamtasks.protocol.classic_group import OffsetCommitResponse
from streamtasks.protocol.consumer_group import ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse
from streamtasks.protocol.errors import KafkaErrorCode as E
from topology.ids import TopicPartition

__all__ = ["ConsumerMember"]

_IDLE = (S.UNSUBSCRIBED, S.FATAL, S.STALE)


class ConsumerMember(ConsumerMemberView):
    """One member of a KIP-848 consumer group, driven as the classic member is: ``handle`` and
    ``poll`` return the actions to execute in order, ``next_deadline_ms`` says when to poll; an
    application event illegal in the current state raises ``LocalProtocolError``, what goes
    wrong on the coordinator's side is an ``ErrorReported``.
    """

    __slots__ = (
        "_cluster", "_config", "_gate", "_held", "_job", "_k", "_lapse", "_link", "_membership", "_round",
        "_sub",
    )  # fmt: skip

    def __init__(self, config: ConsumerMemberConfig, now_ms: int = 0) -> None:
        self._config = config
        self._k: Kernel[S, Api, Request, SendRequest] = Kernel(
            TABLE, S.JOINING if config.topics else S.UNSUBSCRIBED, SendRequest, ANSWERS
        )
        self._sub = Subscribed(
            topics=config.topics,
            assignor_metadata=MappingProxyType(dict(config.assignor_metadata)),
            reasons=MappingProxyType({a.name: 0 for a in config.client_assignors}),
        )
        self._cluster = Cluster()
        self._membership = Membership()
        self._round = Round()
        self._link = CoordinatorLink(Link.starting(now_ms, config.heartbeat_interval_ms), config, self._k)
        self._gate = CommitGate(self._k, Api.OFFSET_COMMIT)
        self._job = AssignmentJob(config, self._k)
        self._held = Holdings(self._k, Ownership(), 0)
        self._lapse = Lapse()  # a lapsed member's question (.lapse)

    # ------------------------------------------------------------------ entry points

    def handle(self, event: ev.Event, now_ms: int) -> list[Action]:
        """Feed one event; returns the actions to execute, in order."""
        self._k.start(event)
        handler_for(_ON, event)(self, event, now_ms)
        return self._k.flush()

    def poll(self, now_ms: int) -> list[Action]:
        """Run whatever is due: request timeouts, the commit deadline, the session check,
        coordinator lookup, the rejoin after a fence, commits and heartbeats."""
        self._k.begin()
        if self._k.state in _IDLE and not self._k.requests.inflight:
            return self._k.flush()
        expired = sorted(rid for rid, f in self._k.requests.inflight.items() if f.deadline_ms <= now_ms)
        for rid in expired:
            if rid in self._k.requests.inflight:
                self._on_failed(ev.RequestFailed(request_id=rid), now_ms)
        if self._k.state in _IDLE:
            return self._k.flush()
        if self._gate.expired(now_ms):
            self._report("offset commit before revocation timed out; revoking anyway", None)
            self._finish_gate(now_ms)
        if (
            self._k.state in IN_GROUP
            and (self._membership.epoch > 0 or self._held.owned)
            and self._link.silent(now_ms, self._config.session_timeout_ms)
        ):
            epoch, state = self._membership.epoch, self._k.state
            self._fence(now_ms, "no heartbeat answer within the session timeout", None)
            self._lapse = lapsed(self._lapse, state, epoch)  # ask under it first (.lapse)
            # A silent coordinator (a hung broker) is not asked: look it up again, dropping
            # the connection to it (FindCoordinator.silent), as the classic member does.
            self._coordinator_lost(now_ms, "", silent=True)
        if not self._link.known:
            self._link.lookup(now_ms, self._membership.epoch)
            return self._k.flush()
        if self._k.state is S.FENCED:
            epoch = self._lapse.epoch
            self._start_joining(now_ms, trigger(self._lapse))
            self._membership = replace(self._membership, epoch=epoch)  # 0, or the lapsed one
            self._lapse = replace(self._lapse, epoch=epoch)
        self._maybe_commit(now_ms)
        self._maybe_heartbeat(now_ms)
        return self._k.flush()

    def next_deadline_ms(self) -> int | None:
        """When ``poll`` next has something to do (possibly already past: poll now);
        ``None`` when only an event can move the member."""
        return P.next_deadline(
            self._k.state,
            self._config,
            membership=self._membership,
            ownership=self._held.record,
            link=self._link.record,
            round_=self._round,
            gate=self._gate.gate,
            requests=self._k.requests,
        )

    def enforce_rebalance(self, reason: str = "", now_ms: int | None = None) -> bool:
        """KIP-848 has no rebalance request: a member forces a new assignment by changing its
        client-side assignors' ``Reason`` (which bumps the group epoch). Returns ``True`` when
        that was done, ``False`` for a member with a server-side assignor (a no-op, as Apache
        Kafka's ``enforceRebalance`` under the consumer protocol). ``reason`` is not sent (the
        field is an int8). Raises ``LocalProtocolError`` when the member is not subscribed."""
        self._k.check_event(ev.EnforceRebalance(reason=reason))
        if not self._config.client_side:
            return False
        reasons = P.bumped_reasons(self._sub.reasons)
        self._sub = replace(self._sub, reasons=MappingProxyType(reasons))
        if now_ms is not None:
            # Heartbeat at once (the Reason), then sooner until the new assignment comes: the
            # member that asked learns of it (and of partitions released to it) without waiting
            # out its interval after whoever computes and whoever revokes have done their part.
            self._round = replace(self._round, asked_since_ms=now_ms, asked_at_epoch=self._membership.epoch)
            self._link.beat_by(now_ms)
        return True

    # ------------------------------------------------------------------ bookkeeping

    def _send(self, api: Api, request: Request, now_ms: int) -> int:
        deadline = now_ms + self._config.request_timeout_ms
        return self._k.send(api, request, deadline, self._membership.epoch)

    def _drop_inflight(self, keep_find: bool = True) -> None:
        self._k.keep({None} if keep_find else ())
        self._round = P.dropped(self._round)
        self._gate.dropped()
        self._job.dropped()

    def _report(self, reason: str, code: E | None, *, fatal: bool = False) -> None:
        self._k.report(reason, code, fatal=fatal)

    def _lose_all(self) -> None:
        """Everything owned is lost (no commit, no revocation): fenced, stale, failed."""
        self._held.lose_all(0, self._membership.epoch, error=0, version=0)

    def _forget_membership(self) -> None:
        """Back to epoch 0 with nothing in progress (the member id is kept)."""
        self._membership = replace(self._membership, epoch=0, sent=None)
        self._lapse = replace(self._lapse, epoch=0)
        self._round = Round()
        self._gate.close()
        self._job.dropped()
        self._k.keep({None})

    def _leave_group(self) -> None:
        self._membership = replace(self._membership, in_group=False)

    def _fence(self, now_ms: int, reason: str, code: E | None) -> None:
        """Fenced: partitions lost; :meth:`poll` rejoins at epoch 0 with the same member id."""
        self._report(f"fenced: {reason}; partitions lost, rejoining", code)
        self._lose_all()
        self._forget_membership()
        self._leave_group()
        self._link.beat_at(now_ms)
        self._k.goto("fenced: partitions lost")

    def _fail(self, reason: str, code: E | None) -> None:
        self._lose_all()
        self._report(reason, code, fatal=True)
        self._forget_membership()
        self._drop_inflight(keep_find=False)
        self._leave_group()
        self._k.goto("fatal error")

    def _start_joining(self, now_ms: int, trigger: str) -> None:
        self._forget_membership()
        self._link.change(hb_next_ms=now_ms, hb_last_ok_ms=now_ms)
        self._k.goto(trigger)

    def _coordinator_lost(self, now_ms: int, reason: str, *, silent: bool = False) -> None:
        """Every request in flight fails; membership and owned partitions are kept
        (``silent``: :meth:`CoordinatorLink.lost`'s)."""
        self._link.lost(now_ms, silent=silent, hb_next_ms=now_ms)
        self._drop_inflight(keep_find=False)
        self._membership = replace(self._membership, sent=None)
        self._gate.retry_at(now_ms)
        if reason:
            self._report(f"coordinator unknown: {reason}", None)

    # ------------------------------------------------------------------ heartbeats

    def _heartbeat_request(self) -> ConsumerGroupHeartbeatRequest:
        """The next heartbeat; the coordinator is taken to have what it says."""
        m = self._membership
        request, sent = P.heartbeat_request(self._config, self._sub, self._cluster.ids, m, self._held.owned)
        self._membership = replace(self._membership, sent=sent)
        return request

    def _maybe_heartbeat(self, now_ms: int) -> None:
        if self._k.state not in IN_GROUP or not self._link.known or self._k.requests.in_flight(Api.HEARTBEAT):
            return
        if now_ms < self._link.record.hb_next_ms and self._round.ack_rid != 0:
            return
        rid = self._send(Api.HEARTBEAT, self._heartbeat_request(), now_ms)
        self._membership = replace(self._membership, in_group=True)
        if self._round.ack_rid == 0:
            self._round = replace(self._round, ack_rid=rid)
        self._link.change(hb_sent_ms=now_ms)
        self._link.beat_at(now_ms + self._link.record.interval_ms)

    def _on_heartbeat(
        self, resp: ConsumerGroupHeartbeatResponse, rid: int, sent: InFlight[Api], now_ms: int
    ) -> None:
        if self._k.state is S.LEAVING:
            self._k.goto("left")
            return
        if self._k.state is S.PREPARE_LEAVING:
            if resp.error is E.NONE and sent.generation == self._membership.epoch and resp.member_epoch > 0:
                self._membership = replace(self._membership, epoch=resp.member_epoch)
            return  # its assignment is not taken: the member is leaving
        if self._k.state not in IN_GROUP or sent.generation != self._membership.epoch:
            return  # answers a heartbeat of an earlier membership (before a fence or a leave)
        code = resp.error
        if asking(self._lapse, sent.generation) and (code is E.NONE or code in P.FENCING_CODES):
            self._lapse = answered(self._lapse, vouched=code is E.NONE)
        if code is E.NONE:
            self._heartbeat_ok(resp, rid, now_ms)
            return
        self._membership = replace(self._membership, sent=None)  # the coordinator may not have it
        if code in P.FENCING_CODES:
            self._fence(now_ms, f"heartbeat answered {code.name}", code)
        elif code in P.FATAL_CODES:
            self._fail(f"heartbeat failed with {code.name}: {resp.error_message or ''}".rstrip(": "), code)
        elif code in P.COORDINATOR_CODES:
            self._coordinator_lost(now_ms, f"heartbeat answered {code.name}")
        else:
            if not code.retriable:
                self._report(f"heartbeat failed with {code.name}", code)
            self._link.beat_at(now_ms + self._config.retry_backoff_ms)

    def _heartbeat_ok(self, resp: ConsumerGroupHeartbeatResponse, rid: int, now_ms: int) -> None:
        # The session counts from when the answered heartbeat was sent (the safe side of the
        # coordinator's timer, restarted when it processed it), never backwards.
        link = self._link.record
        self._link.heard(max(link.hb_last_ok_ms, link.hb_sent_ms))
        if resp.heartbeat_interval_ms > 0:
            self._link.change(interval_ms=resp.heartbeat_interval_ms)
            self._link.beat_by(now_ms + resp.heartbeat_interval_ms)
        self._membership = replace(self._membership, epoch=resp.member_epoch)
        self._round, waiting = P.answered_round(self._k.state, resp, self._round, now_ms)
        self._link.beat_at(P.next_heartbeat_ms(self._config, self._link.record, waiting, now_ms))
        self._reconcile(now_ms)
        r = self._round
        if (
            self._k.state is S.ACKNOWLEDGING
            and r.pending is None
            and r.ack_rid is not None
            and 0 < r.ack_rid <= rid
        ):
            self._round = replace(r, ack_rid=None)
            self._k.goto("acknowledged")
        if resp.should_compute_assignment:
            self._start_assignment(now_ms)

    # ------------------------------------------------------------------ reconciliation

    def _reconcile(self, now_ms: int) -> None:
        """Apply the pending assignment: revoke first (commit, then the listener), then take
        the new partitions and acknowledge. Never both revoked and new partitions unacknowledged:
        the coordinator gives nothing new while the member still owns what it must give up."""
        target = self._round.pending
        if target is None or self._gate.gate is not None or self._k.state not in IN_GROUP:
            return
        assigned, unresolved = P.resolve(target, self._cluster.names)
        if unresolved:
            self._report(
                f"assignment names {unresolved} partition(s) of topics not in the metadata yet", None
            )
        o = self._held.record
        revoked = o.owned - assigned
        if revoked:
            self._enter_reconciling()
            self._start_gate(Purpose.RECONCILE, revoked, now_ms)
            return
        revoked_before = self._round.revoked_this_round
        self._round = replace(self._round, pending=None, last_target=target)
        added = assigned - o.owned
        self._held.update(
            user_data=target.metadata_bytes, error=target.error, version=target.metadata_version
        )
        news = self._held.record != o
        if target.error:
            self._report(f"the assignment carries assignor error {target.error}", None)
        if added or revoked_before or self._k.state is S.JOINING:
            self._enter_reconciling()
            self._round = replace(self._round, revoked_this_round=False)
            self._held.assign(assigned, target.epoch, 0)
            self._k.goto("reconciled: acknowledge")
            self._round = replace(self._round, ack_rid=0)
            self._link.beat_at(now_ms)
        elif news or target.epoch != o.owned_generation:
            self._held.set(assigned, target.epoch)

    def _enter_reconciling(self) -> None:
        if self._k.state is S.JOINING:
            self._k.goto("heartbeat ok: first assignment")
        elif self._k.state is not S.RECONCILING:
            self._k.goto("heartbeat ok: new assignment")

    # ------------------------------------------------------------------ commit before revoking

    def _start_gate(self, purpose: Purpose, partitions: frozenset[TopicPartition], now_ms: int) -> None:
        self._gate.open(purpose, partitions, now_ms, now_ms + self._config.rebalance_timeout_ms // 2)
        self._maybe_commit(now_ms)

    def _maybe_commit(self, now_ms: int) -> None:
        gate = self._gate.due(now_ms, self._link.known)
        if gate is None:
            return
        partitions = gate.partitions & self._held.owned
        if not partitions:
            self._finish_gate(now_ms)
            return
        rid = self._gate.commit(now_ms + self._config.request_timeout_ms, self._membership.epoch)
        self._k.emit(P.commit_action(rid, self._config, self._membership.epoch, partitions))

    def _on_commit(self, resp: OffsetCommitResponse, sent_epoch: int, now_ms: int) -> None:
        gate = self._gate.answered()
        if gate is None:
            return
        verdict, codes = P.commit_verdict(resp)
        if verdict is P.Commit.DONE:
            self._finish_gate(now_ms)
        elif verdict is P.Commit.UNKNOWN_MEMBER:
            if gate.purpose is Purpose.LEAVE:
                self._gate.close()
                self._lose_all()
                self._leave_group()
                self._k.goto("left without a leave heartbeat")
            else:
                self._fence(now_ms, "offset commit answered UNKNOWN_MEMBER_ID", E.UNKNOWN_MEMBER_ID)
        elif verdict is P.Commit.COORDINATOR:
            self._coordinator_lost(now_ms, f"offset commit answered {[c.name for c in codes]}")
        elif verdict is P.Commit.RETRY or (
            verdict is P.Commit.STALE
            and P.new_epoch_coming(self._k.state, self._membership.epoch, sent_epoch, self._k.requests)
        ):
            retry_at = (
                now_ms if self._membership.epoch != sent_epoch else now_ms + self._config.retry_backoff_ms
            )
            self._gate.retry_at(retry_at)
        else:
            self._report(f"offset commit failed with {[c.name for c in codes]}; revoking anyway", codes[0])
            self._finish_gate(now_ms)

    def _finish_gate(self, now_ms: int) -> None:
        gate = self._gate.finish()
        self._held.revoke(gate.partitions, 0, self._membership.epoch)
        if gate.purpose is Purpose.LEAVE:
            self._send_leave(now_ms)
            return
        self._round = replace(self._round, revoked_this_round=True)
        self._reconcile(now_ms)

    # ------------------------------------------------------------------ leaving

    def _send_leave(self, now_ms: int) -> None:
        """The leave heartbeat: epoch -1, or -2 for a static member (it will come back)."""
        if not self._membership.in_group or not self._link.known:
            self._leave_group()
            self._k.goto("left without a leave heartbeat")
            return
        self._forget_membership()
        self._leave_group()
        self._k.keep({None})  # only the leave heartbeat's answer counts now
        if self._k.state is S.PREPARE_LEAVING:
            self._k.goto("revoked: leave heartbeat sent")
        self._send(Api.HEARTBEAT, P.leave_request(self._config), now_ms)

    def _on_leave(self, event: ev.Leave, now_ms: int) -> None:
        if self._k.state in (S.FATAL, S.UNSUBSCRIBED):
            return
        if self._k.state is S.STALE:
            self._k.goto("leave")
            return
        # A heartbeat in flight is kept: its answer may carry a newer member epoch, which the
        # commit before the revocation must be sent with (Apache Kafka's member takes the epoch
        # of a heartbeat answer while it prepares to leave too, and ignores its assignment).
        self._k.keep({None, Api.HEARTBEAT})
        self._round = replace(P.dropped(self._round), pending=None)
        self._gate.dropped()
        self._job.dropped()
        self._k.goto("leave: revoke first")
        owned = self._held.owned
        if owned and self._membership.in_group:
            self._start_gate(Purpose.LEAVE, owned, now_ms)
            return
        self._gate.close()
        self._lose_all()
        if self._link.known or not self._membership.in_group:
            self._send_leave(now_ms)

    def _on_poll_timer(self, event: ev.PollTimerExpired, now_ms: int) -> None:
        self._report(
            f"poll timer expired ({event.reason or 'the application stopped polling'}); leaving", None
        )
        self._lose_all()
        in_group = self._membership.in_group and self._link.known
        self._forget_membership()
        if in_group:
            self._send(Api.HEARTBEAT, P.leave_request(self._config), now_ms)
        self._leave_group()
        self._k.goto("poll timer expired: partitions lost, left")

    # ------------------------------------------------------------------ client-side assignment

    def _start_assignment(self, now_ms: int) -> None:
        """ShouldComputeAssignment (a member with a client-side assignor, in the group)."""
        if self._config.client_side and self._k.state in IN_GROUP:
            self._job.start(self._membership.epoch, now_ms)

    def _on_job_answer(
        self,
        resp: ConsumerGroupPrepareAssignmentResponse | ConsumerGroupInstallAssignmentResponse,
        now_ms: int,
    ) -> None:
        answer = self._job.answered(resp, self._membership.epoch, now_ms)
        if answer.lost:
            self._coordinator_lost(now_ms, answer.lost)
        elif answer.installed:
            self._link.beat_by(now_ms)  # the new target has this member's part of it: fetch it now

    # ------------------------------------------------------------------ coordinator and application events

    def _on_discovered(self, event: ev.CoordinatorDiscovered, now_ms: int) -> None:
        if not self._k.discovered(event.request_id):
            return
        if self._link.known or self._k.state in (S.UNSUBSCRIBED, S.FATAL):
            return
        self._link.found(now_ms)
        if self._k.state is S.PREPARE_LEAVING and self._gate.gate is None:
            self._send_leave(now_ms)

    def _on_assignor_metadata(self, event: ev.AssignorMetadataChanged, now_ms: int) -> None:
        P.check_assignor_metadata(self._sub.assignor_metadata, event.name, event.metadata)
        if self._sub.assignor_metadata[event.name] != event.metadata:
            metadata = {**self._sub.assignor_metadata, event.name: event.metadata}
            self._sub = replace(self._sub, assignor_metadata=MappingProxyType(metadata))
            self._link.beat_by(now_ms)

    def _on_polled(self, event: ev.ApplicationPolled, now_ms: int) -> None:
        if self._k.state is S.STALE:
            self._start_joining(now_ms, "application polled: rejoin at epoch 0")

    def _on_session_timeout(self, event: ev.SessionTimeoutKnown, now_ms: int) -> None:
        self._config = replace(self._config, session_timeout_ms=event.session_timeout_ms)

    def _on_lost(self, event: ev.CoordinatorLost, now_ms: int) -> None:
        self._coordinator_lost(now_ms, event.reason or "coordinator lost")

    def _on_subscribe(self, event: ev.Subscribe, now_ms: int) -> None:
        if not event.topics:
            raise LocalProtocolError("Subscribe needs at least one topic; use Leave to unsubscribe")
        changed = event.topics != self._sub.topics
        self._sub = replace(self._sub, topics=event.topics)
        if self._k.state is S.UNSUBSCRIBED:
            self._start_joining(now_ms, "subscribe: join at epoch 0")
        elif changed:
            self._link.beat_by(now_ms)

    def _on_metadata(self, event: ev.MetadataUpdated, now_ms: int) -> None:
        self._cluster = Cluster.of(event.partitions_per_topic, event.topic_ids)
        if self._k.state in (S.UNSUBSCRIBED, S.FATAL):
            return
        # owned partitions that no longer exist are lost
        self._gate.without(self._held.lose_gone(self._cluster.counts, 0, self._membership.epoch))
        # partitions of topics that were unknown until now
        self._round = P.known_topics(self._round, self._cluster.names, self._held.owned)
        self._reconcile(now_ms)

    def _on_listener_completed(self, event: ev.ListenerCompleted, now_ms: int) -> None:
        if self._k.listener_completed(event) is not None and event.failed:
            self._report("rebalance listener raised; the assignment change stands", None)

    # ------------------------------------------------------------------ responses

    def _on_response(self, event: ev.ResponseReceived, now_ms: int) -> None:
        pending = self._k.answer(event.request_id, event.response)
        resp = event.response
        if pending is None:
            if P.unread_assignment(resp):  # the next heartbeat says everything again
                self._membership = replace(self._membership, sent=None)
            return
        if isinstance(resp, ConsumerGroupHeartbeatResponse):
            self._on_heartbeat(resp, event.request_id, pending, now_ms)
        elif isinstance(
            resp, (ConsumerGroupPrepareAssignmentResponse, ConsumerGroupInstallAssignmentResponse)
        ):
            self._on_job_answer(resp, now_ms)
        else:
            self._on_commit(resp, pending.generation, now_ms)

    def _on_failed(self, event: ev.RequestFailed, now_ms: int) -> None:
        pending = self._k.fail(event.request_id)
        if pending is None:
            return
        if pending.api is None:
            self._link.lookup_failed(now_ms)
            return
        if self._k.state is S.LEAVING and pending.api is Api.HEARTBEAT:
            self._k.goto("left")
            return
        if self._k.state is S.PREPARE_LEAVING and pending.api is Api.HEARTBEAT:
            return  # kept only for the epoch it might have brought (_on_leave)
        if self._k.state in _IDLE:
            return
        self._coordinator_lost(now_ms, f"{pending.api.value} failed: {event.error.name}")


#: What :meth:`ConsumerMember.handle` calls for each event type.
_ON: Mapping[type, Callable[[ConsumerMember, Any, int], object]] = MappingProxyType(
    {
        ev.ResponseReceived: ConsumerMember._on_response,
        ev.RequestFailed: ConsumerMember._on_failed,
        ev.CoordinatorDiscovered: ConsumerMember._on_discovered,
        ev.CoordinatorLost: ConsumerMember._on_lost,
        ev.Subscribe: ConsumerMember._on_subscribe,
        ev.EnforceRebalance: lambda member, event, now_ms: member.enforce_rebalance(event.reason, now_ms),
        ev.Leave: ConsumerMember._on_leave,
        ev.MetadataUpdated: ConsumerMember._on_metadata,
        ev.AssignorMetadataChanged: ConsumerMember._on_assignor_metadata,
        ev.PollTimerExpired: ConsumerMember._on_poll_timer,
        ev.ApplicationPolled: ConsumerMember._on_polled,
        ev.ListenerCompleted: ConsumerMember._on_listener_completed,
        ev.SessionTimeoutKnown: ConsumerMember._on_session_timeout,
    }
)
