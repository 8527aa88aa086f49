"""A secured ``streamtasks coordinator`` in this process for live tests, and a raw Kafka client
for it: TLS from the standard library, SaslHandshake v1 + SaslAuthenticate v2 with the pure
client mechanisms of :mod:`streamtasks.protocol.sasl`, requests as kio entities."""

from __future__ import annotations

import asyncio
import io
import ssl
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_authenticate.v2.response import SaslAuthenticateResponse
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from kio.schema.sasl_handshake.v1.response import SaslHandshakeResponse
from pydantic import SecretStr

from streamtasks.embedded.certs import CertKit, make_cert_kit
from streamtasks.protocol import consumer_group_codec as codec
from streamtasks.protocol.consumer_group import ConsumerGroupHeartbeatRequest
from streamtasks.protocol.sasl import sasl_client
from streamtasks.runtime.connection import AsyncConnection
from streamtasks.server import CoordinatorServer, ListenerSettings, ServerConfig
from streamtasks.server.credentials import add_user

PASSWORDS = {"alice": "alice-pw-Zq1", "bob": "bob-pw-Xy2"}


@dataclass(frozen=True, slots=True)
class Secured:
    kit: CertKit
    credentials: Path
    acl_file: Path


def make_secured(directory: Path, acl_text: str) -> Secured:
    kit = make_cert_kit(directory / "certs")
    credentials = directory / "users.json"
    for user, password in PASSWORDS.items():
        add_user(credentials, user, SecretStr(password), iterations=4096)
    acl_file = directory / "acls.txt"
    acl_file.write_text(acl_text)
    return Secured(kit, credentials, acl_file)


def start_server(
    bootstrap: str, listener: ListenerSettings, *, out: io.StringIO | None = None
) -> CoordinatorServer:
    return CoordinatorServer(
        ServerConfig(
            bootstrap_servers=bootstrap,
            listen_port=0,
            topic=f"_st_sec_{uuid.uuid4().hex[:8]}",
            status_interval_s=3600,
            routing="direct" if listener.guarded else "proxy",
            listener=listener,
        ),
        out=out or io.StringIO(),
    )


def client_context(kit: CertKit, *, certificate: bool = False) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(kit.ca_cert))
    if certificate:
        context.load_cert_chain(kit.client_cert, kit.client_key)
    return context


async def connect(port: int, context: ssl.SSLContext | None) -> AsyncConnection:
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", port, ssl=context, server_hostname="localhost" if context else None
    )
    return AsyncConnection(reader, writer, "secure-test")


async def handshake(conn: AsyncConnection, mechanism: str) -> SaslHandshakeResponse:
    return await conn.call(SaslHandshakeRequest(mechanism=mechanism), SaslHandshakeResponse)


async def login(conn: AsyncConnection, mechanism: str, user: str, password: str) -> SaslAuthenticateResponse:
    """Handshake and the whole exchange; the last SaslAuthenticate response (its error_code
    says how it went; on success the client has verified the server's signature)."""
    shake = await handshake(conn, mechanism)
    assert shake.error_code.value == 0, shake
    client = sasl_client(mechanism, username=user, password=password, nonce=uuid.uuid4().hex)
    payload: bytes | None = client.initial_response()
    answer: SaslAuthenticateResponse | None = None
    while payload is not None:
        answer = await conn.call(SaslAuthenticateRequest(auth_bytes=payload), SaslAuthenticateResponse)
        if answer.error_code.value != 0:
            return answer
        payload = client.evaluate(answer.auth_bytes)
    assert answer is not None
    assert client.complete
    return answer


async def logged_in(
    port: int, kit: CertKit, mechanism: str, user: str, password: str | None = None
) -> AsyncConnection:
    """A TLS connection to the listener on ``port``, logged in as ``user`` (password: ``PASSWORDS``'
    by default); a login that fails closes the connection and fails the test."""
    conn = await connect(port, client_context(kit))
    try:
        answer = await login(conn, mechanism, user, PASSWORDS[user] if password is None else password)
        assert answer.error_code.value == 0, answer
    except BaseException:
        await conn.close()
        raise
    return conn


async def join(conn: AsyncConnection, group: str, topic: str) -> Any:
    request = ConsumerGroupHeartbeatRequest(
        group_id=group,
        member_id=uuid.uuid4().hex,
        member_epoch=0,
        rebalance_timeout_ms=5_000,
        subscribed_topic_names=(topic,),
        topic_partitions=(),
    )
    return codec.decode_heartbeat_response(
        await conn.call_raw(68, 1, codec.encode_heartbeat_request(request, 1)), 1
    )


async def closed_by_server(conn: AsyncConnection, timeout_s: float = 5.0) -> bool:
    """Whether the server closes the connection within ``timeout_s``."""
    try:
        async with asyncio.timeout(timeout_s):
            while not conn.closed:
                await asyncio.sleep(0.02)
    except TimeoutError:
        return False
    return True
