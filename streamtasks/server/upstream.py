"""Requests the server does not answer go to the backing cluster unchanged: one upstream
connection per client connection (so correlation ids never clash), frames passed through byte
for byte, answers matched by correlation id."""

from __future__ import annotations

import asyncio
import contextlib
import struct

from streamtasks.errors import BrokerError
from streamtasks.runtime.connection import parse_bootstrap
from streamtasks.runtime.framing import FrameDecoder

__all__ = ["Upstream"]


class Upstream:
    """A pass-through connection to one broker of the backing cluster."""

    def __init__(self, bootstrap_servers: str, *, max_frame_bytes: int, timeout_s: float = 30.0) -> None:
        self._bootstrap = parse_bootstrap(bootstrap_servers)
        self._max = max_frame_bytes
        self._timeout_s = timeout_s
        self._writer: asyncio.StreamWriter | None = None
        self._reader_task: asyncio.Task[None] | None = None
        self._pending: dict[int, asyncio.Future[bytes]] = {}
        self._lock = asyncio.Lock()
        self._closed = False

    async def _connect(self) -> asyncio.StreamWriter:
        async with self._lock:
            if self._writer is not None and not self._writer.is_closing():
                return self._writer
            last = "no bootstrap server"
            for host, port in self._bootstrap:
                try:
                    reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), 10)
                except (OSError, TimeoutError) as exc:
                    last = f"{host}:{port}: {exc or 'timed out'}"
                    continue
                self._writer = writer
                self._reader_task = asyncio.get_running_loop().create_task(self._read_loop(reader))
                return writer
            raise BrokerError(f"backing cluster unreachable: {last}")

    async def _read_loop(self, reader: asyncio.StreamReader) -> None:
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
