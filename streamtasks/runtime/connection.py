"""Asyncio Kafka connections: one multiplexed connection per broker, and a client for the
group coordinator that finds it with FindCoordinator and follows it when it moves.

A connection is opened from :class:`~streamtasks.runtime.security.ClientSettings` (or a bare
``host:port`` string, PLAINTEXT): TLS with the standard library's :mod:`ssl`, then SASL
(:mod:`streamtasks.runtime.sasl_session`) before any other request, and in-band
re-authentication before the session the broker granted runs out (KIP-368): new requests wait
while it runs, requests in flight are answered first (the broker answers in order).

Security failures raise :class:`~streamtasks.errors.TlsError` or
:class:`~streamtasks.errors.AuthenticationError` naming the broker and the cause; they are
fatal (no retry). A closed connection is :class:`ConnectionLost` (retried by the callers).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import ssl
from typing import Any, TypeVar

from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.api_versions.v3.response import ApiVersionsResponse

from streamtasks._version import __version__
from streamtasks.errors import AuthorizationError, BrokerError, ConnectionSecurityError, DecodeError, TlsError
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
from streamtasks.runtime.sasl_session import authenticate, reauthentication_delay_s
from streamtasks.runtime.security import ClientSettings, SecuritySettings
from streamtasks.runtime.tls import TLS_RECORD_STARTS, handshake_failure, session_failure, verify_failure

__all__ = [
    "COORDINATOR_GONE",
    "COORDINATOR_MOVED",
    "AsyncConnection",
    "ConnectionLost",
    "SILENT_OPEN_S",
    "GroupCoordinatorClient",
    "coordinator_moved",
    "open_any",
    "parse_bootstrap",
]

R = TypeVar("R")

log = logging.getLogger("streamtasks.connection")

_API_VERSIONS = ApiVersionsRequest(client_software_name="streamtasks", client_software_version=__version__)


#: Responses that mean "ask someone else": the coordinator moved or is not there yet. The
#: client forgets the coordinator on these and looks it up again before the next request.
COORDINATOR_MOVED = frozenset({KafkaErrorCode.NOT_COORDINATOR, KafkaErrorCode.COORDINATOR_NOT_AVAILABLE})
#: Responses after which the request is sent again later: the two above, and
#: COORDINATOR_LOAD_IN_PROGRESS (the broker is the coordinator, still loading the group from
#: ``__consumer_offsets`` after a failover). On that one the coordinator and its connection are
#: kept, as Kafka's clients keep them: forgetting it would close the connection under every
#: other request in flight to it (a heartbeat, a JoinGroup), and the members' commits, retried
#: every ``retry.backoff.ms`` while the group loads, would keep closing it.
COORDINATOR_GONE = COORDINATOR_MOVED | {KafkaErrorCode.COORDINATOR_LOAD_IN_PROGRESS}


class ConnectionLost(BrokerError):
    """The connection closed or failed while requests were in flight."""


def coordinator_moved(response: Any) -> bool:
    """Whether a decoded group response says the coordinator moved or is not known
    (:data:`COORDINATOR_MOVED`): its top-level ``error``, or any per-partition one (OffsetCommit
    answers NOT_COORDINATOR per partition, with no top-level error; OffsetFetch may answer it
    either way)."""
    if getattr(response, "error", None) in COORDINATOR_MOVED:
        return True
    rows = (*getattr(response, "errors", ()), *getattr(response, "offsets", ()))
    return any(row[-1] in COORDINATOR_MOVED for row in rows)


def parse_bootstrap(bootstrap_servers: str) -> list[tuple[str, int]]:
    out: list[tuple[str, int]] = []
    for item in bootstrap_servers.split(","):
        host, sep, port = item.strip().rpartition(":")
        if not sep or not port.isdigit() or not host:
            raise BrokerError(f"bootstrap servers must be host:port[,host:port], got {bootstrap_servers!r}")
        out.append((host, int(port)))
    return out


class AsyncConnection:
    """Pipelined requests over one TCP (or TLS) connection, answered by correlation id."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        client_id: str,
        *,
        peer: str = "",
        security: SecuritySettings | None = None,
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._client_id = client_id
        self.peer = peer or "?"
        self._security = security
        self._ids = itertools.count(1)
        #: correlation id -> (future, kio response class; None: the raw body of a flexible response)
        self._pending: dict[int, tuple[asyncio.Future[Any], type[Any] | None]] = {}
        self._closed: BaseException | None = None
        self._answered = False
        #: Set while requests may go out; cleared while the connection re-authenticates.
        self._sendable = asyncio.Event()
        self._sendable.set()
        self._reauth_task: asyncio.Task[None] | None = None
        self._auth_timeout_s = 10.0
        #: How many times this connection re-authenticated (KIP-368).
        self.reauthentications = 0
        #: The broker's ApiVersions answer, asked at open (None for a bare connection).
        self.api_versions: ApiVersionsResponse | None = None
        self._task = asyncio.get_running_loop().create_task(self._read_loop())

    @classmethod
    async def open(
        cls,
        host: str,
        port: int,
        *,
        client_id: str = "streamtasks",
        timeout_s: float = 10.0,
        security: SecuritySettings | None = None,
    ) -> AsyncConnection:
        """Connect, set up TLS and authenticate as ``security`` says (PLAINTEXT without it)."""
        peer = f"{host}:{port}"
        context = security.ssl_context() if security is not None else None
        try:
            async with asyncio.timeout(timeout_s):
                if context is None:
                    reader, writer = await asyncio.open_connection(host, port)
                else:
                    reader, writer = await asyncio.open_connection(
                        host, port, ssl=context, server_hostname=host, ssl_handshake_timeout=timeout_s
                    )
        except ssl.SSLCertVerificationError as exc:
            raise TlsError(f"TLS with the broker at {peer} failed: {verify_failure(exc)}") from None
        except ssl.SSLError as exc:
            raise TlsError(handshake_failure(peer, exc)) from None
        except (ConnectionResetError, BrokenPipeError, EOFError) as exc:
            if context is not None:
                raise TlsError(
                    f"the broker at {peer} closed the connection during the TLS handshake: is it a"
                    f" TLS listener? (security_protocol {security.security_protocol if security else ''})"
                ) from exc
            raise ConnectionLost(f"cannot connect to {peer}: {exc}") from exc
        except TimeoutError as exc:
            during = " (TCP and TLS handshake)" if context is not None else ""
            raise ConnectionLost(
                f"cannot connect to {peer}: timed out after {timeout_s:g} s{during}"
            ) from exc
        except OSError as exc:
            raise ConnectionLost(f"cannot connect to {peer}: {exc}") from exc
        conn = cls(reader, writer, client_id, peer=peer, security=security)
        if security is None:
            return conn
        try:
            # As Kafka's clients do: ApiVersions first. It proves the listener speaks what this
            # client speaks (a TLS listener met in plaintext, a client certificate refused after
            # a TLS 1.3 handshake show here, at open, not at the first group request).
            with contextlib.suppress(DecodeError):  # a broker too old for v3 answers in v0
                conn.api_versions = await conn.call_during_auth(
                    _API_VERSIONS, ApiVersionsResponse, timeout_s=timeout_s
                )
            if security.uses_sasl:
                conn._auth_timeout_s = timeout_s
                conn._schedule_reauthentication(await conn._authenticate(timeout_s))
        except BaseException:
            await conn.close()
            raise
        return conn

    async def _authenticate(self, timeout_s: float) -> int:
        assert self._security is not None
        try:
            return await authenticate(self, self._security, self.peer, timeout_s=timeout_s)
        except ConnectionLost as exc:
            raise ConnectionLost(
                f"the broker at {self.peer} closed the connection during SASL authentication"
                f" ({self._security.sasl_mechanism}): {exc}"
            ) from exc

    def _schedule_reauthentication(self, lifetime_ms: int) -> None:
        if lifetime_ms > 0 and self._closed is None:
            delay_s = reauthentication_delay_s(lifetime_ms)
            self._reauth_task = asyncio.get_running_loop().create_task(self._reauthenticate_after(delay_s))

    async def _reauthenticate_after(self, delay_s: float) -> None:
        await asyncio.sleep(delay_s)
        self._sendable.clear()  # new requests wait; those in flight are answered first
        try:
            lifetime_ms = await self._authenticate(self._auth_timeout_s)
        except (ConnectionSecurityError, BrokerError, DecodeError) as exc:
            log.error("re-authentication with the broker at %s failed: %s", self.peer, exc)
            self._fail_all(exc)
            self._writer.close()
            return
        finally:
            self._sendable.set()
        self.reauthentications += 1
        log.debug("re-authenticated with the broker at %s (session %d ms)", self.peer, lifetime_ms)
        self._schedule_reauthentication(lifetime_ms)

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

    async def call_during_auth(self, request: Any, response_cls: type[R], *, timeout_s: float) -> R:
        """:meth:`call` for the SASL exchange: sent while other requests are held back."""
        correlation_id = next(self._ids)
        frame = encode_request(request, correlation_id=correlation_id, client_id=self._client_id)
        result: R = await self._exchange(
            correlation_id, frame, response_cls, type(request).__name__, timeout_s, held=False
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

    def _closed_error(self) -> BaseException:
        error = self._closed
        if isinstance(error, ConnectionSecurityError):
            return type(error)(str(error))  # fatal: the caller must see why, not "closed"
        return ConnectionLost(f"connection to {self.peer} is closed: {error}")

    async def _exchange(
        self,
        correlation_id: int,
        frame: bytes,
        response_cls: type[Any] | None,
        what: str,
        timeout_s: float,
        *,
        held: bool = True,
    ) -> Any:
        if self._closed is not None:
            raise self._closed_error()
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        try:
            # Not wait_for: on Python 3.11 it can return the result and drop a cancellation that
            # arrives as the response lands (bpo-42130), leaving the caller running.
            async with asyncio.timeout(timeout_s):
                if held and not self._sendable.is_set():
                    await self._sendable.wait()  # re-authentication in progress
                    if self._closed is not None:
                        raise self._closed_error()
                self._pending[correlation_id] = (future, response_cls)
                self._writer.write(frame)
                await self._writer.drain()
                return await future
        except (OSError, TimeoutError) as exc:
            raise ConnectionLost(f"{what} to {self.peer} failed: {str(exc) or 'timed out'}") from exc
        finally:
            self._pending.pop(correlation_id, None)

    async def _read_loop(self) -> None:
        decoder = FrameDecoder()
        error: BaseException = ConnectionLost(f"connection to {self.peer} closed by the broker")
        try:
            while True:
                chunk = await self._reader.read(65536)
                if not chunk:
                    if not self._answered:
                        error = ConnectionLost(self._closed_before_answer())
                    break
                if not self._answered and chunk.startswith(TLS_RECORD_STARTS) and not self._tls:
                    error = TlsError(
                        f"the broker at {self.peer} answered in TLS: it is a TLS listener"
                        f" (security_protocol is {self._protocol}; use SSL or SASL_SSL)"
                    )
                    break
                for frame in decoder.feed(chunk):
                    self._answered = True
                    self._dispatch(frame)
        except ssl.SSLError as exc:
            error = TlsError(session_failure(self.peer, exc))
        except (OSError, DecodeError) as exc:
            error = ConnectionLost(f"connection to {self.peer} failed: {exc}")
        except asyncio.CancelledError:
            error = ConnectionLost("connection closed")
        self._fail_all(error)
        # The peer is gone (a coordinator killed with -9): close our end too. Whoever held this
        # connection may only find out it is closed when it next sends, and drop it unclosed
        # (GroupCoordinatorClient and the consumer's metadata connection open a new one).
        self._writer.close()

    @property
    def _tls(self) -> bool:
        return self._security is not None and self._security.uses_ssl

    @property
    def _protocol(self) -> str:
        return self._security.security_protocol if self._security is not None else "PLAINTEXT"

    def _closed_before_answer(self) -> str:
        what = ", ".join(
            sorted({(c.__name__.removesuffix("Response") if c else "raw") for _, c in self._pending.values()})
        )
        hint = {
            "PLAINTEXT": "does this listener want TLS or SASL?",
            "SASL_PLAINTEXT": "does this listener want TLS, or no SASL?",
            "SSL": "does this listener want SASL?",
            "SASL_SSL": "does this listener want a client certificate, or no SASL?",
        }[self._protocol]
        return (
            f"the broker at {self.peer} closed the connection before answering any request"
            f" ({what or 'none in flight'}; security_protocol {self._protocol}: {hint})"
        )

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

    @property
    def in_flight(self) -> bool:
        """Whether requests sent on this connection wait for their answers."""
        return bool(self._pending)

    async def close_when_idle(self) -> None:
        """Close once the requests in flight are answered, failed or timed out (closed at once
        when cancelled)."""
        try:
            waiting = [future for future, _ in self._pending.values()]
            if waiting:
                await asyncio.wait(waiting)
        finally:
            await self.close()

    async def close(self) -> None:
        if self._closed is None:
            self._closed = ConnectionLost("connection closed")
        if self._reauth_task is not None:
            self._reauth_task.cancel()
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._task
        self._writer.close()
        with contextlib.suppress(OSError, ConnectionError):
            await self._writer.wait_closed()


async def open_any(
    bootstrap: str | ClientSettings, client_id: str = "streamtasks", *, timeout_s: float = 10.0
) -> AsyncConnection:
    """A connection to the first bootstrap server that accepts one (for requests any broker
    answers, such as Metadata); ConnectionLost naming the last failure when none does. A
    security failure (TLS, SASL) is raised at once: the next server would fail the same way."""
    settings = ClientSettings.of(bootstrap)
    last = "no bootstrap server given"
    for host, port in parse_bootstrap(settings.bootstrap_servers):
        try:
            return await AsyncConnection.open(
                host, port, client_id=client_id, timeout_s=timeout_s, security=settings
            )
        except ConnectionLost as exc:
            last = str(exc)
    raise ConnectionLost(last)


#: How long opening a connection to a coordinator given up as silent may take (its
#: ApiVersions answered) before the lookup fails and is made again: the group moves off a
#: hung broker within seconds, and the lookup should find where it went.
SILENT_OPEN_S = 2.0


class GroupCoordinatorClient:
    """Sends classic-group requests to the coordinator of ``group_id``.

    The coordinator is found with FindCoordinator on the bootstrap brokers. A response that says
    the coordinator moved (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, ...) or a broken connection
    forgets it, so the next request looks it up again; the error itself is returned to the
    caller (the membership machine decides what to do, as KIP-429 prescribes).
    """

    def __init__(
        self,
        bootstrap: str | ClientSettings,
        group_id: str,
        *,
        client_id: str = "streamtasks",
        timeout_s: float = 10.0,
    ) -> None:
        self._settings = ClientSettings.of(bootstrap)
        self._bootstrap = parse_bootstrap(self._settings.bootstrap_servers)
        self._timeout_s = timeout_s
        self._group_id = group_id
        self._client_id = client_id
        self._coordinator: AsyncConnection | None = None
        #: Forgotten coordinator connections closing once their requests in flight are done.
        self._retiring: set[asyncio.Task[None]] = set()
        #: The bootstrap server that answered the last FindCoordinator (asked first next time).
        self._answered = 0
        #: The address of a coordinator given up as silent (:meth:`abandon`): asked last.
        self._silent_peer: str | None = None
        self._lock = asyncio.Lock()

    async def ensure_coordinator(self) -> None:
        """Find the coordinator (if not known) and connect to it; ConnectionLost when that fails."""
        await self._find()

    async def _find(self) -> AsyncConnection:
        async with self._lock:
            if self._coordinator is not None and not self._coordinator.closed:
                return self._coordinator
            last: str = "no bootstrap server answered"
            # Start at the server that answered last time: a dead or hung one (killed, paused)
            # is not asked first again on every lookup while the coordinator moves.
            start = self._answered
            order = [*range(start, len(self._bootstrap)), *range(start)]
            # A server given up as silent (hung) is asked last: FindCoordinator to it would
            # only time out, while the others may already name the group's new coordinator.
            order.sort(key=lambda i: f"{self._bootstrap[i][0]}:{self._bootstrap[i][1]}" == self._silent_peer)
            for index in order:
                host, port = self._bootstrap[index]
                try:
                    conn = await self._open(host, port)
                except ConnectionLost as exc:
                    last = str(exc)
                    continue
                try:
                    found = await conn.call(
                        find_coordinator_request(self._group_id),
                        KFindCoordinatorResponse,
                        timeout_s=self._timeout_s,
                    )
                except ConnectionLost as exc:  # it died or hung mid-request: ask the next one
                    last = str(exc)
                    continue
                finally:
                    await conn.close()
                self._answered = index
                if conn.peer == self._silent_peer:
                    self._silent_peer = None  # it answers again
                error = KafkaErrorCode.of(int(found.error_code.value))
                if error is KafkaErrorCode.GROUP_AUTHORIZATION_FAILED:
                    raise AuthorizationError(
                        f"the broker at {conn.peer} denies this client group {self._group_id!r}:"
                        f" GROUP_AUTHORIZATION_FAILED (an ACL allowing Describe and Read is missing)"
                    )
                if error is not KafkaErrorCode.NONE:
                    last = f"FindCoordinator: {error.name} {found.error_message or ''}".strip()
                    continue
                # Named again while the group moves off it: a hung broker would hold the open
                # (its ApiVersions) for the whole request timeout, and the lookup with it.
                silent = f"{found.host}:{int(found.port)}" == self._silent_peer
                self._coordinator = await self._open(
                    found.host, int(found.port), SILENT_OPEN_S if silent else None
                )
                if silent:
                    self._silent_peer = None  # it answered
                return self._coordinator
            raise ConnectionLost(f"group coordinator for {self._group_id!r} not found: {last}")

    async def _open(self, host: str, port: int, timeout_s: float | None = None) -> AsyncConnection:
        return await AsyncConnection.open(
            host,
            port,
            client_id=self._client_id,
            timeout_s=min(timeout_s or self._timeout_s, self._timeout_s),
            security=self._settings,
        )

    async def send(self, request: GroupRequest, *, timeout_s: float = 30.0) -> Any:
        """Send a decoded request; return the decoded response. Raises ConnectionLost on IO failure."""
        return await self.send_entity(to_wire(request), response_type(request), timeout_s=timeout_s)

    async def send_entity(self, entity: Any, response_cls: type[Any], *, timeout_s: float = 30.0) -> Any:
        """Send a kio request entity; return the decoded response (:func:`from_wire`)."""
        conn = await self._find()
        try:
            wire = await conn.call(entity, response_cls, timeout_s=timeout_s)
        except ConnectionLost:
            await self.reset(conn)
            raise
        response = from_wire(wire)
        if coordinator_moved(response):
            await self.reset(conn)
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
            await self.reset(conn)
            raise

    async def reset(self, used: AsyncConnection | None = None) -> None:
        """Forget the coordinator; the next request looks it up again. Its connection is closed
        once the other requests in flight on it are answered: a commit answered
        COORDINATOR_NOT_AVAILABLE (the broker could not write ``__consumer_offsets`` while a
        dead replica was still in the ISR) must not fail the heartbeat the same broker is
        about to answer (in the leader-crash drill that cost KIP-848 members their session).

        With ``used`` (the connection a failed or redirected request went over), only when that
        is still the coordinator's connection: a request that failed on an older one (it was in
        flight while the coordinator moved) must not close the connection another request has
        just opened to the new coordinator, and fail everything in flight there."""
        if used is not None and used is not self._coordinator:
            return
        conn, self._coordinator = self._coordinator, None
        if conn is None:
            return
        if conn.closed or not conn.in_flight:
            await conn.close()
            return
        task = asyncio.get_running_loop().create_task(conn.close_when_idle())
        self._retiring.add(task)
        task.add_done_callback(self._retiring.discard)

    async def abandon(self) -> None:
        """Give the coordinator up as silent (the member heard nothing from it within its
        session timeout, or a request timed out: a hung broker keeps its connections open and
        answers nothing): forget it and close its connection now, failing every request in
        flight there with :class:`ConnectionLost` (Kafka's ``markCoordinatorUnknown``
        disconnects too), so a commit waiting on it is sent again to the coordinator looked up
        next instead of holding its caller until the request timeout. Until it answers a lookup
        again, that broker is the last bootstrap server a lookup asks."""
        conn, self._coordinator = self._coordinator, None
        if conn is None:
            return
        self._silent_peer = conn.peer
        log.info("group coordinator at %s answered nothing in time: connection dropped", conn.peer)
        await conn.close()

    async def close(self) -> None:
        conn, self._coordinator = self._coordinator, None
        if conn is not None:
            await conn.close()
        retiring = list(self._retiring)
        for task in retiring:
            task.cancel()
        await asyncio.gather(*retiring, return_exceptions=True)
