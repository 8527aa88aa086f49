"""A TCP proxy in front of one broker that can be told to misbehave: :class:`FaultProxy`.

It forwards bytes unchanged between clients and ``upstream`` (it knows nothing of Kafka) on its
own event loop in a daemon thread, so synchronous tests, drills and asyncio clients can all
switch its faults at run time::

    proxy = FaultProxy("127.0.0.1", broker_port).start()
    proxy.set_delay(0.2)       # every chunk, both ways, 200 ms late (order kept)
    proxy.blackhole()          # accept, read, never answer: a partitioned or hung broker
    proxy.drop()               # cut every connection, and every new one at once
    proxy.heal()               # forward again (held bytes are delivered, as TCP would)
    proxy.stop()

:class:`~streamtasks.embedded.kafka_cluster.KafkaCluster` puts one in front of every broker
with ``proxied=True``; the brokers then advertise the proxies' addresses.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import threading
from collections.abc import Coroutine
from typing import Any, Self, TypeVar

from streamtasks.errors import BrokerError

__all__ = ["Fault", "FaultProxy"]

T = TypeVar("T")
_CHUNK = 65536


class Fault(enum.Enum):
    """What the proxy does with connections (the delay is separate and adds to ``NONE``)."""

    NONE = "none"
    #: Every connection is cut (reset), and new ones are accepted and cut at once.
    DROP = "drop"
    #: Connections are accepted and read, and nothing is forwarded either way until healed.
    BLACKHOLE = "blackhole"


class _Link:
    """One client connection and its upstream connection."""

    __slots__ = ("client", "upstream")

    def __init__(self, client: asyncio.StreamWriter) -> None:
        self.client = client
        self.upstream: asyncio.StreamWriter | None = None

    def cut(self) -> None:
        for writer in (self.client, self.upstream):
            if writer is not None:
                writer.transport.abort()


class FaultProxy:
    """Forwards ``listen_host:listen_port`` (a free port unless given) to ``upstream``."""

    def __init__(
        self,
        upstream_host: str,
        upstream_port: int,
        *,
        listen_host: str | None = None,
        listen_port: int = 0,
    ) -> None:
        self.upstream = (upstream_host, upstream_port)
        self.host = listen_host or upstream_host
        self.port = listen_port
        self.fault = Fault.NONE
        self.delay_s = 0.0
        #: Connections accepted since start (a drop counts too).
        self.accepted = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.Server | None = None
        self._flowing: asyncio.Event | None = None
        self._links: set[_Link] = set()

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def connections(self) -> int:
        """Connections open right now."""
        return len(self._links)

    def __repr__(self) -> str:
        up = f"{self.upstream[0]}:{self.upstream[1]}"
        return f"FaultProxy({self.address} -> {up}, {self.fault.value}, delay={self.delay_s}s)"

    # -- lifecycle (from any thread but the proxy's) ---------------------------------------

    def start(self) -> Self:
        if self._thread is not None:
            return self
        loop = asyncio.new_event_loop()
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self._listen())
            except BaseException as exc:
                failure.append(exc)
                loop.close()
                ready.set()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

        self._loop = loop
        self._thread = threading.Thread(target=run, name=f"fault-proxy-{self.port}", daemon=True)
        self._thread.start()
        ready.wait()
        if failure:
            self._thread.join()
            self._thread = self._loop = None
            raise BrokerError(f"fault proxy cannot listen on {self.address}: {failure[0]}")
        return self

    def stop(self) -> None:
        """Cut every connection, stop listening and end the thread; idempotent."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        with contextlib.suppress(RuntimeError):
            self._run(self._close())
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=5.0)
        self._loop = self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- faults (from any thread but the proxy's) ------------------------------------------

    def set_delay(self, seconds: float) -> None:
        """Hold every chunk ``seconds`` before forwarding it, both ways (0: no delay)."""
        if seconds < 0:
            raise BrokerError(f"a proxy delay cannot be negative ({seconds})")
        self.delay_s = seconds

    def drop(self) -> None:
        """Cut every connection now and every new one as it comes, until :meth:`heal`."""
        self._run(self._set(Fault.DROP))

    def cut(self) -> None:
        """Cut every connection now, once; new connections are forwarded as before."""
        self._run(self._cut_all())

    def blackhole(self) -> None:
        """Accept connections and read them, but forward nothing either way until :meth:`heal`."""
        self._run(self._set(Fault.BLACKHOLE))

    def heal(self) -> None:
        """Forward again (bytes held by a black hole are delivered); the delay is kept."""
        self._run(self._set(Fault.NONE))

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        if self._loop is None:
            coro.close()
            raise BrokerError(f"fault proxy {self.address} is not running")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=10.0)

    # -- on the proxy's loop ------------------------------------------------------------------

    async def _listen(self) -> None:
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._server = await asyncio.start_server(self._serve, self.host, self.port)
        self.port = int(self._server.sockets[0].getsockname()[1])

    async def _set(self, fault: Fault) -> None:
        assert self._flowing is not None
        self.fault = fault
        if fault is Fault.BLACKHOLE:
            self._flowing.clear()
        else:
            self._flowing.set()
        if fault is Fault.DROP:
            await self._cut_all()

    def _dropping(self) -> bool:
        return self.fault is Fault.DROP

    async def _cut_all(self) -> None:
        for link in list(self._links):
            link.cut()

    async def _close(self) -> None:
        if self._server is not None:
            self._server.close()
        await self._cut_all()
        if self._server is not None:
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        assert self._flowing is not None
        self.accepted += 1
        if self.fault is Fault.DROP:
            writer.transport.abort()
            return
        link = _Link(writer)
        self._links.add(link)
        try:
            await self._flowing.wait()  # black-holed: accepted, never answered
            if self._dropping():  # healed by drop(): this link was cut
                return
            try:
                up_reader, link.upstream = await asyncio.open_connection(*self.upstream)
            except OSError:  # the broker is down: the client sees its connection cut
                return
            pumps = [
                asyncio.create_task(self._pump(reader, link.upstream)),
                asyncio.create_task(self._pump(up_reader, writer)),
            ]
            try:
                await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for task in pumps:
                    task.cancel()
                await asyncio.gather(*pumps, return_exceptions=True)
        finally:
            self._links.discard(link)
            link.cut()

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Forward ``reader`` to ``writer``, each chunk :attr:`delay_s` after it arrived, in order,
        and only while not black-holed; returns at end of stream or a connection error."""
        assert self._flowing is not None
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[float, bytes] | None] = asyncio.Queue()

        async def deliver() -> None:
            assert self._flowing is not None
            while (item := await queue.get()) is not None:
                due, data = item
                if (wait := due - loop.time()) > 0:
                    await asyncio.sleep(wait)
                await self._flowing.wait()
                writer.write(data)
                await writer.drain()

        sender = asyncio.create_task(deliver())
        try:
            while not sender.done():
                try:
                    chunk = await reader.read(_CHUNK)
                except OSError:
                    break
                if not chunk:
                    break
                queue.put_nowait((loop.time() + self.delay_s, chunk))
            queue.put_nowait(None)
            with contextlib.suppress(OSError):
                await sender
        finally:
            sender.cancel()
            with contextlib.suppress(asyncio.CancelledError, OSError):
                await sender
