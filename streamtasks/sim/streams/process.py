"""A simulated Kafka Streams-style process of the streams-group world: the real sans-IO
:class:`~streamtasks.membership.streams.StreamsMember` and a tiny runtime around it.

The runtime runs the member's task callbacks at once (it closes revoked tasks, opens assigned
ones, drops lost ones), keeps the tasks it owns (the members' own view the checks read), and
keeps a local state store per task: an active task's changelog offset follows the task's end
offset, a standby or warm-up restores toward it at :data:`RESTORE_PER_MS` records per ms, and a
task the process gave up keeps the offset it reached (its state stays on disk, across restarts
of the same process). It reports the offsets to the member (``TaskOffsetsUpdated``) before
every poll and response; the member sends them every ``TaskOffsetIntervalMs``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from streamtasks.membership.common.events import CoordinatorDiscovered, Leave, RequestFailed
from streamtasks.membership.common.states import MemberState
from streamtasks.membership.streams import (
    CreateInternalTopics,
    InvokeTasksListener,
    JoinStreamsGroup,
    ResponseReceived,
    SendRequest,
    StreamsMember,
    StreamsMemberConfig,
    TaskOffsetsUpdated,
    TasksListenerCompleted,
    TasksListenerKind,
)
from streamtasks.membership.streams.records import Task
from streamtasks.protocol.errors import KafkaErrorCode
from streamtasks.protocol.streams_group import TaskOffset
from streamtasks.sim.process import HostedProcess

__all__ = ["RESTORE_PER_MS", "LocalState", "StreamsProcess"]

#: How fast a standby or warm-up restores its store from the changelog (records per ms).
RESTORE_PER_MS = 2


class LocalState:
    """One process' state directory: the changelog offset each task's store reached."""

    def __init__(self) -> None:
        self.offsets: dict[Task, int] = {}
        self.at_ms = 0


class StreamsProcess(HostedProcess):
    """One incarnation of a streams process (one member, one thread). ``end_offset(task, now)``
    is the world's changelog end offset of a task."""

    group_protocol = "streams"

    def __init__(
        self,
        *,
        name: str,
        incarnation: int,
        config: StreamsMemberConfig,
        state: LocalState,
        end_offset: Callable[[Task, int], int],
    ) -> None:
        super().__init__(name=name, incarnation=incarnation, static=config.instance_id is not None)
        self.config = config
        self.member = StreamsMember(config)
        self.state = state
        self.end_offset = end_offset
        self.active: frozenset[Task] = frozenset()
        self.standby: frozenset[Task] = frozenset()
        self.warmup: frozenset[Task] = frozenset()
        #: CreateInternalTopics the side has not acted on yet.
        self.create_requests: list[CreateInternalTopics] = []
        #: Tasks that became active here, and of those, the ones this process had warmed up.
        self.took_over = 0
        self.took_over_warm = 0
        self.joined = False
        #: Requests in flight: request id -> when the runtime gives up on the answer (it then
        #: tells the member ``RequestFailed``, as a client's network layer does).
        self.in_flight: dict[int, int] = {}

    # -- what the host and the checks read ----------------------------------------------------

    @property
    def member_id(self) -> str:
        return self.config.member_id

    @property
    def epoch(self) -> int:
        return self.member.member_epoch

    @property
    def settled(self) -> bool:
        return self.member.state is MemberState.STABLE

    @property
    def done(self) -> bool:
        """Left the group (or failed); a process that has not joined yet is not done."""
        return self.joined and self.member.state in (MemberState.UNSUBSCRIBED, MemberState.FATAL)

    @property
    def state_name(self) -> str:
        return self.member.state.value

    # -- the runtime ---------------------------------------------------------------------------

    def _restore(self, now_ms: int) -> None:
        s = self.state
        elapsed = max(0, now_ms - s.at_ms)
        s.at_ms = max(s.at_ms, now_ms)
        for task in self.active:
            s.offsets[task] = self.end_offset(task, now_ms)
        for task in self.standby | self.warmup:
            end = self.end_offset(task, now_ms)
            s.offsets[task] = min(end, s.offsets.get(task, 0) + RESTORE_PER_MS * elapsed)

    def _report(self, now_ms: int) -> list[Any]:
        self._restore(now_ms)
        offsets = tuple(
            TaskOffset(subtopology_id=t[0], partition=t[1], offset=o)
            for t, o in sorted(self.state.offsets.items())
        )
        ends = tuple(
            TaskOffset(subtopology_id=t[0], partition=t[1], offset=self.end_offset(t, now_ms))
            for t in sorted(self.active)
        )
        return self.member.handle(TaskOffsetsUpdated(task_offsets=offsets, task_end_offsets=ends), now_ms)

    def _run(self, actions: list[Any], now_ms: int) -> list[Any]:
        """The member's actions for the host; task callbacks run here, at once."""
        out: list[Any] = []
        queue = list(actions)
        while queue:
            action = queue.pop(0)
            if isinstance(action, InvokeTasksListener):
                self._callback(action, now_ms)
                queue += self.member.handle(
                    TasksListenerCompleted(invocation_id=action.invocation_id), now_ms
                )
            elif isinstance(action, CreateInternalTopics):
                self.create_requests.append(action)
            elif isinstance(action, SendRequest):
                self.in_flight[action.request_id] = now_ms + self.config.request_timeout_ms
                out.append(action)
            else:
                out.append(action)
        return out

    def _callback(self, action: InvokeTasksListener, now_ms: int) -> None:
        self._restore(now_ms)
        if action.kind is TasksListenerKind.LOST:
            self.active = self.standby = self.warmup = frozenset()
        elif action.kind is TasksListenerKind.REVOKED:
            self.active -= frozenset(action.active)
        else:
            new = frozenset(action.active) - self.active
            for task in new:
                self.took_over += 1
                reached = self.state.offsets.get(task)
                if reached is not None and self.end_offset(task, now_ms) - reached <= 100:
                    self.took_over_warm += 1
            self.active = frozenset(action.active)
            self.standby = frozenset(action.standby)
            self.warmup = frozenset(action.warmup)

    # -- the host's calls ----------------------------------------------------------------------

    def subscribe(self, counts: object, now_ms: int) -> list[Any]:
        self.joined = True
        return self._run(self._report(now_ms) + self.member.handle(JoinStreamsGroup(), now_ms), now_ms)

    def respond(self, request_id: int, response: Any, now_ms: int) -> list[Any]:
        self.in_flight.pop(request_id, None)
        actions = self._report(now_ms) + self.member.handle(
            ResponseReceived(request_id=request_id, response=response), now_ms
        )
        return self._run(actions, now_ms)

    def found(self, request_id: int, now_ms: int) -> list[Any]:
        return self._run(self.member.handle(CoordinatorDiscovered(request_id=request_id), now_ms), now_ms)

    def lookup_failed(self, request_id: int, error: KafkaErrorCode, now_ms: int) -> list[Any]:
        self.in_flight.pop(request_id, None)
        return self._run(
            self.member.handle(RequestFailed(request_id=request_id, error=error), now_ms), now_ms
        )

    def leave(self, now_ms: int) -> list[Any]:
        return self._run(self.member.handle(Leave(reason="scenario"), now_ms), now_ms)

    def enforce(self, now_ms: int, reason: str = "scenario") -> bool:
        return False  # streams groups rebalance on the coordinator's side only

    def poll(self, now_ms: int) -> list[Any]:
        actions = self._report(now_ms)
        for request_id, deadline in sorted(self.in_flight.items()):
            if deadline <= now_ms:
                del self.in_flight[request_id]
                failed = RequestFailed(request_id=request_id, error=KafkaErrorCode.REQUEST_TIMED_OUT)
                actions += self.member.handle(failed, now_ms)
        return self._run(actions + self.member.poll(now_ms), now_ms)

    def next_deadline_ms(self) -> int | None:
        deadlines = [d for d in (self.member.next_deadline_ms(), *self.in_flight.values()) if d is not None]
        return min(deadlines, default=None)
