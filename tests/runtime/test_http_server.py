"""The shared HTTP server: routes registered before start, a free port, a clear error when the
address is taken."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest
from aiohttp import web

from streamtasks.errors import ConfigError, StreamTasksError
from streamtasks.runtime.http_server import HttpServer, split_host_port


async def _hello(request: web.Request) -> web.Response:
    return web.Response(text="hello")


async def _serve() -> tuple[int, str, str]:
    server = HttpServer("127.0.0.1", 0)
    server.add_route("GET", "/hello", _hello)
    await server.start()
    try:
        with pytest.raises(StreamTasksError, match="cannot add GET /late"):
            server.add_route("GET", "/late", _hello)
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"http://127.0.0.1:{server.port}/hello") as resp,
        ):
            status, body = resp.status, await resp.text()
        taken = HttpServer("127.0.0.1", server.port)
        with pytest.raises(ConfigError, match=f"cannot listen on 127.0.0.1:{server.port}") as exc:
            await taken.start()
        return status, body, str(exc.value)
    finally:
        await server.stop()


def test_serves_registered_routes_and_names_an_address_it_cannot_bind() -> None:
    status, body, _ = asyncio.run(_serve())
    assert (status, body) == (200, "hello")


def test_host_port_parsing() -> None:
    assert split_host_port("h:80") == ("h", 80)
    assert split_host_port("[::1]:9000") == ("::1", 9000)
    for bad in ("h", "h:x", ":80", "h:70000"):
        with pytest.raises(ConfigError, match="host:port"):
            split_host_port(bad)
