"""Requests the server does not answer go to the backing cluster unchanged: one upstream
connection per client connection (so correlation ids never clash), frames passed through byte
for byte, answers matched by correlation id.

The connection is opened as the coordinator's :class:`~streamtasks.runtime.security.ClientSettings`
say: TLS with the standard library, then the runtime's SASL exchange
(:func:`~streamtasks.runtime.sasl_session.authenticate`, on correlation ids below zero, which
clients do not use) before the first forwarded frame. With a session lifetime (KIP-368) the
connection is replaced, once idle, before the broker's session runs out."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import ssl
import struct
from typing import Any, TypeVar

from streamtasks.errors import BrokerError, ConnectionSecurityError, TlsError
from streamtasks.runtime.connection import parse_bootstrap
from streamtasks.runtime.framing import FrameDecoder, decode_response, encode_request
from streamtasks.runtime.sasl_session import authenticate, reauthentication_delay_s
from streamtasks.runtime.security import ClientSettings
from streamtasks.runtime.tls import handshake_failure, verify_failure

__all__ = ["Upstream"]

R = TypeVar("R")
_log = logging.getLogger("streamtasks.server")
_CLIENT_ID = "streamtasks-coordinator"


class Upstream:
    """A pass-through connection to one broker of the backing cluster."""

    def __init__(
        self, bootstrap: str | ClientSettings, *, max_frame_bytes: int, timeout_s: float = 30.0
    ) -> None:
        self._settings = ClientSettings.of(bootstrap)
        self._bootstrap = parse_bootstrap(self._settings.bootstrap_servers)
        self._max = max_frame_bytes
        self._timeout_s = timeout_s
        self._writer: asyncio.StreamWriter | None = None
        self._reader_task: asyncio.Task[None] | None = None
        self._pending: dict[int, asyncio.Future[bytes]] = {}
        self._lock = asyncio.Lock()
        self._closed = False
        self._auth_ids = itertools.count(-1, -1)
        #: loop time after which an idle connection is replaced (KIP-368), or None
        self._replace_after: float | None = None

    async def _connect(self) -> asyncio.StreamWriter:
        async with self._lock:
            loop = asyncio.get_running_loop()
            if self._writer is not None and not self._writer.is_closing():
                stale = self._replace_after is not None and loop.time() >= self._replace_after
                if not (stale and not self._pending):
                    return self._writer
                if self._reader_task is not None:
                    self._reader_task.cancel()
                self._fail_all(BrokerError("replaced before its SASL session ends"))
            last = "no bootstrap server"
            context = self._settings.ssl_context()
            for host, port in self._bootstrap:
                try:
                    async with asyncio.timeout(10):
                        reader, writer = await asyncio.open_connection(
                            host, port, ssl=context, server_hostname=host if context else None
                        )
                except ssl.SSLCertVerificationError as exc:
                    why = f"TLS with the backing broker at {host}:{port} failed: {verify_failure(exc)}"
                    raise self._security_failure(TlsError(why)) from None
                except ssl.SSLError as exc:
                    why = handshake_failure(f"{host}:{port}", exc)
                    raise self._security_failure(TlsError(why)) from None
                except (OSError, TimeoutError) as exc:
                    last = f"{host}:{port}: {exc or 'timed out'}"
                    continue
                self._writer = writer
                self._reader_task = loop.create_task(self._read_loop(reader, writer))
                self._replace_after = None
                if self._settings.uses_sasl:
                    try:
                        lifetime_ms = await authenticate(self, self._settings, f"{host}:{port}", timeout_s=10)
                    except ConnectionSecurityError as exc:
                        raise self._security_failure(exc) from None
                    if lifetime_ms > 0:
                        self._replace_after = loop.time() + reauthentication_delay_s(lifetime_ms)
                return writer
            raise BrokerError(f"backing cluster unreachable: {last}")

    def _security_failure(self, exc: ConnectionSecurityError) -> BrokerError:
        """A TLS or SASL failure at the backing cluster: logged (the operator must fix the
        coordinator's --client-config), and the client's connection is closed."""
        _log.error("the coordinator cannot reach its backing cluster: %s", exc)
        self._fail_all(BrokerError(str(exc)))
        return BrokerError(f"backing cluster: {exc}")

    async def call_during_auth(self, request: Any, response_cls: type[R], *, timeout_s: float) -> R:
        """One SASL request on the fresh connection (the runtime's AuthChannel)."""
        writer = self._writer
        if writer is None:
            raise BrokerError("the backing connection closed during SASL authentication")
        correlation_id = next(self._auth_ids)
        future: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self._pending[correlation_id] = future
        try:
            writer.write(encode_request(request, correlation_id=correlation_id, client_id=_CLIENT_ID))
            await writer.drain()
            async with asyncio.timeout(timeout_s):
                frame = await future
        except (OSError, TimeoutError) as exc:
            raise BrokerError(f"SASL with the backing cluster failed: {exc or 'timed out'}") from exc
        finally:
            self._pending.pop(correlation_id, None)
        return decode_response(frame[4:], response_cls)[1]

    async def _read_loop(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        decoder = FrameDecoder(self._max)
        try:
            while True:
                chunk = await reader.read(65536)
                if not chunk:
                    break
                for payload in decoder.feed(chunk):
                    (correlation_id,) = struct.unpack_from(">i", payload, 0)
                    future = self._pending.pop(correlation_id, None)
                    if future is not None and not future.done():
                        future.set_result(struct.pack(">i", len(payload)) + payload)
        except Exception as exc:  # every failure ends the connection the same way
            _ = exc
        if self._writer is writer:  # not a connection replaced since
            self._fail_all(BrokerError("backing broker closed the connection"))

    def _fail_all(self, error: BaseException) -> None:
        pending, self._pending = self._pending, {}
        for future in pending.values():
            if not future.done():
                future.set_exception(error)
        if self._writer is not None:
            self._writer.close()
        self._writer = None

    async def forward(self, frame: bytes, correlation_id: int) -> bytes:
        """Send a whole request frame; the whole response frame. BrokerError when the backing
        broker cannot be reached or drops the connection."""
        if self._closed:
            raise BrokerError("upstream closed")
        writer = await self._connect()
        future: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self._pending[correlation_id] = future
        try:
            writer.write(frame)
            await writer.drain()
            async with asyncio.timeout(self._timeout_s):
                return await future
        except (OSError, TimeoutError) as exc:
            raise BrokerError(f"forwarding failed: {exc or 'timed out'}") from exc
        finally:
            self._pending.pop(correlation_id, None)

    async def close(self) -> None:
        self._closed = True
        self._fail_all(BrokerError("upstream closed"))
        if self._reader_task is not None:
            self._reader_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader_task
