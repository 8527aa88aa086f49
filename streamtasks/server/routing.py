"""Where clients find brokers: the server rewrites the broker list of every Metadata response.

A client asks *any* broker it knows for its group's coordinator (librdkafka and the Java client
both pick one that is connected), and a Kafka broker names Kafka's own coordinator. So in the
default ``proxy`` routing every broker of the backing cluster is listed at an address of the
server (one listener per broker, everything forwarded unchanged to that broker, FindCoordinator
for groups answered by the server): no client can reach Kafka's coordinator, and a group cannot
be split between two coordinators, even while the server restarts. ``direct`` routing lists the
real brokers (fetch and produce go straight to them) and is safe only for clients that ask the
bootstrap server alone for the coordinator; see docs/coordinator.md.

Both add the server itself under its node id: a client drops a coordinator whose node id the
latest metadata no longer lists.
"""

from __future__ import annotations

import asyncio
import dataclasses
import struct
from collections.abc import Awaitable, Callable
from typing import Any

from kio.serial import entity_reader

from streamtasks.errors import DecodeError
from streamtasks.server.offset_api import element, make
from streamtasks.server.wire import encode_kio_response, kio_response_class

__all__ = ["METADATA", "ROUTINGS", "BrokerProxies", "rewrite_coordinators", "rewrite_metadata"]

METADATA = 3
ROUTINGS = ("proxy", "direct")

#: Start a listener forwarding to (host, port); returns the port it listens on.
StartListener = Callable[[int, str, int, int], Awaitable[int]]


class BrokerProxies:
    """One listener per backing broker, opened the first time metadata names the broker."""

    def __init__(self, start_listener: StartListener, *, port_base: int | None = None) -> None:
        self._start = start_listener
        self._port_base = port_base
        self._ports: dict[tuple[int, str, int], int] = {}
        self._lock = asyncio.Lock()

    async def port_for(self, node_id: int, host: str, port: int) -> int:
        key = (node_id, host, port)
        if key in self._ports:
            return self._ports[key]
        async with self._lock:
            if key not in self._ports:
                wanted = 0 if self._port_base is None else self._port_base + len(self._ports)
                self._ports[key] = await self._start(node_id, host, port, wanted)
            return self._ports[key]

    def routes(self) -> dict[int, tuple[str, int, int]]:
        """node id -> (broker host, broker port, listener port)."""
        return {node: (host, port, mine) for (node, host, port), mine in self._ports.items()}


def decode_kio_response(api_key: int, version: int, frame: bytes) -> tuple[int, Any]:
    cls = kio_response_class(api_key, version)
    payload = memoryview(frame)[4:]
    (correlation_id,) = struct.unpack_from(">i", payload, 0)
    offset = 4
    if cls.__header_schema__.__version__ >= 1:
        if payload[offset] != 0:
            raise DecodeError("response header with tagged fields")
        offset += 1
    try:
        entity, _ = entity_reader(cls)(payload, offset)
    except Exception as exc:  # kio's reader raises several kinds on bad bytes
        raise DecodeError(f"malformed {cls.__name__}: {exc}") from None
    return correlation_id, entity


async def rewrite_metadata(
    frame: bytes,
    version: int,
    *,
    coordinator: tuple[int, str, int],
    proxies: BrokerProxies | None,
    advertised_host: str,
) -> bytes:
    """The Metadata response frame with brokers at the server's listeners (``proxies``; None:
    the real addresses) and the coordinator's own entry added."""
    correlation_id, response = decode_kio_response(METADATA, version, frame)
    broker_cls = element(type(response), "brokers")
    node_id, host, port = coordinator
    brokers = []
    for b in response.brokers:
        if int(b.node_id) == node_id:
            continue
        if proxies is None:
            brokers.append(b)
        else:
            mine = await proxies.port_for(int(b.node_id), str(b.host), int(b.port))
            brokers.append(dataclasses.replace(b, host=advertised_host, port=mine))
    brokers.append(make(broker_cls, node_id=node_id, host=host, port=port, rack=None))
    return encode_kio_response(dataclasses.replace(response, brokers=tuple(brokers)), correlation_id)


async def rewrite_coordinators(
    frame: bytes, version: int, *, proxies: BrokerProxies, advertised_host: str
) -> bytes:
    """A forwarded FindCoordinator response (transactions, share groups) with the coordinator
    at its proxy listener, so the client never learns a broker address metadata does not list."""
    correlation_id, response = decode_kio_response(10, version, frame)
    if version < 4:
        if int(response.error_code.value) != 0:
            return frame
        port = await proxies.port_for(int(response.node_id), str(response.host), int(response.port))
        rewritten = dataclasses.replace(response, host=advertised_host, port=port)
    else:
        coordinators = []
        for found in response.coordinators:
            if int(found.error_code.value) == 0:
                port = await proxies.port_for(int(found.node_id), str(found.host), int(found.port))
                found = dataclasses.replace(found, host=advertised_host, port=port)  # noqa: PLW2901
            coordinators.append(found)
        rewritten = dataclasses.replace(response, coordinators=tuple(coordinators))
    return encode_kio_response(rewritten, correlation_id)
