"""Streams groups (KIP-1071) served by ``streamtasks coordinator``: StreamsGroupHeartbeat (API
88) and StreamsGroupDescribe (API 89) v0-1 from :class:`~streamtasks.coordinator.streams.
StreamsGroupCoordinator` (the OffsetCommit / OffsetFetch rules of a streams group are in
:mod:`streamtasks.server.offsets`).

The shape is the consumer groups' (:mod:`streamtasks.server.handlers`): a heartbeat is computed
and applied at once (no await between the two, so writes apply in arrival order), its records
are appended to the log, and it is answered once they are durable. A group id is one kind of
group: a streams heartbeat for a consumer group's id (and the reverse) is GROUP_ID_NOT_FOUND, as
Apache Kafka answers it. The internal topics of a MISSING_INTERNAL_TOPICS status are created
here, as Apache Kafka's broker creates them (Kafka Streams' Java client waits for them; a
streamtasks App creates them too, and the first one wins).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from streamtasks.coordinator import GroupCoordinator
from streamtasks.coordinator.kinds import KindCheck, for_streams_heartbeat
from streamtasks.coordinator.streams import StreamsGroupCoordinator, StreamsResult, configure
from streamtasks.protocol.errors import KafkaErrorCode
from streamtasks.protocol.streams_group import (
    STREAMS_GROUP_DESCRIBE_API_KEY,
    STREAMS_GROUP_DESCRIBE_VERSIONS,
    STREAMS_GROUP_HEARTBEAT_API_KEY,
    STREAMS_GROUP_HEARTBEAT_VERSIONS,
    DescribedStreamsGroup,
    StreamsGroupDescribeResponse,
    StreamsGroupHeartbeatRequest,
    StreamsGroupHeartbeatResponse,
    StreamsGroupStatus,
)
from streamtasks.protocol.streams_group_codec import (
    decode_streams_heartbeat_request,
    encode_streams_heartbeat_response,
)
from streamtasks.protocol.streams_group_describe_codec import (
    decode_streams_describe_request,
    encode_streams_describe_response,
)
from streamtasks.runtime.admin import TopicSpec
from streamtasks.server.guard import Access
from streamtasks.server.log import CoordinatorLog
from streamtasks.server.wire import RequestHeader, response_frame

__all__ = ["VERSIONS", "StreamsApi"]

#: API key -> the versions served.
VERSIONS: dict[int, tuple[int, int]] = {
    STREAMS_GROUP_HEARTBEAT_API_KEY: STREAMS_GROUP_HEARTBEAT_VERSIONS,
    STREAMS_GROUP_DESCRIBE_API_KEY: STREAMS_GROUP_DESCRIBE_VERSIONS,
}
#: Statuses that name topics the coordinator may not know yet: refresh the metadata at once.
_TOPIC_STATUSES = frozenset(
    {int(StreamsGroupStatus.MISSING_SOURCE_TOPICS), int(StreamsGroupStatus.MISSING_INTERNAL_TOPICS)}
)
_log = logging.getLogger("streamtasks.server")


class StreamsApi:
    """APIs 88 and 89 over one streams coordinator, next to the consumer groups' coordinator."""

    def __init__(
        self,
        *,
        coordinator: StreamsGroupCoordinator,
        consumer: GroupCoordinator,
        log: CoordinatorLog,
        clock: Callable[[], int],
        max_groups: int,
        on_unknown_topics: Callable[[], None],
        create_topics: Callable[[list[TopicSpec]], Awaitable[None]] | None = None,
        writable: Callable[[str], Awaitable[None]] | None = None,
    ) -> None:
        self.coordinator = coordinator
        #: Awaited before a heartbeat of a group is computed: returns once no forwarded
        #: transactional commit of the group is in flight (``txn_api.py``).
        self.writable = writable
        self.create_topics = create_topics
        self._creating: set[str] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self.consumer = consumer
        self.log = log
        self.clock = clock
        self.max_groups = max_groups
        self.on_unknown_topics = on_unknown_topics
        self.heartbeats = 0
        #: Empty groups converted from one kind to the other (either way).
        self.conversions = 0
        #: Internal topics the server asked the backing cluster to create (existing ones count).
        self.created_topics = 0

    def group_count(self) -> int:
        return len(self.consumer.groups) + len(self.coordinator.groups)

    def persist(self, records: tuple[Any, ...]) -> asyncio.Future[None]:
        return self.log.append(records)

    async def handle(
        self, header: RequestHeader, body: bytes, client_host: str, access: Access | None
    ) -> bytes:
        if header.api_key == STREAMS_GROUP_HEARTBEAT_API_KEY:
            return await self._heartbeat(header, body, client_host, access)
        return await self._describe(header, body, access)

    def _refusal(
        self, request: StreamsGroupHeartbeatRequest, kind: KindCheck
    ) -> StreamsGroupHeartbeatResponse | None:
        gid = request.group_id
        error, message = kind.error, kind.message
        if (
            error is KafkaErrorCode.NONE
            and not kind.convert
            and gid not in self.coordinator.groups
            and self.group_count() >= self.max_groups
        ):
            error = KafkaErrorCode.GROUP_MAX_SIZE_REACHED
            message = f"this coordinator serves at most {self.max_groups} groups"
        if error is KafkaErrorCode.NONE:
            return None
        return StreamsGroupHeartbeatResponse(
            error=error,
            error_message=message,
            member_id=request.member_id,
            member_epoch=-1,
            heartbeat_interval_ms=0,
        )

    async def _heartbeat(
        self, header: RequestHeader, body: bytes, client_host: str, access: Access | None
    ) -> bytes:
        version = header.api_version
        request = decode_streams_heartbeat_request(body, version)
        if self.writable is not None:
            await self.writable(request.group_id)
        kind = for_streams_heartbeat(self.consumer, request.group_id)
        response = self._refusal(request, kind)
        if access is not None and not access.allows("group", request.group_id, "Read"):
            response = StreamsGroupHeartbeatResponse(
                error=KafkaErrorCode.GROUP_AUTHORIZATION_FAILED,
                error_message="not authorized for this group",
                member_id=request.member_id,
                member_epoch=-1,
                heartbeat_interval_ms=0,
            )
        if response is not None:
            return response_frame(
                header.correlation_id,
                encode_streams_heartbeat_response(response, version),
                flexible_header=True,
            )
        self.heartbeats += 1
        topics = request.topology.subtopologies if request.topology is not None else ()
        image = self.coordinator.image.by_name
        if any(t not in image for s in topics for t in s.source_topics):
            self.on_unknown_topics()
        now = self.clock()
        result = self.coordinator.heartbeat(request, now, client_id=header.client_id, client_host=client_host)
        if kind.convert and result.response.error is not KafkaErrorCode.NONE:
            # Kafka drops a failed heartbeat's records, the deletion's with them: nothing changes
            result = StreamsResult(records=(), response=result.response)
        elif kind.convert:
            self._convert(request.group_id, now)
        answer = self.coordinator.apply(result)
        durable = self.persist(result.records)
        if any(s.status_code in _TOPIC_STATUSES for s in answer.status or ()):
            self._create_internal_topics(request.group_id)
            self.on_unknown_topics()  # topics are being created: look again soon
        if answer.error is not KafkaErrorCode.NONE:
            _log.info(
                "streams heartbeat of %s in %s: %s %s",
                request.member_id,
                request.group_id,
                answer.error.name,
                answer.error_message or "",
            )
        await durable
        return response_frame(
            header.correlation_id, encode_streams_heartbeat_response(answer, version), flexible_header=True
        )

    def _convert(self, group_id: str, now_ms: int) -> None:
        """The empty consumer (classic) group ``group_id`` is deleted before the streams group's
        first records: Apache Kafka's conversion of an empty classic group."""
        deleted = self.consumer.delete_group(group_id, now_ms)
        self.consumer.apply(deleted)
        self.persist(deleted.records)
        self.conversions += 1
        _log.info("converted the empty group %s to a streams group", group_id)

    def convert_to_classic(self, group_id: str, now_ms: int) -> None:
        """A classic JoinGroup for an empty streams group: the streams group's records are
        deleted before the join's (Apache Kafka's conversion back to a classic group)."""
        group = self.coordinator.group(group_id)
        if group is None or group.members:
            return
        deleted = self.coordinator.delete_group(group_id, now_ms)
        self.coordinator.apply(deleted)
        self.persist(deleted.records)
        self.conversions += 1
        _log.info("converted the empty streams group %s to a classic group", group_id)

    async def _describe(self, header: RequestHeader, body: bytes, access: Access | None) -> bytes:
        version = header.api_version
        request = decode_streams_describe_request(body, version)
        response = self.coordinator.describe(request)
        groups = tuple(self._visible(g, access) for g in response.groups)
        answer = StreamsGroupDescribeResponse(groups=groups)
        await self.log.append(())  # answer only what is durable
        return response_frame(
            header.correlation_id, encode_streams_describe_response(answer, version), flexible_header=True
        )

    def _visible(self, g: DescribedStreamsGroup, access: Access | None) -> DescribedStreamsGroup:
        """A described group, or the error the caller gets instead (no right to describe it, or
        the id is a consumer group's)."""
        if access is not None and not access.allows("group", g.group_id, "Describe"):
            return DescribedStreamsGroup(
                error=KafkaErrorCode.GROUP_AUTHORIZATION_FAILED,
                group_id=g.group_id,
                error_message="not authorized for this group",
            )
        if g.group_id in self.consumer.groups:
            return DescribedStreamsGroup(
                error=KafkaErrorCode.GROUP_ID_NOT_FOUND,
                group_id=g.group_id,
                group_state="Dead",
                error_message=f"group {g.group_id} is not a streams group",
            )
        return g

    def _create_internal_topics(self, group_id: str) -> None:
        """Start creating the group's missing internal topics (once per name at a time)."""
        group = self.coordinator.group(group_id)
        if self.create_topics is None or group is None:
            return
        specs = [
            TopicSpec(
                name=info.name,
                partitions=partitions,
                configs={kv.key: kv.value for kv in info.topic_configs},
                replication_factor=info.replication_factor or -1,
            )
            for info, partitions in configure(group.topology, self.coordinator.image).missing_internal
            if partitions > 0 and info.name not in self._creating
        ]
        if not specs:
            return
        names = {s.name for s in specs}
        self._creating |= names
        create = self.create_topics

        async def run() -> None:
            try:
                await create(specs)
                self.created_topics += len(specs)
                _log.info("created internal topics of %s: %s", group_id, ", ".join(sorted(names)))
            except Exception as exc:  # the next heartbeat's status asks again
                _log.warning("creating internal topics of %s failed: %s", group_id, exc)
            finally:
                self._creating -= names
                self.on_unknown_topics()

        task = asyncio.get_running_loop().create_task(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def poll(self, held: frozenset[str] = frozenset()) -> None:
        """Fire the streams groups' due timers (not those of the ``held`` groups); their
        records go to the log."""
        for result in self.coordinator.poll(self.clock(), held):
            self.persist(result.records)
