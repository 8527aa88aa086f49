"""The backing cluster's group coordinators, as ``streamtasks coordinator`` reaches them for the
offsets it forwards (transactional commits, and the groups that committed transactionally):
FindCoordinator on the bootstrap servers, one connection per broker shared by every group it
coordinates, a request body sent in a flexible version and its answer's body returned.

A connection that fails, or an answer saying the coordinator moved, forgets where the group's
coordinator is; the next request looks it up again. Nothing is retried here: the caller answers
its client with a retriable code (COORDINATOR_NOT_AVAILABLE), and the client retries, as it
would with a Kafka broker."""

from __future__ import annotations

import asyncio
import io
import logging
from typing import Any

from kio.serial import entity_reader, entity_writer

from streamtasks.errors import BrokerError, DecodeError
from streamtasks.protocol.errors import KafkaErrorCode
from streamtasks.runtime.connection import AsyncConnection, ConnectionLost, open_any
from streamtasks.runtime.group_wire import KFindCoordinatorResponse, find_coordinator_request
from streamtasks.runtime.security import ClientSettings

__all__ = ["ClusterGroups", "decode_body", "encode_body"]

_log = logging.getLogger("streamtasks.server")
_CLIENT_ID = "streamtasks-coordinator"


def encode_body(entity: Any) -> bytes:
    buf = io.BytesIO()
    entity_writer(type(entity))(buf, entity)
    return buf.getvalue()


def decode_body(cls: type[Any], body: bytes) -> Any:
    try:
        entity, _ = entity_reader(cls)(memoryview(body), 0)
    except Exception as exc:  # kio's reader raises several kinds on bad bytes
        raise DecodeError(f"malformed {cls.__name__} from the backing cluster: {exc!r}") from None
    return entity


class ClusterGroups:
    """Where each group's coordinator is in the backing cluster, and connections to them."""

    def __init__(self, settings: ClientSettings, *, timeout_s: float = 30.0) -> None:
        self._settings = settings
        self._timeout_s = timeout_s
        self._where: dict[str, tuple[str, int]] = {}
        self._connections: dict[tuple[str, int], AsyncConnection] = {}
        self._lock = asyncio.Lock()
        #: Requests forwarded, and answered (any code).
        self.forwarded = 0

    async def _find(self, group_id: str) -> tuple[str, int]:
        conn = await open_any(self._settings, _CLIENT_ID, timeout_s=min(10.0, self._timeout_s))
        try:
            found = await conn.call(
                find_coordinator_request(group_id), KFindCoordinatorResponse, timeout_s=self._timeout_s
            )
        finally:
            await conn.close()
        error = KafkaErrorCode.of(int(found.error_code.value))
        if error is not KafkaErrorCode.NONE:
            raise BrokerError(
                f"the backing cluster has no coordinator for group {group_id!r}: {error.name} "
                f"{found.error_message or ''}".strip()
            )
        return str(found.host), int(found.port)

    async def _connection(self, group_id: str) -> AsyncConnection:
        async with self._lock:
            where = self._where.get(group_id)
            if where is None:
                where = self._where[group_id] = await self._find(group_id)
            conn = self._connections.get(where)
            if conn is None or conn.closed:
                conn = self._connections[where] = await AsyncConnection.open(
                    where[0],
                    where[1],
                    client_id=_CLIENT_ID,
                    timeout_s=min(10.0, self._timeout_s),
                    security=self._settings,
                )
            return conn

    async def call(self, group_id: str, api_key: int, api_version: int, request: Any) -> bytes:
        """Send ``request`` (a kio entity of a flexible version) to the coordinator of
        ``group_id``; the response body. BrokerError when it cannot be reached."""
        conn = await self._connection(group_id)
        try:
            body = await conn.call_raw(api_key, api_version, encode_body(request), timeout_s=self._timeout_s)
        except ConnectionLost:
            self.forget(group_id)
            raise
        self.forwarded += 1
        return body

    def forget(self, group_id: str) -> None:
        """The group's coordinator moved (or its connection failed): look it up next time."""
        if self._where.pop(group_id, None) is not None:
            _log.debug("forgetting the backing cluster's coordinator of group %r", group_id)

    async def close(self) -> None:
        connections, self._connections = list(self._connections.values()), {}
        self._where.clear()
        for conn in connections:
            await conn.close()
