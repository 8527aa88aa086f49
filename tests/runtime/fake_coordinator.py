"""A small asyncio server that plays a group coordinator which moves: it answers FindCoordinator
(v3) with itself, and OffsetCommit (v8) and OffsetFetch (v7) with the error codes a test scripts
(NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, ... while the coordinator is moving), then with
success. It counts the lookups, so a test sees whether the client looked the coordinator up
again. It can also hang up on FindCoordinator (a broker killed mid-request). Not Kafka: the
live tests and the broker drills use the real one."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import struct
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.api_versions.v3.response import ApiVersion, ApiVersionsResponse
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v3.request import FindCoordinatorRequest
from kio.schema.find_coordinator.v3.response import FindCoordinatorResponse
from kio.schema.offset_commit.v8.request import OffsetCommitRequest
from kio.schema.offset_commit.v8.response import (
    OffsetCommitResponse,
    OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
)
from kio.schema.offset_fetch.v7.request import OffsetFetchRequest
from kio.schema.offset_fetch.v7.response import (
    OffsetFetchResponse,
    OffsetFetchResponsePartition,
    OffsetFetchResponseTopic,
)
from kio.schema.request_header.v2.header import RequestHeader
from kio.schema.types import BrokerId
from kio.serial import entity_reader
from kio.static.primitive import i16, i32, i32Timedelta, i64

from streamtasks.protocol.errors import KafkaErrorCode
from tests.runtime.sasl_broker import _frame

_REQUESTS: dict[tuple[int, int], type[Any]] = {
    (10, 3): FindCoordinatorRequest,
    (8, 8): OffsetCommitRequest,
    (9, 7): OffsetFetchRequest,
    (18, 3): ApiVersionsRequest,
}
_NO_TIME = i32Timedelta.parse(datetime.timedelta(0))


@dataclass
class FakeCoordinator:
    """``commit_errors`` / ``fetch_errors``: the codes the next OffsetCommits (per partition)
    and OffsetFetches (top level) answer, in order; then NONE. ``committed``: what OffsetFetch
    answers once it succeeds. ``hang_up_finds``: FindCoordinators answered by closing.
    ``delay_s``: how long OffsetCommits and OffsetFetches take."""

    commit_errors: deque[KafkaErrorCode] = field(default_factory=deque)
    fetch_errors: deque[KafkaErrorCode] = field(default_factory=deque)
    committed: dict[tuple[str, int], int] = field(default_factory=dict)
    hang_up_finds: int = 0
    #: Seconds each OffsetCommit and OffsetFetch waits before it is answered (requests on one
    #: connection are answered in order, as Kafka does: the ones sent behind it wait too).
    delay_s: float = 0.0
    #: A hung broker (SIGSTOP): it accepts connections and reads, and answers nothing.
    mute: bool = False
    #: The port FindCoordinator names (0: this server's own).
    names_port: int = 0
    finds: int = 0
    commits: int = 0
    fetches: int = 0
    port: int = 0
    _server: asyncio.Server | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def __aenter__(self) -> FakeCoordinator:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                size = struct.unpack(">i", await reader.readexactly(4))[0]
                payload = await reader.readexactly(size)
                if self.mute:
                    continue
                if self.delay_s and struct.unpack_from(">h", payload, 0)[0] in (8, 9):
                    await asyncio.sleep(self.delay_s)
                answer = self._answer(payload)
                if answer is None:
                    break
                writer.write(answer)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    def _answer(self, payload: bytes) -> bytes | None:
        key = struct.unpack_from(">hh", payload, 0)
        view = memoryview(payload)
        header, offset = entity_reader(RequestHeader)(view, 0)
        request, _ = entity_reader(_REQUESTS[key])(view, offset)
        cid = int(header.correlation_id)
        if isinstance(request, ApiVersionsRequest):  # asked first by a client with settings
            keys = tuple(
                ApiVersion(api_key=i16(k), min_version=i16(v), max_version=i16(v)) for k, v in _REQUESTS
            )
            return _frame(
                cid, ApiVersionsResponse(error_code=ErrorCode.none, api_keys=keys, throttle_time=_NO_TIME)
            )
        if isinstance(request, FindCoordinatorRequest):
            self.finds += 1
            if self.hang_up_finds > 0:
                self.hang_up_finds -= 1
                return None
            return _frame(
                cid,
                FindCoordinatorResponse(
                    throttle_time=_NO_TIME, error_code=ErrorCode.none, error_message=None,
                    node_id=BrokerId(1), host="127.0.0.1", port=i32(self.names_port or self.port),
                ),
            )  # fmt: skip
        if isinstance(request, OffsetCommitRequest):
            self.commits += 1
            code = ErrorCode(int(self.commit_errors.popleft() if self.commit_errors else 0))
            topics = tuple(
                OffsetCommitResponseTopic(
                    name=t.name,
                    partitions=tuple(
                        OffsetCommitResponsePartition(partition_index=p.partition_index, error_code=code)
                        for p in t.partitions
                    ),
                )
                for t in request.topics
            )
            return _frame(cid, OffsetCommitResponse(throttle_time=_NO_TIME, topics=topics))
        self.fetches += 1
        top = ErrorCode(int(self.fetch_errors.popleft() if self.fetch_errors else 0))
        fetched = tuple(
            OffsetFetchResponseTopic(
                name=t.name,
                partitions=tuple(
                    OffsetFetchResponsePartition(
                        partition_index=p, committed_offset=i64(self.committed.get((t.name, p), -1)),
                        committed_leader_epoch=i32(-1), metadata=None, error_code=ErrorCode.none,
                    )
                    for p in t.partition_indexes
                ),
            )
            for t in request.topics or ()
        )  # fmt: skip
        return _frame(cid, OffsetFetchResponse(throttle_time=_NO_TIME, topics=fetched, error_code=top))
