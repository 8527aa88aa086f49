"""The asyncio driver of a streams-group member (KIP-1071, ``group_protocol="streams"``).

It owns no protocol logic: it runs a :class:`~streamtasks.membership.streams.StreamsMember`
through the loop the classic and KIP-848 drivers share
(:class:`~streamtasks.runtime.member_loop.MemberLoop`: coordinator lookup, request tasks,
error reports, timers) and executes the streams member's own actions, as Apache Kafka's
``StreamsMembershipManager`` hands them to Kafka Streams' ``StreamThread``:

* ``SendRequest``: StreamsGroupHeartbeat (API key 88, v1) on the group coordinator's
  connection (streamtasks' codec); a response that says the coordinator moved makes the client
  look it up again;
* ``InvokeTasksListener``: the tasks become the consumer's partitions
  (:class:`~streamtasks.runtime.streams_tasks.TaskPartitions`). REVOKED: the host flushes
  (``before_commit``), the processed offsets of the revoked partitions are committed with the
  member id and epoch (OffsetCommit v9), then the partitions go (``AssignmentChanged``) and the
  listener hears of them. ASSIGNED: the active tasks' partitions are owned, the standbys and
  warm-ups ride along as assignment user data. LOST (fenced): every partition goes, lost (the
  host closes their tasks dirty), nothing is committed. Then ``TasksListenerCompleted``;
* ``CreateInternalTopics``, ``ShutdownApplication``, ``EndpointsChanged`` (which endpoints
  host which partitions: what interactive queries route by): the host's;
* task offsets: the host's changelog offset sums and end offsets, posted every
  ``offsets_interval_ms`` (the member sends the latest every ``TaskOffsetIntervalMs``).
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from streamtasks.errors import BrokerError, DecodeError, LocalProtocolError
from streamtasks.membership.common import (
    AssignmentChanged,
    CommitOffsets,
    ErrorReported,
    InvokeListener,
    ListenerKind,
)
from streamtasks.membership.streams import (
    CreateInternalTopics,
    EndpointsChanged,
    InvokeTasksListener,
    JoinStreamsGroup,
    ResponseReceived,
    ShutdownApplication,
    StreamsMember,
    TaskOffsetsUpdated,
    TasksListenerCompleted,
    TasksListenerKind,
)
from streamtasks.protocol.errors import KafkaErrorCode
from streamtasks.protocol.streams_group import (
    STREAMS_GROUP_HEARTBEAT_API_KEY,
    StreamsGroupHeartbeatRequest,
    TopicInfo,
)
from streamtasks.protocol.streams_group_codec import (
    decode_streams_heartbeat_response,
    encode_streams_heartbeat_request,
)
from streamtasks.runtime.connection import COORDINATOR_MOVED, AsyncConnection, GroupCoordinatorClient
from streamtasks.runtime.consumer_driver import require_api, send_consumer_group_request
from streamtasks.runtime.member_loop import DriverHost, EpochMemberLoop
from streamtasks.runtime.streams_tasks import TaskPartitions, assignment_user_data
from topology.ids import TopicPartition

__all__ = ["HEARTBEAT_VERSION", "StreamsGroupDriver", "StreamsGroupHost", "require_streams_group_heartbeat"]

log = logging.getLogger("streamtasks.driver")

#: StreamsGroupHeartbeat v1 (Apache Kafka 4.4).
HEARTBEAT_VERSION = 1


async def require_streams_group_heartbeat(conn: AsyncConnection, where: str) -> None:
    """Raise :class:`BrokerError` unless the server behind ``conn`` advertises
    StreamsGroupHeartbeat v1 (Tansu, and Apache Kafka before 4.1, do not: the member would
    retry forever)."""
    await require_api(
        conn,
        where,
        api_key=STREAMS_GROUP_HEARTBEAT_API_KEY,
        version=HEARTBEAT_VERSION,
        what="StreamsGroupHeartbeat",
        hint="group_protocol='streams' needs Apache Kafka 4.2+ with streams groups enabled; use "
        "group_protocol='classic' or 'consumer' here",
    )


class StreamsGroupHost(DriverHost, Protocol):
    """The consumer's side, plus what a streams group asks of the application."""

    def streams_task_offsets(self) -> TaskOffsetsUpdated | None: ...

    async def streams_create_topics(self, topics: tuple[TopicInfo, ...]) -> None: ...

    def streams_shutdown(self, detail: str) -> None: ...

    def streams_endpoints(self, change: EndpointsChanged) -> None: ...


class StreamsGroupDriver(EpochMemberLoop[StreamsMember]):
    """Runs one streams-group member until it has left the group (or failed)."""

    _host: StreamsGroupHost

    def __init__(
        self,
        member: StreamsMember,
        client: GroupCoordinatorClient,
        host: StreamsGroupHost,
        *,
        offsets_interval_ms: int = 5_000,
        **kwargs: Any,
    ) -> None:
        super().__init__(member, client, host, **kwargs)
        self._partitions = TaskPartitions(member.config.topology)
        self._offsets_interval_ms = offsets_interval_ms
        self._next_offsets_ms = 0
        #: The partitions of the active tasks the host runs now.
        self._owned: frozenset[TopicPartition] = frozenset()
        self.post(JoinStreamsGroup())

    # -- MemberLoop's hooks ---------------------------------------------------------------

    async def request(self, request: Any, timeout_ms: int) -> Any:
        if not isinstance(request, StreamsGroupHeartbeatRequest):
            return await send_consumer_group_request(self._client, request, timeout_s=timeout_ms / 1000)
        body = encode_streams_heartbeat_request(request, HEARTBEAT_VERSION)
        raw = await self._client.send_raw(
            STREAMS_GROUP_HEARTBEAT_API_KEY, HEARTBEAT_VERSION, body, timeout_s=timeout_ms / 1000
        )
        response = decode_streams_heartbeat_response(raw, HEARTBEAT_VERSION)
        if response.error in COORDINATOR_MOVED:
            await self._client.reset()
        return response

    def response_event(self, request_id: int, response: Any) -> ResponseReceived:
        log.debug("<- %s", response)
        return ResponseReceived(request_id=request_id, response=response)

    async def refresh_metadata(self) -> None:
        """The broker tracks the topics (statuses say what is missing): nothing to post."""

    def due_events(self, now_ms: int) -> list[Any]:
        if now_ms < self._next_offsets_ms:
            return []
        self._next_offsets_ms = now_ms + self._offsets_interval_ms
        update = self._host.streams_task_offsets()
        return [] if update is None else [update]

    def own_deadline_ms(self) -> int | None:
        return self._next_offsets_ms

    async def _execute(self, actions: list[Any]) -> None:
        for action in actions:
            if isinstance(action, InvokeTasksListener):
                failed = False
                try:
                    await self._tasks_changed(action)
                except Exception as exc:
                    failed = True
                    log.warning("streams task callback %s raised: %r", action.kind.value, exc)
                    if self._listener_error is None:
                        self._listener_error = exc
                self.post(TasksListenerCompleted(invocation_id=action.invocation_id, failed=failed))
            elif isinstance(action, CreateInternalTopics):
                log.info("the broker reports missing internal topics (%s): creating them", action.detail)
                try:
                    await self._host.streams_create_topics(action.topics)
                except Exception as exc:
                    log.warning("creating the internal topics failed (the broker asks again): %r", exc)
            elif isinstance(action, ShutdownApplication):
                self._host.streams_shutdown(action.detail)
            elif isinstance(action, EndpointsChanged):
                log.debug("endpoints at epoch %d: %s", action.epoch, action.endpoints)
                self._host.streams_endpoints(action)
            else:
                await super()._execute([action])

    # -- the task callbacks ---------------------------------------------------------------

    async def _tasks_changed(self, call: InvokeTasksListener) -> None:
        if call.kind is TasksListenerKind.REVOKED:
            revoked = frozenset(self._partitions.of(call.active)) & self._owned
            await self._commit_before_revoke(tuple(sorted(revoked)), call.member_epoch)
            await self._apply(call, self._owned - revoked, user_data=b"", lost=())
            await self._listener(call, ListenerKind.REVOKED, revoked)
        elif call.kind is TasksListenerKind.LOST:
            lost = self._owned
            await self._apply(call, frozenset(), user_data=b"", lost=tuple(sorted(lost)))
            await self._listener(call, ListenerKind.LOST, lost)
        else:
            owned = frozenset(self._partitions.of(call.active))
            added = owned - self._owned
            data = assignment_user_data(call.active, call.standby, call.warmup)
            await self._apply(call, owned, user_data=data, lost=())
            await self._listener(call, ListenerKind.ASSIGNED, added)

    async def _apply(
        self,
        call: InvokeTasksListener,
        owned: frozenset[TopicPartition],
        *,
        user_data: bytes,
        lost: tuple[TopicPartition, ...],
    ) -> None:
        change = AssignmentChanged(
            generation=call.member_epoch,
            owned=tuple(sorted(owned)),
            added=tuple(sorted(owned - self._owned)),
            removed=tuple(sorted(self._owned - owned)),
            user_data=user_data,
            lost=lost,
        )
        self._owned = owned
        await self._host.assignment_changed(change)

    async def _listener(
        self, call: InvokeTasksListener, kind: ListenerKind, partitions: frozenset[TopicPartition]
    ) -> None:
        if partitions or kind is ListenerKind.ASSIGNED:
            await self._host.invoke_listener(
                InvokeListener(
                    invocation_id=call.invocation_id,
                    kind=kind,
                    partitions=tuple(sorted(partitions)),
                    generation=call.member_epoch,
                )
            )

    async def _commit_before_revoke(self, partitions: tuple[TopicPartition, ...], epoch: int) -> None:
        """Flush and commit the processed offsets of ``partitions`` with the member's epoch
        (the broker refuses the commit of a member whose epoch moved on: the partitions go
        anyway, their records are processed again by the next owner)."""
        if not partitions:
            return
        await self._host.before_commit(partitions)
        config = self.member.config
        request = CommitOffsets(
            request_id=0,
            group_id=config.group_id,
            member_id=config.member_id,
            generation_id=epoch,
            group_instance_id=config.instance_id,
            partitions=partitions,
        ).to_request(self._host.positions(), self._host.commit_metadata())
        if not request.offsets:
            return
        try:
            response = await self.request(request, self._request_timeout_ms)
        except (BrokerError, DecodeError, LocalProtocolError) as exc:
            log.warning("the commit before revoking %s failed: %s", list(partitions), exc)
            return
        failed = [(tp, err) for tp, err in response.errors if err is not KafkaErrorCode.NONE]
        if failed:
            log.warning("the commit before revoking was refused: %s", failed)
            self._host.error_reported(
                ErrorReported(reason=f"commit before revoke refused: {failed}", code=failed[0][1])
            )
