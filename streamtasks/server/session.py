"""One client connection: frames in, each served by its own task (so a slow write does not hold
up a fetch of offsets), responses out in request order (Kafka's promise on a connection).

A frame that is too large, a header that cannot be read, a body one of the server's APIs cannot
decode, or a refused API closes this connection only; nothing else is touched."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
from collections.abc import Awaitable, Callable

from streamtasks.errors import BrokerError, DecodeError, LocalProtocolError
from streamtasks.runtime.framing import FrameDecoder
from streamtasks.server.handlers import (
    FIND_COORDINATOR,
    MAX_API_VERSIONS_VERSION,
    REFUSED_APIS,
    Handlers,
    rewrite_api_versions,
    unsupported_api_versions,
)
from streamtasks.server.routing import METADATA
from streamtasks.server.upstream import Upstream
from streamtasks.server.wire import API_VERSIONS, parse_request

__all__ = ["ClientSession"]

_log = logging.getLogger("streamtasks.server")


class _Close(Exception):
    """End this connection (the reason is logged at debug level)."""


class ClientSession:
    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        handlers: Handlers,
        upstream: Callable[[], Upstream],
        rewrite_metadata: Callable[[bytes, int], Awaitable[bytes]],
        rewrite_coordinators: Callable[[bytes, int], Awaitable[bytes]],
        max_frame_bytes: int,
        max_in_flight: int,
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._handlers = handlers
        self._upstream_factory = upstream
        self._upstream: Upstream | None = None
        self._rewrite_metadata = rewrite_metadata
        self._rewrite_coordinators = rewrite_coordinators
        self._max_frame = max_frame_bytes
        self._order: asyncio.Queue[asyncio.Task[bytes] | None] = asyncio.Queue(max_in_flight)
        peer = writer.get_extra_info("peername")
        self._client_host = f"/{peer[0]}" if isinstance(peer, tuple) else ""

    async def run(self) -> None:
        responder = asyncio.get_running_loop().create_task(self._respond())
        decoder = FrameDecoder(self._max_frame)
        try:
            while not responder.done():
                chunk = await self._reader.read(65536)
                if not chunk:
                    break
                for payload in decoder.feed(chunk):
                    if responder.done():
                        raise _Close("the connection failed")
                    task = self._start(payload)
                    await self._order.put(task)
        except (DecodeError, OSError, _Close) as exc:
            _log.debug("closing connection from %s: %s", self._client_host, exc)
            self._handlers.stats.closed_malformed += isinstance(exc, DecodeError | _Close)
        finally:
            with contextlib.suppress(asyncio.QueueFull):
                self._order.put_nowait(None)
            if self._order.full():
                responder.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await responder
            await self._close()

    def _start(self, payload: bytes) -> asyncio.Task[bytes]:
        header, _ = parse_request(payload, body=False)
        if header.api_key in REFUSED_APIS:
            raise _Close(f"api {header.api_key} is not served here")
        # A task per request, created now: tasks start in creation order, and each handler
        # computes and applies its write before its first await, so writes apply in arrival order.
        return asyncio.get_running_loop().create_task(self._serve(payload))

    async def _serve(self, payload: bytes) -> bytes:
        frame = struct.pack(">i", len(payload)) + payload
        header, _ = parse_request(payload, body=False)
        if header.api_key == API_VERSIONS:
            if header.api_version > MAX_API_VERSIONS_VERSION:
                return unsupported_api_versions(header.correlation_id)
            answer = await self._forward(frame, header.correlation_id)
            return rewrite_api_versions(answer, header.api_version)
        header, body = parse_request(payload)
        if header.api_key == METADATA:
            answer = await self._forward(frame, header.correlation_id)
            return await self._rewrite_metadata(answer, header.api_version)
        if self._handlers.serves(header.api_key):
            served = await self._handlers.handle(header, body, self._client_host)
            if served is not None:
                return served
            if header.api_key != FIND_COORDINATOR:
                raise _Close(f"api {header.api_key} answered nothing")
            self._handlers.stats.forwarded += 1
            answer = await self._forward(frame, header.correlation_id)
            return await self._rewrite_coordinators(answer, header.api_version)
        self._handlers.stats.forwarded += 1
        return await self._forward(frame, header.correlation_id)

    async def _forward(self, frame: bytes, correlation_id: int) -> bytes:
        if self._upstream is None:
            self._upstream = self._upstream_factory()
        try:
            return await self._upstream.forward(frame, correlation_id)
        except BrokerError as exc:
            raise _Close(str(exc)) from None

    async def _respond(self) -> None:
        while True:
            task = await self._order.get()
            if task is None:
                return
            try:
                frame = await task
            except (DecodeError, LocalProtocolError, _Close, BrokerError) as exc:
                _log.debug("closing connection from %s: %s", self._client_host, exc)
                self._handlers.stats.closed_malformed += 1
                self._writer.close()
                self._drain_order()
                return
            except Exception:
                _log.exception("request from %s failed; closing its connection", self._client_host)
                self._writer.close()
                self._drain_order()
                return
            self._writer.write(frame)
            await self._writer.drain()

    def _drain_order(self) -> None:
        while not self._order.empty():
            task = self._order.get_nowait()
            if task is not None:
                task.add_done_callback(_consume)

    async def _close(self) -> None:
        if self._upstream is not None:
            await self._upstream.close()
        self._writer.close()
        with contextlib.suppress(OSError, ConnectionError):
            await self._writer.wait_closed()


def _consume(task: asyncio.Task[bytes]) -> None:
    if not task.cancelled():
        task.exception()
