"""How a client connection ends is counted by who ended it: a backing broker that drops the
forwarded request (a broker that died or restarted) is ``closed_by_broker``, a frame the server
cannot read is ``closed_malformed``. Real sockets on both sides, the real Upstream."""

from __future__ import annotations

import asyncio
import struct
from types import SimpleNamespace
from typing import cast

from streamtasks.runtime.framing import encode_raw_request
from streamtasks.server.handlers import Handlers, Stats
from streamtasks.server.session import ClientSession
from streamtasks.server.upstream import Upstream


async def _same(frame: bytes, _version: int) -> bytes:
    return frame


async def _closed_connection(payload: bytes) -> Stats:
    """Send one framed payload to a session in front of a 'broker' that accepts and closes
    every connection at once; the session's stats once the client sees its connection end."""

    async def dying_broker(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(1)  # the forwarded request arrives; the broker dies under it
        writer.close()

    broker = await asyncio.start_server(dying_broker, "127.0.0.1", 0)
    broker_port = broker.sockets[0].getsockname()[1]
    stats = Stats()
    handlers = cast(Handlers, SimpleNamespace(stats=stats))
    sessions: list[asyncio.Task[None]] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        session = ClientSession(
            reader,
            writer,
            handlers=handlers,
            upstream=lambda: Upstream(f"127.0.0.1:{broker_port}", max_frame_bytes=1 << 20, timeout_s=5.0),
            rewrite_metadata=_same,
            rewrite_coordinators=_same,
            max_frame_bytes=1 << 20,
            max_in_flight=4,
        )
        task = asyncio.current_task()
        assert task is not None
        sessions.append(task)
        await session.run()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(struct.pack(">i", len(payload)) + payload)
        await writer.drain()
        async with asyncio.timeout(10):
            assert await reader.read() == b"", "the session answered instead of closing"
            while not sessions or not sessions[0].done():
                await asyncio.sleep(0.01)
        writer.close()
    finally:
        server.close()
        broker.close()
    return stats


def test_a_broker_dying_under_a_forwarded_request_is_counted_apart_from_malformed() -> None:
    api_versions = encode_raw_request(18, 0, b"", correlation_id=1, client_id="c")[4:]
    stats = asyncio.run(_closed_connection(api_versions))
    assert (stats.closed_by_broker, stats.closed_malformed) == (1, 0)


def test_a_malformed_frame_is_counted_as_malformed() -> None:
    stats = asyncio.run(_closed_connection(b"\x00\x08\x00"))
    assert (stats.closed_by_broker, stats.closed_malformed) == (0, 1)
