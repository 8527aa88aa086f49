"""One client connection: frames in, each served by its own task (so a slow write does not hold
up a fetch of offsets), responses out in request order (Kafka's promise on a connection).

A frame that is too large, a header that cannot be read, a body one of the server's APIs cannot
decode, or a refused API closes this connection only; nothing else is touched.

On a secured listener (a :class:`~streamtasks.server.guard.ListenerGuard`) the connection also
keeps its principal (its TLS certificate's, else ``User:ANONYMOUS``) and its SASL state: the SASL
requests are served in arrival order before anything else, a failed authentication closes the
connection after its answer, an expired session closes it, and only what
:mod:`streamtasks.server.trust` allows is forwarded."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
from collections.abc import Awaitable, Callable

from streamtasks.errors import BrokerError, DecodeError, LocalProtocolError, StreamTasksError
from streamtasks.runtime.framing import FrameDecoder
from streamtasks.server import trust
from streamtasks.server.group_configs import DESCRIBE_CONFIGS, describe_group_configs
from streamtasks.server.guard import (
    ANONYMOUS,
    Access,
    ListenerGuard,
    principal_from_certificate,
    sasl_response,
)
from streamtasks.server.handlers import (
    FIND_COORDINATOR,
    MAX_API_VERSIONS_VERSION,
    REFUSED_APIS,
    Handlers,
    api_versions_response,
    rewrite_api_versions,
    unsupported_api_versions,
)
from streamtasks.server.list_groups import LIST_GROUPS, list_groups
from streamtasks.server.routing import METADATA
from streamtasks.server.sasl_server import SASL_AUTHENTICATE, SASL_HANDSHAKE, SaslState
from streamtasks.server.txn_api import TXN_OFFSET_COMMIT
from streamtasks.server.upstream import Upstream
from streamtasks.server.wire import API_VERSIONS, parse_request

__all__ = ["MAX_UNAUTHENTICATED_FRAME_BYTES", "ClientSession"]

#: The largest frame a client may send before it has authenticated (Kafka's
#: ``sasl.server.max.receive.size`` default): a stranger cannot make the server buffer more.
MAX_UNAUTHENTICATED_FRAME_BYTES = 512 * 1024

_log = logging.getLogger("streamtasks.server")


class _Close(StreamTasksError):
    """End this connection (the reason is logged at debug level)."""


class _BrokerGone(_Close):
    """End this connection: the backing broker it forwards to closed or failed (a broker that
    died or restarted), not the client; counted apart from the client's malformed requests."""


class _Answered(StreamTasksError):
    """End this connection once the answers queued so far are written (a failed SASL step)."""


async def _ready(frame: bytes) -> bytes:
    return frame


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
        guard: ListenerGuard | None = None,
        clock: Callable[[], int] | None = None,
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
        self._guard = guard
        self._clock = clock or (lambda: 0)
        self._sasl = guard.new_sasl() if guard is not None else None
        self._tls_principal = principal_from_certificate(writer.get_extra_info("peercert")) or ANONYMOUS

    @property
    def principal(self) -> str:
        if self._sasl is not None and self._sasl.principal is not None:
            return self._sasl.principal
        return self._tls_principal

    def _access(self) -> Access | None:
        if self._guard is None:
            return None
        return self._guard.access(self.principal, self._client_host, self._count_denial)

    def _count_denial(self) -> None:
        self._handlers.stats.denied += 1

    async def _read(self) -> bytes:
        """The next chunk; on a SASL session with a lifetime, _Close once it runs out (unless
        the client is re-authenticating)."""
        sasl = self._sasl
        if sasl is None or sasl.session_deadline_ms is None or sasl.state is not SaslState.AUTHENTICATED:
            return await self._reader.read(65536)
        left_s = (sasl.session_deadline_ms - self._clock()) / 1000
        try:
            async with asyncio.timeout(max(left_s, 0.001)):
                return await self._reader.read(65536)
        except TimeoutError:
            raise _Close("the SASL session expired without re-authentication") from None

    async def run(self) -> None:
        responder = asyncio.get_running_loop().create_task(self._respond())
        decoder = FrameDecoder(self._max_frame)
        if self._sasl is not None:  # Kafka's sasl.server.max.receive.size until authenticated
            decoder.limit(min(self._max_frame, MAX_UNAUTHENTICATED_FRAME_BYTES))
        try:
            while not responder.done():
                chunk = await self._read()
                if not chunk:
                    break
                for payload in decoder.feed(chunk):
                    if responder.done():  # it closed the connection and counted why
                        break
                    task, close_after = self._start(payload)
                    await self._order.put(task)
                    if close_after:
                        raise _Answered("SASL failed; closing after the answer")
                if self._sasl is not None and self._sasl.authenticated:
                    decoder.limit(self._max_frame)
        except _Answered as exc:
            _log.debug("closing connection from %s: %s", self._client_host, exc)
        except (DecodeError, OSError, _Close) as exc:
            _log.debug("closing connection from %s: %s", self._client_host, exc)
            self._count_close(exc)
        finally:
            with contextlib.suppress(asyncio.QueueFull):
                self._order.put_nowait(None)
            if self._order.full():
                responder.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await responder
            await self._close()

    def _start(self, payload: bytes) -> tuple[asyncio.Task[bytes], bool]:
        """The task answering one request, and whether to close once it is answered."""
        loop = asyncio.get_running_loop()
        sasl = self._sasl
        if sasl is not None and sasl.raw_tokens:  # after SaslHandshake v0: a bare token
            step = sasl.authenticate(payload, self._clock())
            if step.error:
                self._handlers.stats.sasl_failed += 1
                raise _Close(f"SASL authentication failed (error {step.error})")
            self._handlers.stats.sasl_ok += sasl.state is SaslState.AUTHENTICATED
            return loop.create_task(_ready(struct.pack(">i", len(step.auth_bytes)) + step.auth_bytes)), False
        header, _ = parse_request(payload, body=False)
        api = header.api_key
        if sasl is not None:
            why = sasl.admits(api, self._clock())
            if why is not None:
                raise _Close(why)
            if api in (SASL_HANDSHAKE, SASL_AUTHENTICATE):
                header, body = parse_request(payload)
                frame, step = sasl_response(sasl, header, body, self._clock())
                stats = self._handlers.stats
                if step.error:
                    stats.sasl_failed += 1
                elif api == SASL_AUTHENTICATE and sasl.state is SaslState.AUTHENTICATED:
                    stats.sasl_ok += 1
                return loop.create_task(_ready(frame)), step.close
        if api in REFUSED_APIS or (self._guard is not None and api == TXN_OFFSET_COMMIT):
            # (a secured listener forwards no Produce: exactly-once cannot run through it, and
            # the forward would commit with the server's credentials, not the client's)
            raise _Close(f"api {api} is not served here")
        if self._guard is not None and not (
            self._handlers.serves(api) or api in trust.FORWARDED_WHEN_GUARDED or api in trust.GUARDED_VERSIONS
        ):
            raise _Close(f"api {api} is not forwarded by a secured listener")
        # A task per request, created now: tasks start in creation order, and each handler
        # computes and applies its write before its first await, so writes apply in arrival order.
        return loop.create_task(self._serve(payload)), False

    async def _serve(self, payload: bytes) -> bytes:
        frame = struct.pack(">i", len(payload)) + payload
        header, _ = parse_request(payload, body=False)
        if header.api_key == API_VERSIONS:
            if header.api_version > MAX_API_VERSIONS_VERSION:
                return unsupported_api_versions(header.correlation_id)
            if self._guard is not None:  # answered here: a stranger opens no backing connection
                return api_versions_response(header.api_version, header.correlation_id, self._guard.apis)
            answer = await self._forward(frame, header.correlation_id)
            return rewrite_api_versions(answer, header.api_version)
        header, body = parse_request(payload)
        access = self._access()
        if header.api_key == METADATA:
            if access is None:
                answer = await self._forward(frame, header.correlation_id)
            else:
                sanitized, all_topics = trust.sanitize_metadata_request(payload)
                answer = trust.filter_metadata_response(
                    await self._forward(sanitized, header.correlation_id),
                    header.api_version,
                    all_topics=all_topics,
                    # a topic asked for by name and denied is logged; an all-topics listing
                    # leaves the others out quietly
                    may_describe=lambda topic: (access.permits if all_topics else access.allows)(
                        "topic", topic, "Describe"
                    ),
                )
            return await self._rewrite_metadata(answer, header.api_version)
        if header.api_key == LIST_GROUPS and access is not None:
            return list_groups(
                header.api_version,
                header.correlation_id,
                body,
                states=self._handlers.group_states(),
                may_describe=lambda group: access.permits("group", group, "Describe"),
            )
        if header.api_key == DESCRIBE_CONFIGS:  # of GROUP resources: this coordinator's values
            config = self._handlers.coordinator.config
            answer_here = describe_group_configs(
                header.api_version,
                header.correlation_id,
                body,
                session_timeout_ms=config.session_timeout_ms,
                heartbeat_interval_ms=config.heartbeat_interval_ms,
            )
            if answer_here is not None:
                return answer_here
        if self._handlers.serves(header.api_key):
            served = await self._handlers.handle(header, body, self._client_host, access)
            if served is not None:
                return served
            if header.api_key != FIND_COORDINATOR or access is not None:
                raise _Close(f"api {header.api_key} answered nothing, and is not forwarded here")
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
            raise _BrokerGone(str(exc)) from None

    async def _respond(self) -> None:
        while True:
            task = await self._order.get()
            if task is None:
                return
            try:
                frame = await task
            except (DecodeError, LocalProtocolError, _Close, BrokerError) as exc:
                _log.debug("closing connection from %s: %s", self._client_host, exc)
                self._count_close(exc)
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

    def _count_close(self, exc: Exception) -> None:
        """Count a connection this session ends: the backing broker's failure (a broker that
        died or restarted under a forwarded request) apart from the client's bad request."""
        stats = self._handlers.stats
        if isinstance(exc, BrokerError | _BrokerGone):
            stats.closed_by_broker += 1
        elif isinstance(exc, DecodeError | LocalProtocolError | _Close):
            stats.closed_malformed += 1

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
