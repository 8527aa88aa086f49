"""One small asyncio HTTP server a process shares between its features (aiohttp).

Each feature registers its routes before the server starts (interactive queries:
``GET /stores/{store}/{key}``; metrics: ``GET /metrics``)::

    server = HttpServer("127.0.0.1", 8080)
    server.add_route("GET", "/stores/{store}/{key}", handler)
    await server.start()
    ...
    await server.stop()

A handler takes an ``aiohttp.web.Request`` and returns an ``aiohttp.web.StreamResponse``.
Port 0 binds a free port (:attr:`HttpServer.port` says which, once started). aiohttp's access
log is off (a query per key would flood the logs).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web

from streamtasks.errors import ConfigError, StreamTasksError

__all__ = ["Handler", "HttpServer", "split_host_port"]

#: A route's handler.
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def split_host_port(address: str) -> tuple[str, int]:
    """``"host:port"`` (``"[::1]:port"`` for IPv6) as ``(host, port)``; a :class:`ConfigError`
    if malformed."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) < 65536:
        raise ConfigError(f"an HTTP address must be host:port, not {address!r}")
    return host.removeprefix("[").removesuffix("]"), int(port)


class HttpServer:
    """See the module docstring."""

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self._port = port
        self._app = web.Application()
        self._runner: web.AppRunner | None = None
        self._site: web.TCPSite | None = None
        self._routes: list[tuple[str, str]] = []

    @classmethod
    def at(cls, address: str) -> HttpServer:
        """A server that will listen on ``address`` (``host:port``)."""
        return cls(*split_host_port(address))

    @property
    def routes(self) -> tuple[tuple[str, str], ...]:
        """``(method, path)`` of every registered route."""
        return tuple(self._routes)

    @property
    def started(self) -> bool:
        return self._runner is not None

    @property
    def port(self) -> int:
        """The port it listens on (the bound one once started, when asked for port 0)."""
        if self._site is not None and self._runner is not None:
            for address in self._runner.addresses:
                if isinstance(address, tuple) and len(address) >= 2:
                    return int(address[1])
        return self._port

    def add_route(self, method: str, path: str, handler: Handler) -> None:
        """Serve ``method path`` with ``handler``; only before :meth:`start`."""
        if self.started:
            raise StreamTasksError(f"the HTTP server is started: cannot add {method} {path}")
        self._app.router.add_route(method, path, handler)
        self._routes.append((method, path))

    async def start(self) -> None:
        """Listen (a :class:`ConfigError` naming the address when it cannot bind)."""
        if self.started:
            return
        runner = web.AppRunner(self._app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, self.host, self._port)
        try:
            await site.start()
        except OSError as exc:
            await runner.cleanup()
            raise ConfigError(f"cannot listen on {self.host}:{self._port}: {exc}") from exc
        self._runner, self._site = runner, site

    async def stop(self) -> None:
        runner, self._runner, self._site = self._runner, None, None
        if runner is not None:
            await runner.cleanup()
