"""Interactive queries over HTTP: the route a process serves and the client that routes a query.

``GET /stores/{store}/{key}`` answers a key's query (:meth:`QueryRouter.query`, or with
``?local=true`` :meth:`StoreQueries.local_bytes`):

* ``200``: ``{"store", "key", "found", "value", "value_b64", "task", "host", "active", "lag"}``:
  ``value`` as JSON when the value serde's object is JSON (strings, numbers, JSON values; else
  null), ``value_b64`` the serialized value (base64), what a routing process deserializes;
* ``503``: ``{"error": "unavailable", "reason", "detail", "retryable": true}``: rebalancing,
  the task is not hosted here, restoring, or a standby (asked without ``standby=true``);
* ``404``: no such store; ``400``: a key the store's key serde cannot read.

The key in the path is text read with the store's key serde (``STRING``: as is, ``INT64``: a
decimal number, ``JSON``: a JSON document, ``BYTES``: its UTF-8 bytes); with
``?key_encoding=base64`` it is the serialized key in URL-safe base64. ``?standby=true`` lets a
standby answer. The process asked routes the query to the key's host (as :meth:`QueryRouter.query`)
unless ``?local=true``, which answers from its own copy only (what :class:`QueryRouter` sends
another process, so a query never travels further than one hop); ``502``: that host answered
something malformed. With :class:`~streamtasks.runtime.http_security.HttpSecurity` (the App's
``http_security``) the router reaches its peers over HTTPS with the same CA, client certificate
and credentials its own server asks for.
"""

from __future__ import annotations

import base64
import json
from typing import Any
from urllib.parse import quote

import aiohttp
from aiohttp import web

from streamtasks.app.queries import QueryResult, StoreQueries
from streamtasks.errors import QueryError, SerdeError, StoreUnavailableError, UnknownStoreError
from streamtasks.runtime.http_security import HttpSecurity
from streamtasks.runtime.http_server import HttpServers
from streamtasks.state.serdes import BytesSerde, Int64Serde, JsonSerde, Serde, StringSerde
from topology.ids import TaskId

__all__ = ["STORE_ROUTE", "QueryRouter", "key_from_text"]

#: The route of a key's query.
STORE_ROUTE = "/stores/{store}/{key}"


def key_from_text(serde: Serde[Any], text: str) -> bytes:
    """The serialized key a path segment names (module docstring); a :class:`SerdeError`
    (HTTP 400) for text the serde's type cannot be made from."""
    try:
        if isinstance(serde, StringSerde):
            return serde.serialize(text)
        if isinstance(serde, Int64Serde):
            return serde.serialize(int(text))
        if isinstance(serde, JsonSerde):
            return serde.serialize(json.loads(text))
        if isinstance(serde, BytesSerde):
            return text.encode()
    except ValueError as exc:
        raise SerdeError(f"key {text!r} is not a {serde!r} key: {exc}") from exc
    raise SerdeError(f"keys of serde {serde!r} are given as ?key_encoding=base64 (the serialized key)")


def _json_value(value: Any) -> Any:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return None
    return value


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode()


def _error(status: int, error: str, detail: str, reason: str | None = None) -> web.Response:
    body: dict[str, Any] = {"error": error, "detail": detail}
    if reason is not None:
        body.update(reason=reason, retryable=True)
    return web.json_response(body, status=status)


class QueryRouter:
    """Routes queries (:meth:`query`) and serves ``GET /stores/{store}/{key}``
    (:meth:`register`); ``timeout_s`` bounds each HTTP request to another process; ``security``:
    the TLS and credentials of the peers' servers."""

    def __init__(
        self, queries: StoreQueries, *, timeout_s: float = 5.0, security: HttpSecurity | None = None
    ) -> None:
        self.stores = queries
        self.security = security
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._session: aiohttp.ClientSession | None = None

    def _new_session(self) -> aiohttp.ClientSession:
        security = self.security
        if security is None:
            return aiohttp.ClientSession(timeout=self._timeout)
        context = security.client_ssl_context()
        authorization = security.authorization()
        return aiohttp.ClientSession(
            timeout=self._timeout,
            connector=aiohttp.TCPConnector(ssl=context if context is not None else True),
            headers={} if authorization is None else {"Authorization": authorization},
        )

    def register(self, servers: HttpServers, host: str, port: int) -> None:
        """Serve ``GET /stores/{store}/{key}`` on ``host:port``."""
        servers.add_routes(host, port, [web.get(STORE_ROUTE, self.handle, allow_head=False)])

    async def close(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    # -- serving ---------------------------------------------------------------------------

    async def handle(self, request: web.Request) -> web.Response:
        store, text = request.match_info["store"], request.match_info["key"]
        standby = request.query.get("standby", "").lower() in ("1", "true", "yes")
        local = request.query.get("local", "").lower() in ("1", "true", "yes")
        try:
            key_serde, value_serde = self.stores.serdes(store)
            if request.query.get("key_encoding") == "base64":
                key = base64.urlsafe_b64decode(text.encode())
            else:
                key = key_from_text(key_serde, text)
            if local:
                got = self.stores.local_bytes(store, key, allow_standby=standby)
            else:
                got = await self.query(store, key_serde.deserialize(key), allow_standby=standby)
        except UnknownStoreError as exc:
            return _error(404, "unknown-store", str(exc))
        except (SerdeError, ValueError) as exc:
            return _error(400, "bad-key", str(exc))
        except StoreUnavailableError as exc:
            return _error(503, "unavailable", exc.detail, exc.reason)
        except QueryError as exc:
            return _error(502, "bad-peer", str(exc))
        raw = None if got.value is None else value_serde.serialize(got.value)
        return web.json_response(
            {
                "store": store,
                "key": text,
                "found": got.found,
                "value": _json_value(got.value),
                "value_b64": None if raw is None else _b64(raw),
                "task": str(got.task),
                "host": got.host,
                "active": got.active,
                "lag": got.lag,
            }
        )

    # -- routing ---------------------------------------------------------------------------

    async def query(self, store: str, key: Any, *, allow_standby: bool = False) -> QueryResult:
        """``key``'s value where it lives (see :mod:`streamtasks.app.queries`): the active's
        answer, else (``allow_standby``) a standby's; a :class:`StoreUnavailableError` with the
        last reason when none may answer now."""
        q = self.stores
        task = q.task_of(store, key)
        if not q.stable():  # its metadata may be on its way out
            raise StoreUnavailableError("rebalancing", "this process is not running a stable assignment")
        candidates = q.candidates(task, allow_standby=allow_standby)
        if not candidates:
            raise StoreUnavailableError(
                "no-host", f"no process hosts task {task} (as of the last assignment)"
            )
        last: StoreUnavailableError | None = None
        for host in candidates:
            try:
                if host is None or host == q.endpoint:
                    return q.local(store, key, allow_standby=allow_standby)
                return await self._remote(host, store, key, task, allow_standby=allow_standby)
            except StoreUnavailableError as exc:
                last = exc
        assert last is not None
        raise last

    async def _remote(
        self, host: str, store: str, key: Any, task: TaskId, *, allow_standby: bool
    ) -> QueryResult:
        key_serde, value_serde = self.stores.serdes(store)
        scheme = "http" if self.security is None else self.security.scheme
        url = f"{scheme}://{host}/stores/{quote(store, safe='')}/{_b64(key_serde.serialize(key))}"
        params = {"key_encoding": "base64", "local": "true", "standby": "true" if allow_standby else "false"}
        if self._session is None:
            self._session = self._new_session()
        try:
            async with self._session.get(url, params=params) as resp:
                status = resp.status
                body = await resp.json(content_type=None)
        except (aiohttp.ClientConnectorCertificateError, aiohttp.ClientSSLError) as exc:
            raise QueryError(
                f"TLS with {host} failed (http_security's cafile, certificate?): {exc}"
            ) from None
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise StoreUnavailableError("unreachable", f"{host}: {exc!r}") from exc
        except ValueError as exc:
            raise QueryError(f"{host} answered a query with no JSON: {exc}") from exc
        if status == 503 and isinstance(body, dict):
            raise StoreUnavailableError(str(body.get("reason")), f"{host}: {body.get('detail')}")
        if status != 200 or not isinstance(body, dict):
            raise QueryError(f"{host} answered HTTP {status} to a query of {store!r}: {body!r}")
        if body.get("task") != str(task):
            raise QueryError(
                f"{host} answered for task {body.get('task')}, not {task}: do the processes agree?"
            )
        raw = body.get("value_b64")
        return QueryResult(
            store=store,
            key=key,
            value=None if raw is None else value_serde.deserialize(base64.urlsafe_b64decode(raw)),
            found=bool(body.get("found")),
            task=task,
            host=host,
            active=bool(body.get("active")),
            lag=body.get("lag"),
        )
