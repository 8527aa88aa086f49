"""What the server answers itself: ApiVersions (the backing broker's list, rewritten),
FindCoordinator for groups (itself), ConsumerGroupHeartbeat, ConsumerGroupDescribe,
StreamsGroupHeartbeat, StreamsGroupDescribe (:mod:`.streams_api`),
Prepare/InstallAssignment, the classic protocol's JoinGroup/SyncGroup/Heartbeat/LeaveGroup
(classic members of the consumer group), OffsetCommit, OffsetFetch, TxnOffsetCommit
(:mod:`.txn_api`: forwarded to the backing cluster once checked). Every write is computed
and applied at once (in arrival order: no await between the two) and answered after its
records are durable; a JoinGroup the coordinator parks is answered when a later write answers
it, after that write's records are durable. A write of a group waits while a forwarded commit
of that group is in flight (:meth:`.txn_api.TxnOffsets.writable`).

A handler returns the whole response frame; it raises :class:`~streamtasks.errors.DecodeError`
for a request it cannot read (the connection is then closed, as a Kafka broker does).
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode

from streamtasks.coordinator import GroupCoordinator, Record, Result
from streamtasks.coordinator.kinds import for_consumer_write
from streamtasks.coordinator.parked import ParkJoin
from streamtasks.coordinator.streams import StreamsGroupCoordinator
from streamtasks.errors import DecodeError
from streamtasks.protocol import assignment_rpc as rpc
from streamtasks.protocol import consumer_group_codec as codec
from streamtasks.protocol.classic_group import JoinGroupRequest, JoinGroupResponse
from streamtasks.protocol.consumer_group import (
    CONSUMER_GROUP_DESCRIBE_API_KEY,
    CONSUMER_GROUP_HEARTBEAT_API_KEY,
    ConsumerGroupHeartbeatResponse,
)
from streamtasks.protocol.consumer_protocol import decode_subscription
from streamtasks.protocol.errors import KafkaErrorCode
from streamtasks.runtime.admin import TopicSpec
from streamtasks.server import classic_api, denials, offset_api, streams_api, txn_api
from streamtasks.server.api_versions import (
    FIND_COORDINATOR,
    MAX_API_VERSIONS_VERSION,
    REFUSED_APIS,
    SERVED_VERSIONS,
    advertised_apis,
    api_versions_response,
    rewrite_api_versions,
    unsupported_api_versions,
)
from streamtasks.server.cluster_groups import ClusterGroups
from streamtasks.server.guard import Access
from streamtasks.server.log import CoordinatorLog
from streamtasks.server.offsets import OffsetStore
from streamtasks.server.wire import (
    RequestHeader,
    decode_kio_request,
    encode_kio_response,
    kio_response_class,
    response_frame,
)

__all__ = [
    "FIND_COORDINATOR",
    "MAX_API_VERSIONS_VERSION",
    "unsupported_api_versions",
    "REFUSED_APIS",
    "SERVED_VERSIONS",
    "Handlers",
    "Stats",
    "advertised_apis",
    "api_versions_response",
    "rewrite_api_versions",
]

_GROUP_KEY_TYPE = 0
_log = logging.getLogger("streamtasks.server")
_ZERO = datetime.timedelta(0)


@dataclass(slots=True)
class Stats:
    heartbeats: int = 0
    classic: int = 0
    commits: int = 0
    fetches: int = 0
    forwarded: int = 0
    closed_malformed: int = 0
    #: Client connections closed because the backing broker a request was forwarded to closed
    #: or failed (a broker that died, hung past the timeout or restarted), not the client.
    closed_by_broker: int = 0
    #: On a secured listener: SASL exchanges completed / failed, requests denied by the ACLs.
    sasl_ok: int = 0
    sasl_failed: int = 0
    denied: int = 0
    by_api: dict[int, int] = field(default_factory=dict)


def _log_error(what: str, member_id: str, group_id: str, error: KafkaErrorCode) -> None:
    if error is not KafkaErrorCode.NONE:
        _log.info("%s of %s in %s: %s", what, member_id, group_id, error.name)


class Handlers:
    """The server's own APIs over one coordinator, one offset store and one log."""

    def __init__(
        self,
        *,
        coordinator: GroupCoordinator,
        offsets: OffsetStore,
        log: CoordinatorLog,
        clock: Callable[[], int],
        node_id: int,
        advertised: tuple[str, int],
        max_groups: int,
        on_unknown_topics: Callable[[], None],
        streams: StreamsGroupCoordinator | None = None,
        create_topics: Callable[[list[TopicSpec]], Awaitable[None]] | None = None,
        cluster: ClusterGroups | None = None,
    ) -> None:
        self.coordinator = coordinator
        streams = streams or StreamsGroupCoordinator(image=coordinator.image)
        #: TxnOffsetCommit, transactional groups' offsets, and the hold (``cluster`` None:
        #: TxnOffsetCommit is answered COORDINATOR_NOT_AVAILABLE).
        self.txn = txn_api.TxnOffsets(coordinator=coordinator, streams=streams, log=log, cluster=cluster)
        self.streams = streams_api.StreamsApi(
            coordinator=streams,
            consumer=coordinator,
            writable=self.txn.writable,
            log=log,
            clock=clock,
            max_groups=max_groups,
            on_unknown_topics=on_unknown_topics,
            create_topics=create_topics,
        )
        self.offsets = offsets
        self.log = log
        self.clock = clock
        self.node_id = node_id
        self.advertised = advertised
        self.max_groups = max_groups
        self.on_unknown_topics = on_unknown_topics
        self.stats = Stats()
        self.parked = classic_api.ParkedJoinFutures()

    def serves(self, api_key: int) -> bool:
        return api_key in SERVED_VERSIONS

    def group_states(self) -> dict[str, str]:
        """Every group's id and state name (ListGroups on a secured listener)."""
        streams = self.streams.coordinator
        return {
            **{gid: streams.group_state(gid).value for gid in streams.groups},
            **{gid: g.state.value for gid, g in self.coordinator.groups.items()},
        }

    async def _durable(self, records: tuple[Record, ...] | list[Any]) -> None:
        await self.log.append(records)

    def persist(self, result: Result[Any]) -> asyncio.Future[None]:
        """Append an applied write's records; the joins it answers are answered once they
        are durable. Every applied coordinator write goes through here (timers too)."""
        durable = self.log.append(result.records)
        self.parked.answer_when_durable(result.joins, durable)
        return durable

    async def handle(
        self, header: RequestHeader, body: bytes, client_host: str, access: Access | None = None
    ) -> bytes | None:
        """The response frame; None when the request must be forwarded instead (FindCoordinator
        for transactions or share groups). ``access``: the connection's principal and the ACLs
        (None: an open listener); a group the principal may not use is answered
        GROUP_AUTHORIZATION_FAILED and nothing is written."""
        api, version = header.api_key, header.api_version
        lo, hi = SERVED_VERSIONS[api]
        if not lo <= version <= hi:
            raise DecodeError(f"api {api} v{version} is not served (only v{lo}-v{hi})")
        self.stats.by_api[api] = self.stats.by_api.get(api, 0) + 1
        cid = header.correlation_id
        if api in streams_api.VERSIONS:
            return await self.streams.handle(header, body, client_host, access)
        if api == CONSUMER_GROUP_HEARTBEAT_API_KEY:
            return await self._heartbeat(header, body, client_host, access)
        if api == CONSUMER_GROUP_DESCRIBE_API_KEY:
            request = codec.decode_describe_request(body, version)
            response = self.coordinator.describe(request)
            if access is not None:
                hidden = {g for g in request.group_ids if not access.allows("group", g, "Describe")}
                response = denials.filter_describe(response, hidden)
            await self._durable(())  # answer only what is durable
            return response_frame(
                cid, codec.encode_describe_response(response, version), flexible_header=True
            )
        if api == txn_api.TXN_OFFSET_COMMIT:  # not served on a secured listener (session.py)
            return await self.txn.txn_offset_commit(version, body, cid)
        if api == rpc.PREPARE_ASSIGNMENT_API_KEY:
            prepare = rpc.decode_prepare_request(body, version)
            if access is not None and not access.allows("group", prepare.group_id, "Read"):
                return denials.denied_prepare(version, cid)
            await self.txn.writable(prepare.group_id)
            prepared = self.coordinator.prepare_assignment(prepare, self.clock())
            answer = self.coordinator.apply(prepared)
            await self.persist(prepared)
            return response_frame(cid, rpc.encode_prepare_response(answer, version), flexible_header=True)
        if api == rpc.INSTALL_ASSIGNMENT_API_KEY:
            install = rpc.decode_install_request(body, version)
            if access is not None and not access.allows("group", install.group_id, "Read"):
                return denials.denied_install(version, cid)
            await self.txn.writable(install.group_id)
            installed = self.coordinator.install_assignment(install, self.clock())
            done = self.coordinator.apply(installed)
            await self.persist(installed)
            return response_frame(cid, rpc.encode_install_response(done, version), flexible_header=True)
        if api in classic_api.VERSIONS:
            self.stats.classic += 1
            return await self._classic(header, body, client_host, access)
        if api == offset_api.OFFSET_COMMIT:
            return await self._offset_commit(version, body, cid, access)
        if api == offset_api.OFFSET_FETCH:
            return await self._offset_fetch(version, body, cid, access)
        return self._find_coordinator(header, body, access)

    async def _offset_commit(self, version: int, body: bytes, cid: int, access: Access | None) -> bytes:
        """OffsetCommit: the records written to the log, then the answer (Kafka's order)."""
        api = offset_api.OFFSET_COMMIT
        request = decode_kio_request(api, version, body)
        if access is not None and not access.allows("group", str(request.group_id), "Read"):
            return denials.denied_commit(request, version, cid)
        transactional = str(request.group_id) in self.txn.transactional  # its offsets are in the cluster
        if transactional:
            await self.txn.commit_turn(str(request.group_id))  # checked below, then held at once
        records, response = offset_api.commit(
            request,
            version,
            coordinator=self.coordinator,
            store=self.offsets,
            now_ms=self.clock(),
            streams=self.streams.coordinator,
        )
        self.stats.commits += 1
        if transactional:
            return encode_kio_response(
                await self.txn.forward_commit(request, version, response, records), cid
            )
        for record in records:
            self.offsets.replay(record)
        await self._durable(records)
        return encode_kio_response(response, cid)

    async def _offset_fetch(self, version: int, body: bytes, cid: int, access: Access | None) -> bytes:
        """OffsetFetch, answered once every earlier write is durable."""
        api = offset_api.OFFSET_FETCH
        request = decode_kio_request(api, version, body)
        denied: set[str] = set()
        if access is not None and version < 8:
            if not access.allows("group", str(request.group_id), "Read"):
                return denials.denied_offset_fetch(version, cid)
        elif access is not None:
            denied = {
                str(g.group_id) for g in request.groups if not access.allows("group", str(g.group_id), "Read")
            }
        response = offset_api.fetch(
            request,
            version,
            coordinator=self.coordinator,
            store=self.offsets,
            streams=self.streams.coordinator,
            cluster=await self.txn.fetch_request(request, version),
        )
        response = denials.filter_offset_fetch(response, denied)
        self.stats.fetches += 1
        await self._durable(())
        return encode_kio_response(response, cid)

    async def _heartbeat(
        self, header: RequestHeader, body: bytes, client_host: str, access: Access | None
    ) -> bytes:
        version = header.api_version
        request = codec.decode_heartbeat_request(body, version)
        if access is not None and not access.allows("group", request.group_id, "Read"):
            return denials.denied_heartbeat(version, header.correlation_id)
        await self.txn.writable(request.group_id)
        self.stats.heartbeats += 1
        refusal = self._refusal(request.group_id)
        if refusal is not None:
            refused = ConsumerGroupHeartbeatResponse(
                error=refusal[0], error_message=refusal[1], member_epoch=-1, heartbeat_interval_ms=0
            )
            return response_frame(
                header.correlation_id, codec.encode_heartbeat_response(refused, version), flexible_header=True
            )
        names = request.subscribed_topic_names or ()
        if any(n not in self.coordinator.image.by_name for n in names):
            self.on_unknown_topics()
        result = self.coordinator.heartbeat(
            request, self.clock(), client_id=header.client_id, client_host=client_host
        )
        response = self.coordinator.apply(result)
        durable = self.persist(result)
        if response.error is not KafkaErrorCode.NONE:
            _log.info(
                "heartbeat of %s in %s: %s %s",
                request.member_id,
                request.group_id,
                response.error.name,
                response.error_message or "",
            )
        await durable
        return response_frame(
            header.correlation_id, codec.encode_heartbeat_response(response, version), flexible_header=True
        )

    async def _classic(
        self, header: RequestHeader, body: bytes, client_host: str, access: Access | None
    ) -> bytes:
        """JoinGroup, SyncGroup, Heartbeat, LeaveGroup of a classic member."""
        api, version, cid = header.api_key, header.api_version, header.correlation_id
        request = decode_kio_request(api, version, body)
        if access is not None and not access.allows("group", str(request.group_id), "Read"):
            return denials.denied_classic(api, version, cid, str(getattr(request, "member_id", "")))
        await self.txn.writable(str(request.group_id))
        now = self.clock()
        if api == classic_api.JOIN_GROUP:
            join = classic_api.join_request(request)
            refusal = self._refusal(join.group_id, classic_join=True)
            if refusal is not None:
                refused = JoinGroupResponse(error=refusal[0], member_id=join.member_id)
                return encode_kio_response(classic_api.join_response(refused, version), cid)
            self.streams.convert_to_classic(join.group_id, now)
            self._poke_for_topics(join)
            joined = self.coordinator.join_group(
                join,
                now,
                new_member_id=f"{header.client_id or 'member'}-{uuid.uuid4()}",
                api_version=version,
                client_id=header.client_id,
                client_host=client_host,
            )
            response = self.coordinator.apply(joined)
            parked = [op.parked.member_id for op in joined.joins if isinstance(op, ParkJoin)]
            waiting = self.parked.wait(join.group_id, parked[0]) if parked else None
            await self.persist(joined)
            if waiting is not None:
                response = await waiting
            assert response is not None
            _log_error("join", response.member_id, join.group_id, response.error)
            return encode_kio_response(classic_api.join_response(response, version), cid)
        if api == classic_api.SYNC_GROUP:
            sync = classic_api.sync_request(request)
            synced = self.coordinator.sync_group(sync, now)
            answer = self.coordinator.apply(synced)
            durable = self.persist(synced)
            _log_error("sync", sync.member_id, sync.group_id, answer.error)
            await durable
            return encode_kio_response(classic_api.sync_response(answer, version), cid)
        if api == classic_api.HEARTBEAT:
            heartbeat = classic_api.heartbeat_request(request)
            beat = self.coordinator.classic_heartbeat(heartbeat, now)
            answered = self.coordinator.apply(beat)
            durable = self.persist(beat)
            if answered.error is not KafkaErrorCode.REBALANCE_IN_PROGRESS:  # (routine)
                _log_error("classic heartbeat", heartbeat.member_id, heartbeat.group_id, answered.error)
            await durable
            return encode_kio_response(classic_api.heartbeat_response(answered, version), cid)
        leave = classic_api.leave_request(request)
        left = self.coordinator.leave_group(leave, now)
        gone = self.coordinator.apply(left)
        await self.persist(left)
        for member in gone.members:
            _log_error("leave", member.member_id, leave.group_id, member.error)
        return encode_kio_response(classic_api.leave_response(gone, version), cid)

    def _refusal(self, group_id: str, *, classic_join: bool = False) -> tuple[KafkaErrorCode, str] | None:
        """A consumer group's write refused before the coordinator sees it: the id is a streams
        group's (``coordinator/kinds.py``), or a new group beyond ``max_groups``."""
        kind = for_consumer_write(self.streams.coordinator, group_id, classic_join=classic_join)
        if kind.error is not KafkaErrorCode.NONE:
            return kind.error, kind.message
        new = not kind.convert and group_id not in self.coordinator.groups
        if new and self.streams.group_count() >= self.max_groups:
            return (
                KafkaErrorCode.GROUP_MAX_SIZE_REACHED,
                f"this coordinator serves at most {self.max_groups} groups",
            )
        return None

    def _poke_for_topics(self, join: JoinGroupRequest) -> None:
        """A subscription naming a topic the coordinator does not know: refresh metadata."""
        if not join.protocols:
            return
        try:
            topics = decode_subscription(join.protocols[0].metadata).topics
        except DecodeError:
            return  # the coordinator answers it
        if any(t not in self.coordinator.image.by_name for t in topics):
            self.on_unknown_topics()

    def _find_coordinator(self, header: RequestHeader, body: bytes, access: Access | None) -> bytes | None:
        version = header.api_version
        request = decode_kio_request(FIND_COORDINATOR, version, body)
        if int(getattr(request, "key_type", _GROUP_KEY_TYPE)) != _GROUP_KEY_TYPE:
            return None
        host, port = self.advertised
        response_cls = kio_response_class(FIND_COORDINATOR, version)
        none = ErrorCode(0)

        def allowed(key: str) -> bool:  # Kafka: Describe on the group
            return access is None or access.allows("group", key, "Describe")

        if version < 4:
            ok = allowed(str(request.key))
            response = offset_api.make(
                response_cls,
                throttle_time=_ZERO,
                error_code=none if ok else ErrorCode(int(denials.DENIED)),
                error_message=None,
                node_id=self.node_id if ok else -1,
                host=host if ok else "",
                port=port if ok else -1,
            )
        else:
            coordinator_cls = offset_api.element(response_cls, "coordinators")
            response = response_cls(
                throttle_time=_ZERO,
                coordinators=tuple(
                    coordinator_cls(
                        key=key,
                        node_id=self.node_id,
                        host=host,
                        port=port,
                        error_code=none,
                        error_message=None,
                    )
                    if allowed(str(key))
                    else coordinator_cls(
                        key=key,
                        node_id=-1,
                        host="",
                        port=-1,
                        error_code=ErrorCode(int(denials.DENIED)),
                        error_message=None,
                    )
                    for key in request.coordinator_keys
                ),
            )
        return encode_kio_response(response, header.correlation_id)
