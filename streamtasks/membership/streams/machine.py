"""The sans-IO streams-group member (KIP-1071), after Apache Kafka's ``StreamsMembershipManager``
and ``StreamsGroupHeartbeatRequestManager``, on the shared kernel
(:class:`~streamtasks.membership.common.kernel.Kernel`): its state moves only by the table of
:mod:`.transitions`, its requests and actions go through the kernel.

The driver feeds ``handle(event, now_ms)`` and calls ``poll(now_ms)`` (by ``next_deadline_ms``)
and runs the returned actions in order. One heartbeat is in flight at a time. What it does:

* joins at epoch 0 with the topology, process id, endpoint, client tags, instance and rack id,
  rebalance timeout and empty task lists; later heartbeats carry only what changed (null
  otherwise, as Kafka's client does), the task offsets after each ``TaskOffsetIntervalMs``;
* a new target (any task list in a response) is reconciled: the active tasks it loses are
  revoked first (``InvokeTasksListener(REVOKED)``, waited for), then the new tasks are taken
  (``ASSIGNED``, waited for), then a heartbeat acknowledges them;
* statuses: MISSING_INTERNAL_TOPICS asks the runtime to create the topology's internal topics
  (``CreateInternalTopics``), SHUTDOWN_APPLICATION asks it to shut down, the others are
  reported (``ErrorReported``, not fatal) once each time they appear; the member waits;
* FENCED_MEMBER_EPOCH / UNKNOWN_MEMBER_ID: every task lost (``LOST``), then a rejoin at epoch 0
  with the same member id; coordinator errors look the coordinator up again; the errors Kafka's
  client treats as fatal move the member to FATAL;
* ``Leave``: revoke the active tasks, then the leave heartbeat (epoch -1, or -2 when static).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any

from streamtasks.errors import LocalProtocolError
from streamtasks.membership.common.actions import ErrorReported, FindCoordinator
from streamtasks.membership.common.events import CoordinatorDiscovered, CoordinatorLost, Leave, RequestFailed
from streamtasks.membership.common.kernel import Kernel, handler_for
from streamtasks.membership.common.requests import lookup_backoff_ms
from streamtasks.membership.common.states import MemberState as S
from streamtasks.membership.streams.actions import (
    Action,
    CreateInternalTopics,
    EndpointsChanged,
    InvokeTasksListener,
    SendRequest,
    ShutdownApplication,
    TasksListenerKind,
)
from streamtasks.membership.streams.config import StreamsMemberConfig
from streamtasks.membership.streams.events import (
    JoinStreamsGroup,
    RequestShutdown,
    ResponseReceived,
    TaskOffsetsUpdated,
    TasksListenerCompleted,
)
from streamtasks.membership.streams.records import NO_TASKS, Tasks, task_ids
from streamtasks.membership.streams.transitions import IN_GROUP, TABLE
from streamtasks.protocol.errors import KafkaErrorCode as E
from streamtasks.protocol.streams_group import (
    StreamsGroupHeartbeatRequest,
    StreamsGroupHeartbeatResponse,
    StreamsGroupStatus,
    TaskOffset,
)

__all__ = ["FATAL_ERRORS", "FENCING_ERRORS", "Event", "StreamsApi", "StreamsMember"]


class StreamsApi(enum.Enum):
    HEARTBEAT = 88


Event = (
    JoinStreamsGroup
    | ResponseReceived
    | TasksListenerCompleted
    | TaskOffsetsUpdated
    | RequestShutdown
    | RequestFailed
    | CoordinatorDiscovered
    | CoordinatorLost
    | Leave
)

#: The member's tasks are gone: rejoin at epoch 0 with the same member id.
FENCING_ERRORS = frozenset({E.FENCED_MEMBER_EPOCH, E.UNKNOWN_MEMBER_ID})
#: Look the coordinator up again.
COORDINATOR_ERRORS = frozenset({E.NOT_COORDINATOR, E.COORDINATOR_NOT_AVAILABLE})
#: The member cannot go on (Kafka's client raises them to the application).
FATAL_ERRORS = frozenset(
    {
        E.GROUP_AUTHORIZATION_FAILED,
        E.TOPIC_AUTHORIZATION_FAILED,
        E.CLUSTER_AUTHORIZATION_FAILED,
        E.INVALID_REQUEST,
        E.UNRELEASED_INSTANCE_ID,
        E.GROUP_MAX_SIZE_REACHED,
        E.UNSUPPORTED_VERSION,
        E.STREAMS_INVALID_TOPOLOGY,
        E.STREAMS_INVALID_TOPOLOGY_EPOCH,
        E.STREAMS_TOPOLOGY_FENCED,
        E.FENCED_INSTANCE_ID,
        # A classic group with members (or a KIP-848 consumer group) has the id: Apache Kafka
        # converts only an empty classic group into a streams group (an offline migration);
        # Kafka's client fails on it too (its default branch).
        E.GROUP_ID_NOT_FOUND,
    }
)
#: What a fatal error means for the application, where the broker's message does not say it.
_HINTS = {
    E.GROUP_ID_NOT_FOUND: "a classic or consumer group of this id still has members: the broker turns "
    "only an empty classic group into a streams group, so stop every classic member (or wait for "
    "their session timeout) before starting streams members (docs/streams-groups.md, "
    '"Migrating an App from the classic protocol")',
}
#: Statuses reported and waited out (no action of their own).
_REPORTED = {
    StreamsGroupStatus.STALE_TOPOLOGY: "the group runs a newer topology than this member's",
    StreamsGroupStatus.MISSING_SOURCE_TOPICS: "source topics are missing",
    StreamsGroupStatus.INCORRECTLY_PARTITIONED_TOPICS: "topics are not partitioned as the topology needs",
    StreamsGroupStatus.ASSIGNMENT_DELAYED: "the broker delayed the assignment",
    StreamsGroupStatus.MISSING_CLIENT_TAGS: "client tags the rack-aware assignor needs are missing",
}
_LEAVE_EPOCH, _STATIC_LEAVE_EPOCH = -1, -2
_ACTIONS = (
    SendRequest,
    FindCoordinator,
    ErrorReported,
    InvokeTasksListener,
    CreateInternalTopics,
    ShutdownApplication,
    EndpointsChanged,
)
#: The longest wait between two coordinator lookups (Kafka's retry.backoff.max.ms default).
_LOOKUP_BACKOFF_MAX_MS = 1_000


class StreamsMember:
    """One member of a streams group; see the module's docstring."""

    def __init__(self, config: StreamsMemberConfig) -> None:
        self._config = config
        self._k: Kernel[S, StreamsApi, StreamsGroupHeartbeatRequest, Action] = Kernel(
            TABLE, S.UNSUBSCRIBED, SendRequest, {StreamsApi.HEARTBEAT: StreamsGroupHeartbeatResponse}
        )
        self._epoch = 0
        self._coordinator = False
        self._lookup_at_ms = 0
        self._lookup_failures = 0
        self._interval_ms = config.heartbeat_interval_ms
        self._next_heartbeat_ms = 0
        self._owned = NO_TASKS
        self._target: Tasks | None = None
        self._sent_tasks: Tasks | None = None  # what the last heartbeat reported (None: resend)
        self._offset_interval_ms = 0
        self._next_offsets_ms = 0
        self._offsets: tuple[tuple[TaskOffset, ...], tuple[TaskOffset, ...]] | None = None
        self._shutdown = False
        self._statuses: frozenset[int] = frozenset()
        self._endpoint_epoch = 0
        self._invocation = 0
        #: The callback the member waits for: (invocation id, kind, the tasks it was given).
        self._waiting: tuple[int, TasksListenerKind, Tasks] | None = None
        self._handlers: dict[type, Callable[[Any, int], None]] = {
            JoinStreamsGroup: self._on_join,
            ResponseReceived: self._on_response,
            TasksListenerCompleted: self._on_listener_completed,
            TaskOffsetsUpdated: self._on_offsets,
            RequestShutdown: self._on_shutdown_request,
            RequestFailed: self._on_failed,
            CoordinatorDiscovered: self._on_discovered,
            CoordinatorLost: self._on_coordinator_lost,
            Leave: self._on_leave,
        }

    # ------------------------------------------------------------------ queries

    @property
    def config(self) -> StreamsMemberConfig:
        return self._config

    @property
    def state(self) -> S:
        return self._k.state

    @property
    def member_id(self) -> str:
        return self._config.member_id

    @property
    def member_epoch(self) -> int:
        return self._epoch

    @property
    def owned(self) -> Tasks:
        return self._owned

    @property
    def target(self) -> Tasks | None:
        return self._target

    @property
    def statuses(self) -> frozenset[int]:
        """The statuses of the last response."""
        return self._statuses

    def next_deadline_ms(self) -> int | None:
        """When ``poll`` has something to do next (None: only an event can move the member)."""
        if self.state not in IN_GROUP:
            return None
        if not self._coordinator:
            return None if self._k.requests.finds_in_flight() else self._lookup_at_ms
        if self._k.requests.in_flight(StreamsApi.HEARTBEAT):
            return None
        return self._next_heartbeat_ms

    # ------------------------------------------------------------------ entry points

    def handle(self, event: Event, now_ms: int) -> list[Action]:
        self._k.start(event)
        handler_for(self._handlers, event)(event, now_ms)
        self._tick(now_ms)
        return self._flush()

    def poll(self, now_ms: int) -> list[Action]:
        self._k.begin()
        self._tick(now_ms)
        return self._flush()

    def _flush(self) -> list[Action]:
        out: list[Action] = []
        for action in self._k.flush():
            if not isinstance(action, _ACTIONS):
                raise LocalProtocolError(f"a streams member does not emit {type(action).__name__}")
            out.append(action)
        return out

    # ------------------------------------------------------------------ application events

    def _on_join(self, _: JoinStreamsGroup, now_ms: int) -> None:
        self._k.goto("join with the topology at epoch 0")
        self._rejoin(now_ms)

    def _rejoin(self, now_ms: int) -> None:
        self._epoch = 0
        self._sent_tasks = None
        self._target = None
        self._statuses = frozenset()
        self._next_heartbeat_ms = now_ms
        self._lookup_at_ms = now_ms

    def _on_offsets(self, event: TaskOffsetsUpdated, _: int) -> None:
        self._offsets = (event.task_offsets, event.task_end_offsets)

    def _on_shutdown_request(self, event: RequestShutdown, now_ms: int) -> None:
        self._shutdown = True
        self._next_heartbeat_ms = now_ms

    def _on_leave(self, _: Leave, now_ms: int) -> None:
        if self.state in (S.UNSUBSCRIBED, S.FATAL, S.PREPARE_LEAVING, S.LEAVING):
            return
        self._k.goto("leave: revoke active tasks first")
        self._waiting = None
        if self._owned.active:
            self._invoke(TasksListenerKind.REVOKED, Tasks(active=self._owned.active))
        else:
            self._send_leave(now_ms)

    def _send_leave(self, now_ms: int) -> None:
        self._k.goto("revoked: leave heartbeat sent")
        self._owned = NO_TASKS
        static = self._config.instance_id is not None
        epoch = _STATIC_LEAVE_EPOCH if static else _LEAVE_EPOCH
        if self._epoch == 0 or not self._coordinator:
            self._k.goto("left")  # never joined, or nobody to tell: the session expires
            return
        self._k.keep(())
        request = StreamsGroupHeartbeatRequest(
            group_id=self._config.group_id,
            member_id=self._config.member_id,
            member_epoch=epoch,
            instance_id=self._config.instance_id,
        )
        self._k.send(StreamsApi.HEARTBEAT, request, now_ms + self._config.request_timeout_ms, self._epoch)

    # ------------------------------------------------------------------ the runtime's callbacks

    def _invoke(self, kind: TasksListenerKind, tasks: Tasks) -> None:
        self._invocation += 1
        self._waiting = (self._invocation, kind, tasks)
        self._k.emit(
            InvokeTasksListener(
                invocation_id=self._invocation,
                kind=kind,
                member_epoch=self._epoch,
                active=tuple(sorted(tasks.active)),
                standby=tuple(sorted(tasks.standby)),
                warmup=tuple(sorted(tasks.warmup)),
            )
        )

    def _on_listener_completed(self, event: TasksListenerCompleted, now_ms: int) -> None:
        if not 0 < event.invocation_id <= self._invocation:
            raise LocalProtocolError(f"TasksListenerCompleted for unknown invocation {event.invocation_id}")
        if self._waiting is None or self._waiting[0] != event.invocation_id:
            return  # superseded (fenced or left meanwhile)
        _, kind, tasks = self._waiting
        self._waiting = None
        if event.failed:
            self._k.report(f"the runtime's {kind.value} failed; the task change stands", None)
        if self.state is S.PREPARE_LEAVING:
            self._send_leave(now_ms)
        elif self.state is S.FENCED:
            self._k.goto("tasks dropped: rejoin at epoch 0")
            self._rejoin(now_ms)
        elif self.state is S.RECONCILING and kind is TasksListenerKind.REVOKED:
            o = self._owned
            self._owned = Tasks(active=o.active - tasks.active, standby=o.standby, warmup=o.warmup)
            self._reconcile()  # against the latest target: it may drop more active tasks
        elif self.state is S.RECONCILING and kind is TasksListenerKind.ASSIGNED:
            self._owned = tasks  # a newer target is reconciled once this one is acknowledged
            self._k.goto("reconciled: acknowledge")
            self._next_heartbeat_ms = now_ms

    # ------------------------------------------------------------------ reconciliation

    def _revoking(self) -> frozenset[tuple[str, int]]:
        assert self._target is not None
        return self._owned.active - self._target.active

    def _reconcile(self) -> None:
        """Revoke the active tasks the target drops, then (after the runtime) take the target."""
        if self._revoking():
            self._invoke(TasksListenerKind.REVOKED, Tasks(active=self._revoking()))
        else:
            self._assign()

    def _assign(self) -> None:
        assert self._target is not None
        self._invoke(TasksListenerKind.ASSIGNED, self._target)

    # ------------------------------------------------------------------ heartbeats

    def _tick(self, now_ms: int) -> None:
        if self.state not in IN_GROUP:
            return
        if not self._coordinator:
            if not self._k.requests.finds_in_flight() and now_ms >= self._lookup_at_ms:
                self._k.find(self._config.group_id, now_ms + self._config.request_timeout_ms, self._epoch)
            return
        if self._k.requests.in_flight(StreamsApi.HEARTBEAT) or now_ms < self._next_heartbeat_ms:
            return
        self._k.send(
            StreamsApi.HEARTBEAT,
            self._heartbeat(now_ms),
            now_ms + self._config.request_timeout_ms,
            self._epoch,
        )
        self._next_heartbeat_ms = now_ms + self._interval_ms

    def _heartbeat(self, now_ms: int) -> StreamsGroupHeartbeatRequest:
        c = self._config
        joining = self._epoch == 0
        owned = self._owned
        changed = joining or owned != self._sent_tasks
        self._sent_tasks = owned
        offsets, end_offsets = None, None
        if self._offsets is not None and (joining or now_ms >= self._next_offsets_ms):
            offsets, end_offsets = self._offsets
            self._next_offsets_ms = now_ms + self._offset_interval_ms
        return StreamsGroupHeartbeatRequest(
            group_id=c.group_id,
            member_id=c.member_id,
            member_epoch=self._epoch,
            endpoint_information_epoch=self._endpoint_epoch,
            instance_id=c.instance_id if joining else None,
            rack_id=c.rack_id if joining else None,
            rebalance_timeout_ms=c.rebalance_timeout_ms if joining else -1,
            topology=c.topology if joining else None,
            active_tasks=task_ids(owned.active) if changed else None,
            standby_tasks=task_ids(owned.standby) if changed else None,
            warmup_tasks=task_ids(owned.warmup) if changed else None,
            process_id=c.process_id if joining else None,
            user_endpoint=c.user_endpoint if joining else None,
            client_tags=c.client_tags if joining else None,
            task_offsets=offsets,
            task_end_offsets=end_offsets,
            shutdown_application=self._shutdown,
        )

    def _on_response(self, event: ResponseReceived, now_ms: int) -> None:
        if self._k.answer(event.request_id, event.response) is None:
            return  # no longer waited for
        r = event.response
        if self.state is S.LEAVING:
            self._k.goto("left")
            self._epoch = 0
            return
        if self.state not in IN_GROUP:  # answered while the member prepares to leave
            self._epoch = 0 if r.error in FENCING_ERRORS else r.member_epoch
            return
        if r.error is not E.NONE:
            self._on_error(r, now_ms)
            return
        self._interval_ms = r.heartbeat_interval_ms
        self._next_heartbeat_ms = now_ms + r.heartbeat_interval_ms
        self._offset_interval_ms = r.task_offset_interval_ms
        self._epoch = r.member_epoch
        self._on_statuses(r)
        if r.partitions_by_user_endpoint is not None:
            self._endpoint_epoch = r.endpoint_information_epoch
            self._k.emit(
                EndpointsChanged(epoch=r.endpoint_information_epoch, endpoints=r.partitions_by_user_endpoint)
            )
        if self.state is S.ACKNOWLEDGING:
            self._k.goto("acknowledged")
        if any(t is not None for t in (r.active_tasks, r.standby_tasks, r.warmup_tasks)):
            self._target = Tasks.of(r.active_tasks, r.standby_tasks, r.warmup_tasks)
        self._maybe_reconcile()

    def _maybe_reconcile(self) -> None:
        if self._target is None or self.state not in (S.JOINING, S.STABLE):
            return
        if self.state is S.STABLE and self._target == self._owned:
            return
        self._k.goto("heartbeat ok: first target" if self.state is S.JOINING else "heartbeat ok: new target")
        self._reconcile()

    def _on_statuses(self, r: StreamsGroupHeartbeatResponse) -> None:
        now = {s.status_code: s.status_detail for s in r.status or ()}
        for code, detail in now.items():
            if code in self._statuses:
                continue  # reported when it appeared
            if code == StreamsGroupStatus.MISSING_INTERNAL_TOPICS:
                self._k.emit(CreateInternalTopics(topics=self._config.internal_topics, detail=detail))
            elif code == StreamsGroupStatus.SHUTDOWN_APPLICATION:
                self._k.emit(ShutdownApplication(detail=detail))
            else:
                known = code in {int(s) for s in StreamsGroupStatus}
                name = StreamsGroupStatus(code).name if known else f"status {code}"
                what = _REPORTED.get(StreamsGroupStatus(code), "") if known else "unknown to streamtasks"
                self._k.report(f"streams group {self._config.group_id!r}: {name} ({what}): {detail}", None)
        self._statuses = frozenset(now)

    def _on_error(self, r: StreamsGroupHeartbeatResponse, now_ms: int) -> None:
        why = f"StreamsGroupHeartbeat: {r.error.name} {r.error_message or ''}".strip()
        if r.error in _HINTS:
            why = f"{why} ({_HINTS[r.error]})"
        self._sent_tasks = None  # any error: the next heartbeat reports every field (Kafka)
        if r.error in FENCING_ERRORS:
            self._k.report(why, r.error)
            self._fence()
        elif r.error in COORDINATOR_ERRORS:
            self._coordinator_gone(now_ms)
        elif r.error in FATAL_ERRORS or not r.error.retriable:
            self._k.report(why, r.error, fatal=r.error in FATAL_ERRORS)
            if r.error in FATAL_ERRORS:
                self._k.goto("fatal error")
                self._waiting = None
            else:
                self._next_heartbeat_ms = now_ms + self._config.retry_backoff_ms
        else:
            self._next_heartbeat_ms = now_ms + self._config.retry_backoff_ms

    def _fence(self) -> None:
        self._k.goto("fenced: tasks lost")
        lost = self._owned
        self._owned = NO_TASKS
        self._target = None
        self._epoch = 0
        self._invoke(TasksListenerKind.LOST, lost)

    # ------------------------------------------------------------------ transport

    def _on_failed(self, event: RequestFailed, now_ms: int) -> None:
        found = self._k.fail(event.request_id)
        if found is None:
            return
        if found.api is None:  # the lookup failed: try again after a backoff
            self._lookup_failures += 1
            backoff = lookup_backoff_ms(
                self._config.retry_backoff_ms, _LOOKUP_BACKOFF_MAX_MS, self._lookup_failures
            )
            self._lookup_at_ms = now_ms + backoff
            return
        if self.state is S.LEAVING:
            self._k.goto("left")
            self._epoch = 0
            return
        self._sent_tasks = None  # the answer may have been lost: report the tasks again (Kafka)
        self._next_heartbeat_ms = now_ms + self._config.retry_backoff_ms

    def _on_discovered(self, event: CoordinatorDiscovered, _: int) -> None:
        if self._k.discovered(event.request_id):
            self._coordinator = True
            self._lookup_failures = 0

    def _on_coordinator_lost(self, _: CoordinatorLost, now_ms: int) -> None:
        self._coordinator_gone(now_ms)

    def _coordinator_gone(self, now_ms: int) -> None:
        self._coordinator = False
        self._sent_tasks = None
        self._k.keep(())
        self._lookup_at_ms = now_ms
