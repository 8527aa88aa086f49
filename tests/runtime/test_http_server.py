"""The HTTP servers a process shares between its features: features naming one address share one
server, a clear error for a taken or bad address, host:port parsing (no broker)."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest
from aiohttp import web

from streamtasks.errors import ConfigError, StreamTasksError
from streamtasks.runtime.http_server import HttpServers, split_host_port


def _route(path: str, body: str) -> web.RouteDef:
    async def handler(_: web.Request) -> web.Response:
        return web.Response(text=body)

    return web.get(path, handler)


async def _get(port: int, path: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as session, session.get(f"http://127.0.0.1:{port}{path}") as answer:
        return answer.status, await answer.text()


def test_two_features_on_one_address_share_one_server_and_others_get_their_own() -> None:
    async def scenario() -> list[tuple[int, str]]:
        servers = HttpServers()
        servers.add_routes("127.0.0.1", 0, [_route("/metrics", "m")])
        servers.add_routes("127.0.0.1", 0, [_route("/stores/{store}/{key}", "q")])
        servers.add_routes("localhost", 0, [_route("/other", "o")])
        await servers.start()
        try:
            assert len(servers.addresses) == 2
            with pytest.raises(StreamTasksError, match="before the App starts"):
                servers.add_routes("127.0.0.1", 0, [_route("/late", "x")])
            shared = servers.port("127.0.0.1", 0)
            other = servers.port("localhost", 0)
            assert shared != other
            return [
                await _get(shared, "/metrics"),
                await _get(shared, "/stores/s/k"),
                await _get(shared, "/other"),
                await _get(other, "/other"),
            ]
        finally:
            await servers.stop()

    answers = asyncio.run(scenario())
    assert answers == [(200, "m"), (200, "q"), (404, "404: Not Found"), (200, "o")]


def test_a_taken_port_and_a_bad_port_are_one_clear_error() -> None:
    async def scenario() -> None:
        first = HttpServers()
        first.add_routes("127.0.0.1", 0, [_route("/a", "a")])
        await first.start()
        try:
            taken = first.port("127.0.0.1", 0)
            second = HttpServers()
            second.add_routes("127.0.0.1", taken, [_route("/b", "b")])
            with pytest.raises(ConfigError, match=f"cannot serve HTTP on 127.0.0.1:{taken}"):
                await second.start()
        finally:
            await first.stop()

    asyncio.run(scenario())
    with pytest.raises(ConfigError, match=r"0\.\.65535"):
        HttpServers().add_routes("127.0.0.1", 70_000, [])
    with pytest.raises(StreamTasksError, match="no HTTP server on h:1"):
        HttpServers().port("h", 1)


def test_host_port_parsing() -> None:
    assert split_host_port("h:80") == ("h", 80)
    assert split_host_port("[::1]:9000") == ("::1", 9000)
    for bad in ("h", "h:x", ":80", "h:70000"):
        with pytest.raises(ConfigError, match="host:port"):
            split_host_port(bad)
