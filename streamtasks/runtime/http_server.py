"""A process's HTTP servers (aiohttp): one per configured address, shared by whatever serves on
it (the App's ``/metrics`` and interactive queries on ``application_server``; ``streamtasks
coordinator``'s ``/metrics``).

A feature adds its routes for a ``(host, port)`` with :meth:`HttpServers.add_routes` before the
App starts; two features naming the same address share one server (one aiohttp application
holding both route sets). :meth:`HttpServers.start` binds every server (port 0: an ephemeral
port, read back with :meth:`HttpServers.port`); :meth:`HttpServers.stop` closes them. With an
:class:`~streamtasks.runtime.http_security.HttpSecurity` every server speaks its TLS and asks its
credentials (``401`` without them).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from streamtasks.errors import ConfigError, StreamTasksError
from streamtasks.runtime.http_security import HttpSecurity

if TYPE_CHECKING:  # aiohttp is imported when a server is set up (the "metrics" extra)
    from aiohttp import web

__all__ = ["HttpServers", "split_host_port"]

Address = tuple[str, int]


def split_host_port(address: str) -> tuple[str, int]:
    """``"host:port"`` (``"[::1]:port"`` for IPv6) as ``(host, port)``; a :class:`ConfigError`
    if malformed."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) < 65536:
        raise ConfigError(f"an HTTP address must be host:port, not {address!r}")
    return host.removeprefix("[").removesuffix("]"), int(port)


class HttpServers:
    """The HTTP servers of one process, by configured address (see the module docstring)."""

    def __init__(self, security: HttpSecurity | None = None) -> None:
        self.security = security
        self._apps: dict[Address, web.Application] = {}
        self._runners: dict[Address, web.AppRunner] = {}
        self._ports: dict[Address, int] = {}
        self._routes: dict[Address, list[tuple[str, str]]] = {}

    def add_routes(self, host: str, port: int, routes: Iterable[web.AbstractRouteDef]) -> None:
        """Serve ``routes`` on ``host:port`` (with any other routes given for that address)."""
        if self._runners:
            raise StreamTasksError("HTTP routes must be added before the App starts")
        if not 0 <= port <= 65535:
            raise ConfigError(f"HTTP port must be 0..65535, got {port}")
        from aiohttp import web

        application = self._apps.get((host, port))
        if application is None:
            security = self.security
            auth = security is not None and security.auth_scheme is not None
            middlewares = [security.middleware()] if auth and security is not None else []
            application = self._apps[(host, port)] = web.Application(middlewares=middlewares)
        defs = list(routes)
        application.add_routes(defs)
        self._routes.setdefault((host, port), []).extend(
            (str(getattr(d, "method", "*")), str(getattr(d, "path", "*"))) for d in defs
        )

    def routes(self, host: str, port: int) -> tuple[tuple[str, str], ...]:
        """``(method, path)`` of every route added for ``host:port``."""
        return tuple(self._routes.get((host, port), ()))

    @property
    def addresses(self) -> tuple[Address, ...]:
        return tuple(self._apps)

    @property
    def scheme(self) -> str:
        """``https`` when the servers speak TLS, else ``http``."""
        return "http" if self.security is None else self.security.scheme

    async def start(self) -> None:
        if not self._apps:
            return
        from aiohttp import web

        ssl_context = None if self.security is None else self.security.server_ssl_context()
        for address, application in self._apps.items():
            if address in self._runners:
                continue
            runner = web.AppRunner(application, access_log=None)
            await runner.setup()
            site = web.TCPSite(runner, address[0], address[1], ssl_context=ssl_context)
            try:
                await site.start()
            except OSError as exc:
                await runner.cleanup()
                raise ConfigError(f"cannot serve HTTP on {address[0]}:{address[1]}: {exc}") from None
            self._runners[address] = runner
            bound = runner.addresses
            self._ports[address] = int(bound[0][1]) if bound else address[1]

    def port(self, host: str, port: int) -> int:
        """The port the server configured as ``host:port`` listens on (the bound one for 0)."""
        if (host, port) not in self._ports:
            raise StreamTasksError(f"no HTTP server on {host}:{port} is running")
        return self._ports[(host, port)]

    async def stop(self) -> None:
        runners, self._runners = self._runners, {}
        self._ports.clear()
        for runner in runners.values():
            await runner.cleanup()
