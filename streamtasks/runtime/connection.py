"""Asyncio Kafka connections: one multiplexed connection per broker, and a client for the
group coordinator that finds it with FindCoordinator and follows it when it moves."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from typing import Any, TypeVar

from streamtasks.errors import BrokerError, DecodeError
from streamtasks.protocol.errors import KafkaErrorCode
from streamtasks.runtime.framing import (
    FrameDecoder,
    decode_response,
    encode_raw_request,
    encode_request,
    split_flexible_response,
)
from streamtasks.runtime.group_wire import (
    GroupRequest,
    KFindCoordinatorResponse,
    find_coordinator_request,
    from_wire,
    response_type,
    to_wire,
)

__all__ = [
    "COORDINATOR_GONE",
    "AsyncConnection",
    "ConnectionLost",
    "GroupCoordinatorClient",
    "open_any",
    "parse_bootstrap",
]

R = TypeVar("R")

#: Responses that mean "ask someone else": the coordinator moved or is not there yet.
COORDINATOR_GONE = frozenset(
    {
        KafkaErrorCode.NOT_COORDINATOR,
        KafkaErrorCode.COORDINATOR_NOT_AVAILABLE,
        KafkaErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    }
)


class ConnectionLost(BrokerError):
    """The connection closed or failed while requests were in flight."""


def parse_bootstrap(bootstrap_servers: str) -> list[tuple[str, int]]:
    out: list[tuple[str, int]] = []
    for item in bootstrap_servers.split(","):
        host, sep, port = item.strip().rpartition(":")
        if not sep or not port.isdigit() or not host:
            raise BrokerError(f"bootstrap servers must be host:port[,host:port], got {bootstrap_servers!r}")
        out.append((host, int(port)))
    return out


class AsyncConnection:
    """Pipelined requests over one TCP connection, answered by correlation id."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, client_id: str) -> None:
        self._reader = reader
        self._writer = writer
        self._client_id = client_id
        self._ids = itertools.count(1)
        #: correlation id -> (future, kio response class; None: the raw body of a flexible response)
        self._pending: dict[int, tuple[asyncio.Future[Any], type[Any] | None]] = {}
        self._closed: BaseException | None = None
        self._task = asyncio.get_running_loop().create_task(self._read_loop())

    @classmethod
    async def open(
        cls, host: str, port: int, *, client_id: str = "streamtasks", timeout_s: float = 10.0
    ) -> AsyncConnection:
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout_s)
        except (OSError, TimeoutError) as exc:
            raise ConnectionLost(f"cannot connect to {host}:{port}: {exc or 'timed out'}") from exc
        return cls(reader, writer, client_id)

    @property
    def closed(self) -> bool:
        return self._closed is not None

    async def call(self, request: Any, response_cls: type[R], *, timeout_s: float = 30.0) -> R:
        correlation_id = next(self._ids)
        frame = encode_request(request, correlation_id=correlation_id, client_id=self._client_id)
        result: R = await self._exchange(
            correlation_id, frame, response_cls, type(request).__name__, timeout_s
        )
        return result

    async def call_raw(
        self, api_key: int, api_version: int, body: bytes, *, timeout_s: float = 30.0
    ) -> bytes:
        """Send a request body encoded elsewhere (a flexible version: request header v2);
        return the response body (after response header v1)."""
        correlation_id = next(self._ids)
        frame = encode_raw_request(
            api_key, api_version, body, correlation_id=correlation_id, client_id=self._client_id
        )
        result: bytes = await self._exchange(correlation_id, frame, None, f"api {api_key}", timeout_s)
        return result

    async def _exchange(
        self, correlation_id: int, frame: bytes, response_cls: type[Any] | None, what: str, timeout_s: float
    ) -> Any:
        if self._closed is not None:
            raise ConnectionLost(f"connection is closed: {self._closed}")
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[correlation_id] = (future, response_cls)
        try:
            self._writer.write(frame)
            await self._writer.drain()
            # Not wait_for: on Python 3.11 it can return the result and drop a cancellation that
            # arrives as the response lands (bpo-42130), leaving the caller running.
            async with asyncio.timeout(timeout_s):
                return await future
        except (OSError, TimeoutError) as exc:
            raise ConnectionLost(f"{what} failed: {exc or 'timed out'}") from exc
        finally:
            self._pending.pop(correlation_id, None)

    async def _read_loop(self) -> None:
        decoder = FrameDecoder()
        error: BaseException = ConnectionLost("connection closed by peer")
        try:
            while True:
                chunk = await self._reader.read(65536)
                if not chunk:
                    break
                for frame in decoder.feed(chunk):
                    self._dispatch(frame)
        except (OSError, DecodeError) as exc:
            error = ConnectionLost(f"connection failed: {exc}")
        except asyncio.CancelledError:
            error = ConnectionLost("connection closed")
        self._fail_all(error)
        # The peer is gone (a coordinator killed with -9): close our end too. Whoever held this
        # connection may only find out it is closed when it next sends, and drop it unclosed
        # (GroupCoordinatorClient and the consumer's metadata connection open a new one).
        self._writer.close()

    def _dispatch(self, frame: bytes) -> None:
        correlation_id = int.from_bytes(frame[:4], "big", signed=True)
        entry = self._pending.get(correlation_id)
        if entry is None:
            return  # the caller gave up (timeout); drop the late answer
        future, response_cls = entry
        if future.done():
            return
        try:
            response = (
                split_flexible_response(frame)[1]
                if response_cls is None
                else decode_response(frame, response_cls)[1]
            )
        except DecodeError as exc:
            future.set_exception(exc)
        else:
            future.set_result(response)

    def _fail_all(self, error: BaseException) -> None:
        self._closed = error
        for future, _ in list(self._pending.values()):
            if not future.done():
                future.set_exception(error)
        self._pending.clear()

    async def close(self) -> None:
        if self._closed is None:
            self._closed = ConnectionLost("connection closed")
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._task
        self._writer.close()
        with contextlib.suppress(OSError, ConnectionError):
            await self._writer.wait_closed()


async def open_any(bootstrap_servers: str, client_id: str = "streamtasks") -> AsyncConnection:
    """A connection to the first bootstrap server that accepts one (for requests any broker
    answers, such as Metadata); ConnectionLost naming the last failure when none does."""
    last = "no bootstrap server given"
    for host, port in parse_bootstrap(bootstrap_servers):
        try:
            return await AsyncConnection.open(host, port, client_id=client_id)
        except ConnectionLost as exc:
            last = str(exc)
    raise ConnectionLost(last)


class GroupCoordinatorClient:
    """Sends classic-group requests to the coordinator of ``group_id``.

    The coordinator is found with FindCoordinator on the bootstrap brokers. A response that says
    the coordinator moved (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, ...) or a broken connection
    forgets it, so the next request looks it up again; the error itself is returned to the
    caller (the membership machine decides what to do, as KIP-429 prescribes).
    """

    def __init__(self, bootstrap_servers: str, group_id: str, *, client_id: str = "streamtasks") -> None:
        self._bootstrap = parse_bootstrap(bootstrap_servers)
        self._group_id = group_id
        self._client_id = client_id
        self._coordinator: AsyncConnection | None = None
        self._lock = asyncio.Lock()

    async def ensure_coordinator(self) -> None:
        """Find the coordinator (if not known) and connect to it; ConnectionLost when that fails."""
        await self._find()

    async def _find(self) -> AsyncConnection:
        async with self._lock:
            if self._coordinator is not None and not self._coordinator.closed:
                return self._coordinator
            last: str = "no bootstrap server answered"
            for host, port in self._bootstrap:
                try:
                    conn = await AsyncConnection.open(host, port, client_id=self._client_id)
                except ConnectionLost as exc:
                    last = str(exc)
                    continue
                try:
                    found = await conn.call(
                        find_coordinator_request(self._group_id), KFindCoordinatorResponse
                    )
                finally:
                    await conn.close()
                error = KafkaErrorCode.of(int(found.error_code.value))
                if error is not KafkaErrorCode.NONE:
                    last = f"FindCoordinator: {error.name} {found.error_message or ''}".strip()
                    continue
                self._coordinator = await AsyncConnection.open(
                    found.host, int(found.port), client_id=self._client_id
                )
                return self._coordinator
            raise ConnectionLost(f"group coordinator for {self._group_id!r} not found: {last}")

    async def send(self, request: GroupRequest, *, timeout_s: float = 30.0) -> Any:
        """Send a decoded request; return the decoded response. Raises ConnectionLost on IO failure."""
        return await self.send_entity(to_wire(request), response_type(request), timeout_s=timeout_s)

    async def send_entity(self, entity: Any, response_cls: type[Any], *, timeout_s: float = 30.0) -> Any:
        """Send a kio request entity; return the decoded response (:func:`from_wire`)."""
        conn = await self._find()
        try:
            wire = await conn.call(entity, response_cls, timeout_s=timeout_s)
        except ConnectionLost:
            await self.reset()
            raise
        response = from_wire(wire)
        if getattr(response, "error", None) in COORDINATOR_GONE:
            await self.reset()
        return response

    async def send_raw(
        self, api_key: int, api_version: int, body: bytes, *, timeout_s: float = 30.0
    ) -> bytes:
        """Send a request body encoded elsewhere to the coordinator; return the response body.
        Raises ConnectionLost on IO failure (and forgets the coordinator). The caller decodes
        the answer and calls :meth:`reset` when it says the coordinator moved."""
        conn = await self._find()
        try:
            return await conn.call_raw(api_key, api_version, body, timeout_s=timeout_s)
        except ConnectionLost:
            await self.reset()
            raise

    async def reset(self) -> None:
        conn, self._coordinator = self._coordinator, None
        if conn is not None:
            await conn.close()

    async def close(self) -> None:
        await self.reset()
