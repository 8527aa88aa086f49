"""A small asyncio server that speaks Kafka's SASL handshake (SaslHandshake v1, SaslAuthenticate
v2) and Heartbeat v4, for unit tests of the runtime's connection: it authenticates with the
server halves of streamtasks.protocol.sasl, grants a session lifetime, answers requests one at
a time in order (as a broker does), and closes a connection whose session has expired when a
request other than SaslHandshake arrives (KIP-368). Not Kafka: the live tests use the real one."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import io
import json
import ssl
import struct
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.api_versions.v3.response import ApiVersion, ApiVersionsResponse
from kio.schema.errors import ErrorCode
from kio.schema.heartbeat.v4.request import HeartbeatRequest
from kio.schema.heartbeat.v4.response import HeartbeatResponse
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_authenticate.v2.response import SaslAuthenticateResponse
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from kio.schema.sasl_handshake.v1.response import SaslHandshakeResponse
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32, i32Timedelta, i64Timedelta

from streamtasks.errors import SaslError
from streamtasks.protocol.sasl import (
    OAUTHBEARER,
    PLAIN,
    ScramCredential,
    ScramServer,
    parse_oauthbearer,
    parse_plain,
    scram_credential,
)

_REQUESTS: dict[tuple[int, int], tuple[type[Any], type[Any]]] = {
    (17, 1): (SaslHandshakeRequest, RequestHeaderV1),
    (36, 2): (SaslAuthenticateRequest, RequestHeaderV2),
    (12, 4): (HeartbeatRequest, RequestHeaderV2),
    (18, 3): (ApiVersionsRequest, RequestHeaderV2),
}


@dataclass
class FakeSaslBroker:
    """Accepts ``users`` (name -> password) over ``mechanisms``; ``session_ms`` 0: no expiry."""

    users: Mapping[str, str]
    mechanisms: tuple[str, ...] = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
    session_ms: int = 0
    heartbeat_delay_s: float = 0.0
    ssl_context: ssl.SSLContext | None = None
    #: Misbehave: send a wrong SCRAM server signature.
    bad_server_signature: bool = False
    accepted: int = 0
    handshakes: int = 0
    api_versions: int = 0
    heartbeats: int = 0
    expired_requests: int = 0
    port: int = 0
    _server: asyncio.Server | None = None
    _credentials: dict[tuple[str, str], ScramCredential] = field(default_factory=dict)

    async def start(self) -> FakeSaslBroker:
        for user, password in self.users.items():
            for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
                self._credentials[(mechanism, user)] = scram_credential(
                    mechanism, password, f"salt-{user}".encode(), 4096
                )
        # TLS is started per connection after the accept, so that accepts are counted even when
        # the handshake fails.
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        session = _Session(self)
        try:
            if self.ssl_context is not None:
                await writer.start_tls(self.ssl_context)
            while True:
                size = struct.unpack(">i", await reader.readexactly(4))[0]
                if not 0 <= size <= 100 * 1024 * 1024:
                    break  # Kafka: larger than socket.request.max.bytes, the connection is closed
                payload = await reader.readexactly(size)
                reply = await session.handle(payload)
                if reply is None:
                    break
                writer.write(reply)
                await writer.drain()
        except (asyncio.IncompleteReadError, OSError, struct.error):
            pass
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()


class _Session:
    def __init__(self, broker: FakeSaslBroker) -> None:
        self.broker = broker
        self.mechanism = ""
        self.scram: ScramServer | None = None
        self.expires_at: float | None = None
        self.authenticated = False
        self.oauth_failed = False

    async def handle(self, payload: bytes) -> bytes | None:
        api_key, api_version = struct.unpack_from(">hh", payload, 0)
        if (api_key, api_version) not in _REQUESTS:
            return None  # a request this server does not speak (aiokafka's ApiVersions v0): close
        request_cls, header_cls = _REQUESTS[(api_key, api_version)]
        view = memoryview(payload)
        header, offset = entity_reader(header_cls)(view, 0)
        request, _ = entity_reader(request_cls)(view, offset)
        correlation_id = int(header.correlation_id)
        if isinstance(request, ApiVersionsRequest):  # served before authentication, as Kafka does
            self.broker.api_versions += 1
            keys = tuple(
                ApiVersion(api_key=i16(k), min_version=i16(v), max_version=i16(v)) for k, v in _REQUESTS
            )
            return _frame(
                correlation_id,
                ApiVersionsResponse(
                    error_code=ErrorCode.none,
                    api_keys=keys,
                    throttle_time=i32Timedelta.parse(datetime.timedelta(0)),
                ),
            )
        if isinstance(request, SaslHandshakeRequest):
            return self._handshake(correlation_id, request)
        if isinstance(request, SaslAuthenticateRequest):
            return self._authenticate(correlation_id, bytes(request.auth_bytes))
        if not self.authenticated or (self.expires_at is not None and time.monotonic() > self.expires_at):
            self.broker.expired_requests += 1
            return None  # Kafka closes the connection
        self.broker.heartbeats += 1
        await asyncio.sleep(self.broker.heartbeat_delay_s)
        return _frame(
            correlation_id,
            HeartbeatResponse(
                throttle_time=i32Timedelta.parse(datetime.timedelta(0)), error_code=ErrorCode.none
            ),
        )

    def _handshake(self, correlation_id: int, request: SaslHandshakeRequest) -> bytes:
        self.broker.handshakes += 1
        enabled = self.broker.mechanisms
        code = ErrorCode.none if request.mechanism in enabled else ErrorCode.unsupported_sasl_mechanism
        self.mechanism = request.mechanism
        self.scram = None
        return _frame(correlation_id, SaslHandshakeResponse(error_code=code, mechanisms=enabled))

    def _authenticate(self, correlation_id: int, auth_bytes: bytes) -> bytes:
        try:
            reply, done = self._step(auth_bytes)
        except SaslError:
            return self._failed(correlation_id)
        lifetime = self.broker.session_ms if done else 0
        if done:
            self.authenticated = True
            self.expires_at = time.monotonic() + lifetime / 1000 if lifetime else None
        return _frame(
            correlation_id,
            SaslAuthenticateResponse(
                error_code=ErrorCode.none,
                error_message=None,
                auth_bytes=reply,
                session_lifetime=i64Timedelta.parse(datetime.timedelta(milliseconds=lifetime)),
            ),
        )

    def _failed(self, correlation_id: int) -> bytes:
        message = (
            "Authentication failed during authentication due to invalid credentials with SASL"
            f" mechanism {self.mechanism}"
        )
        return _frame(
            correlation_id,
            SaslAuthenticateResponse(
                error_code=ErrorCode.sasl_authentication_failed, error_message=message, auth_bytes=b""
            ),
        )

    def _step(self, auth_bytes: bytes) -> tuple[bytes, bool]:
        users = self.broker.users
        if self.mechanism == PLAIN:
            creds = parse_plain(auth_bytes)
            if users.get(creds.username) != creds.password:
                raise SaslError("bad password")
            return b"", True
        if self.mechanism == OAUTHBEARER:
            if self.oauth_failed:  # the client's kvsep after our error challenge
                raise SaslError("token rejected")
            token = parse_oauthbearer(auth_bytes).token
            if token.count(".") != 2 or "bad" in token:
                self.oauth_failed = True
                return json.dumps({"status": "invalid_token"}).encode(), False
            return b"", True
        if self.scram is None:
            self.scram = ScramServer(self.mechanism, nonce="fakebrokernonce")
            first = self.scram.receive_client_first(auth_bytes)
            credential = self.broker._credentials.get((self.mechanism, first.username))
            if credential is None:
                raise SaslError("unknown user")
            return self.scram.server_first(credential), False
        final = self.scram.receive_client_final(auth_bytes)
        if self.broker.bad_server_signature:
            final = b"v=" + b"A" * (len(final) - 2)
        return final, True


def _frame(correlation_id: int, response: Any) -> bytes:
    buf = io.BytesIO()
    header_cls = response.__header_schema__
    entity_writer(header_cls)(buf, header_cls(correlation_id=i32(correlation_id)))
    entity_writer(type(response))(buf, response)
    body = buf.getvalue()
    return struct.pack(">i", len(body)) + body
