"""``streamtasks coordinator`` with TLS + SASL + an ACL file, in front of the embedded Apache
Kafka (the plain ``kafka`` fixture), driven by a raw client (stdlib TLS, the pure SASL client
mechanisms, kio entities) and by aiokafka's own SASL_SSL client."""

from __future__ import annotations

import asyncio
import datetime
import logging
import ssl
import struct
import uuid
from pathlib import Path

import pytest
from kio.schema.api_versions.v0.request import ApiVersionsRequest as ApiVersionsV0
from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsV0Response
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.api_versions.v3.response import ApiVersionsResponse
from kio.schema.create_topics.v7.response import CreateTopicsResponse
from kio.schema.find_coordinator.v4 import request as find_req
from kio.schema.find_coordinator.v4 import response as find_resp
from kio.schema.join_group.v9 import request as join_req
from kio.schema.join_group.v9 import response as join_resp
from kio.schema.list_groups.v5.request import ListGroupsRequest
from kio.schema.list_groups.v5.response import ListGroupsResponse
from kio.schema.metadata.v12.response import MetadataResponse
from kio.schema.offset_commit.v9 import request as commit_req
from kio.schema.offset_commit.v9 import response as commit_resp
from kio.schema.offset_fetch.v8 import request as fetch_req
from kio.schema.offset_fetch.v8 import response as fetch_resp
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_authenticate.v2.response import SaslAuthenticateResponse
from kio.schema.sasl_handshake.v0.request import SaslHandshakeRequest as SaslHandshakeV0
from kio.schema.sasl_handshake.v0.response import SaslHandshakeResponse as SaslHandshakeV0Response
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i8, i32, i32Timedelta, i64

from streamtasks.embedded import Cluster
from streamtasks.protocol import consumer_group_codec as codec
from streamtasks.protocol.consumer_group import ConsumerGroupDescribeRequest
from streamtasks.runtime.admin import TopicSpec, create_topics_request, metadata_request
from streamtasks.runtime.connection import AsyncConnection, ConnectionLost
from streamtasks.runtime.framing import decode_response, encode_request
from streamtasks.server import ListenerSettings
from streamtasks.server.metadata import fetch_image
from tests.server.secure_support import (
    PASSWORDS,
    Secured,
    client_context,
    closed_by_server,
    connect,
    handshake,
    join,
    logged_in,
    login,
    make_secured,
    start_server,
)

pytestmark = pytest.mark.integration

SASL_AUTHENTICATION_FAILED = 58
UNSUPPORTED_SASL_MECHANISM = 33
ILLEGAL_SASL_STATE = 34
GROUP_AUTHORIZATION_FAILED = 30
TOPIC_AUTHORIZATION_FAILED = 29
ACLS = """
User:alice  group:orders-*  Read
User:alice  topic:orders-*  Describe
User:bob    group:bob-*     Read
"""


@pytest.fixture
def secured(tmp_path: Path) -> Secured:
    return make_secured(tmp_path, ACLS)


def sasl_listener(s: Secured, **extra: object) -> ListenerSettings:
    return ListenerSettings(
        tls_certfile=s.kit.broker_cert,
        tls_keyfile=s.kit.broker_key,
        sasl_mechanisms=("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"),
        credentials_file=s.credentials,
        acl_file=s.acl_file,
        **extra,  # type: ignore[arg-type]
    )


def topic(kafka: Cluster) -> str:
    name = f"orders-{uuid.uuid4().hex[:6]}"
    kafka.create_topics({name: 2})
    return name


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"])
def test_an_authorized_member_joins_and_an_unauthorized_group_is_refused(
    kafka: Cluster, secured: Secured, mechanism: str, caplog: pytest.LogCaptureFixture
) -> None:
    orders = topic(kafka)

    async def run() -> None:
        server = start_server(kafka.bootstrap_servers, sasl_listener(secured))
        await server.start()
        conn = await connect(server.port, client_context(secured.kit))
        try:
            versions = await conn.call(
                ApiVersionsRequest(client_software_name="t", client_software_version="1"), ApiVersionsResponse
            )
            advertised = {int(k.api_key) for k in versions.api_keys}
            assert {17, 36, 68, 69, 3, 18} <= advertised
            assert not advertised & {0, 1, 2, 19, 20}  # no Produce, Fetch, ListOffsets, admin
            done = await login(conn, mechanism, "alice", PASSWORDS["alice"])
            assert done.error_code.value == 0
            joined = await join(conn, f"orders-{mechanism}", orders)
            assert joined.error == 0
            assert joined.member_epoch >= 1
            refused = await join(conn, "payments", orders)
            assert refused.error == GROUP_AUTHORIZATION_FAILED
            described = codec.decode_describe_response(
                await conn.call_raw(
                    69,
                    1,
                    codec.encode_describe_request(
                        ConsumerGroupDescribeRequest(group_ids=(f"orders-{mechanism}", "payments")), 1
                    ),
                ),
                1,
            )
            errors = {g.group_id: int(g.error) for g in described.groups}
            assert errors == {f"orders-{mechanism}": 0, "payments": GROUP_AUTHORIZATION_FAILED}
            assert not conn.closed  # a denial answers; it does not close
        finally:
            await conn.close()
            await server.stop()

    with caplog.at_level(logging.WARNING, logger="streamtasks.server"):
        asyncio.run(run())
    denials = [r.getMessage() for r in caplog.records if "authorization denied" in r.getMessage()]
    assert denials == [
        "authorization denied: principal=User:alice operation=Read group=payments client=/127.0.0.1",
        "authorization denied: principal=User:alice operation=Describe group=payments client=/127.0.0.1",
    ]
    assert not any(PASSWORDS["alice"] in r.getMessage() for r in caplog.records)


def test_a_wrong_password_fails_and_closes(kafka: Cluster, secured: Secured) -> None:
    async def run() -> None:
        server = start_server(kafka.bootstrap_servers, sasl_listener(secured))
        await server.start()
        try:
            for mechanism in ("SCRAM-SHA-512", "PLAIN"):
                conn = await connect(server.port, client_context(secured.kit))
                failed = await login(conn, mechanism, "alice", "not-her-password")
                assert failed.error_code.value == SASL_AUTHENTICATION_FAILED
                assert failed.error_message is not None
                assert mechanism in failed.error_message
                assert await closed_by_server(conn)
                await conn.close()
            conn = await connect(server.port, client_context(secured.kit))
            shake = await handshake(conn, "GSSAPI")
            assert shake.error_code.value == UNSUPPORTED_SASL_MECHANISM
            assert shake.mechanisms == ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
            assert await closed_by_server(conn)
            await conn.close()
        finally:
            await server.stop()

    asyncio.run(run())


def test_nothing_is_served_before_authentication(kafka: Cluster, secured: Secured) -> None:
    orders = topic(kafka)

    async def run() -> None:
        server = start_server(kafka.bootstrap_servers, sasl_listener(secured))
        await server.start()
        try:
            conn = await connect(server.port, client_context(secured.kit))
            v0 = await conn.call(ApiVersionsV0(), ApiVersionsV0Response)  # answered before SASL
            assert {int(k.api_key) for k in v0.api_keys} >= {17, 36, 18, 3, 68}
            with pytest.raises(ConnectionLost):
                await join(conn, "orders-early", orders)  # closed, never answered
            await conn.close()
            conn = await connect(server.port, client_context(secured.kit))
            early = await conn.call(
                SaslAuthenticateRequest(auth_bytes=b"\0alice\0x"), SaslAuthenticateResponse
            )
            assert early.error_code.value == ILLEGAL_SASL_STATE
            assert await closed_by_server(conn)
            await conn.close()
            assert "orders-early" not in server.coordinator.groups  # type: ignore[union-attr]
            # a stranger may not make the server buffer a big frame (Kafka: 512 KiB before SASL)
            reader, writer = await asyncio.open_connection(
                "127.0.0.1", server.port, ssl=client_context(secured.kit), server_hostname="localhost"
            )
            writer.write(struct.pack(">i", 1 << 20) + b"\0" * 1024)
            async with asyncio.timeout(5):
                assert await reader.read() == b""
            writer.close()
        finally:
            await server.stop()

    asyncio.run(run())


def test_a_plaintext_client_on_the_tls_port_is_closed_cleanly(kafka: Cluster, secured: Secured) -> None:
    async def run() -> None:
        server = start_server(kafka.bootstrap_servers, sasl_listener(secured))
        await server.start()
        try:
            plain = await connect(server.port, None)
            with pytest.raises(ConnectionLost):
                await plain.call(
                    ApiVersionsRequest(client_software_name="t", client_software_version="1"),
                    ApiVersionsResponse,
                    timeout_s=5,
                )
            await plain.close()
            conn = await logged_in(server.port, secured.kit, "PLAIN", "alice")  # still serving
            await conn.close()
        finally:
            await server.stop()

    asyncio.run(run())


def test_no_rights_on_a_topic_means_no_forwarding_under_the_coordinators_identity(
    kafka: Cluster, secured: Secured
) -> None:
    """bob (authenticated, no ACL entry) tries, through the coordinator, what only the
    coordinator's own principal could do at the cluster: create a topic, auto-create one through
    Metadata, read a topic's metadata. Against an open listener the same requests do reach the
    cluster (the contrast proves the requests would work if forwarded)."""
    orders = topic(kafka)

    async def attempt(conn: AsyncConnection, prefix: str) -> tuple[MetadataResponse, bool]:
        made = f"{prefix}-created-{uuid.uuid4().hex[:6]}"
        auto = f"{prefix}-auto-{uuid.uuid4().hex[:6]}"
        meta = await conn.call(metadata_request([orders]), MetadataResponse)
        auto_request = metadata_request([auto])
        auto_request = type(auto_request)(
            topics=auto_request.topics,
            allow_auto_topic_creation=True,
            include_topic_authorized_operations=False,
        )
        await conn.call(auto_request, MetadataResponse)
        closed = False
        try:
            await conn.call(create_topics_request([_spec(made)]), CreateTopicsResponse, timeout_s=10)
        except ConnectionLost:
            closed = True
        await asyncio.sleep(1.0)  # let an auto-creation land
        names = {t.name for t in (await fetch_image(kafka.bootstrap_servers)).topics}
        assert (made in names) is (not closed)
        assert (auto in names) is (not closed)
        return meta, closed

    async def run() -> None:
        secure = start_server(kafka.bootstrap_servers, sasl_listener(secured))
        await secure.start()
        open_server = start_server(kafka.bootstrap_servers, ListenerSettings())
        await open_server.start()
        try:
            conn = await logged_in(secure.port, secured.kit, "SCRAM-SHA-256", "bob")
            forwarded = secure.handlers.stats.forwarded  # type: ignore[union-attr]
            meta, closed = await attempt(conn, "bob")
            assert closed
            assert secure.handlers.stats.forwarded == forwarded  # type: ignore[union-attr]
            (described,) = meta.topics
            assert described.error_code.value == TOPIC_AUTHORIZATION_FAILED
            assert described.partitions == ()
            await conn.close()
            # alice may describe orders-*: the same Metadata is answered in full
            conn = await logged_in(secure.port, secured.kit, "PLAIN", "alice")
            (mine,) = (await conn.call(metadata_request([orders]), MetadataResponse)).topics
            assert mine.error_code.value == 0
            assert len(mine.partitions) == 2
            await conn.close()
            # the contrast: an open listener forwards both
            conn = await AsyncConnection.open("127.0.0.1", open_server.port)
            meta, closed = await attempt(conn, "open")
            assert not closed
            assert meta.topics[0].error_code.value == 0
            await conn.close()
        finally:
            await secure.stop()
            await open_server.stop()

    asyncio.run(run())


def _spec(name: str) -> TopicSpec:
    return TopicSpec(name=name, partitions=1)


async def refused(port: int, context: ssl.SSLContext) -> bool:
    """Whether the listener refuses this TLS client (at the handshake, or at its first request)."""
    try:
        conn = await connect(port, context)
    except (ConnectionError, OSError):
        return True
    try:
        await conn.call(
            ApiVersionsRequest(client_software_name="t", client_software_version="1"),
            ApiVersionsResponse,
            timeout_s=5,
        )
    except ConnectionLost:
        return True
    finally:
        await conn.close()
    return False


def test_aiokafka_over_sasl_ssl_is_refused_a_topic_it_may_not_describe(
    kafka: Cluster, secured: Secured
) -> None:
    """A third-party SASL client (aiokafka 0.14, SCRAM-SHA-512 over TLS) authenticates at the
    listener; as bob it cannot learn where ``orders-*`` lives, so it cannot produce to it."""
    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import KafkaError

    orders = topic(kafka)

    async def run() -> None:
        server = start_server(kafka.bootstrap_servers, sasl_listener(secured))
        await server.start()
        producer = AIOKafkaProducer(
            bootstrap_servers=f"127.0.0.1:{server.port}",
            security_protocol="SASL_SSL",
            ssl_context=client_context(secured.kit),
            sasl_mechanism="SCRAM-SHA-512",
            sasl_plain_username="bob",
            sasl_plain_password=PASSWORDS["bob"],
            request_timeout_ms=5_000,
            metadata_max_age_ms=1_000,
        )
        try:
            await producer.start()  # SaslHandshake + SaslAuthenticate at the coordinator
            with pytest.raises(KafkaError) as caught:
                async with asyncio.timeout(20):
                    await producer.send_and_wait(orders, b"x")
            assert "TopicAuthorizationFailed" in type(caught.value).__name__
        finally:
            await producer.stop()
            await server.stop()

    asyncio.run(run())


def test_session_lifetime_reauthentication_and_expiry(kafka: Cluster, secured: Secured) -> None:
    orders = topic(kafka)

    async def run() -> None:
        server = start_server(kafka.bootstrap_servers, sasl_listener(secured, session_lifetime_ms=1_500))
        await server.start()
        try:
            conn = await connect(server.port, client_context(secured.kit))
            first = await login(conn, "SCRAM-SHA-256", "alice", PASSWORDS["alice"])
            assert first.session_lifetime.total_seconds() == 1.5
            await asyncio.sleep(1.0)
            again = await login(conn, "SCRAM-SHA-256", "alice", PASSWORDS["alice"])  # KIP-368
            assert again.error_code.value == 0
            await asyncio.sleep(1.0)  # 2 s after the first login: alive thanks to the second
            assert (await join(conn, "orders-reauth", orders)).error == 0
            assert await closed_by_server(conn, timeout_s=3.0)  # no third login: closed
            await conn.close()
        finally:
            await server.stop()

    asyncio.run(run())


def test_mutual_tls_principal_is_the_certificates_name(kafka: Cluster, tmp_path: Path) -> None:
    secured = make_secured(tmp_path, "User:CN=client  group:cert-*  Read\n")
    orders = topic(kafka)
    listener = ListenerSettings(
        tls_certfile=secured.kit.broker_cert,
        tls_keyfile=secured.kit.broker_key,
        tls_client_cafile=secured.kit.ca_cert,
        acl_file=secured.acl_file,
    )

    async def run() -> None:
        server = start_server(kafka.bootstrap_servers, listener)
        await server.start()
        try:
            conn = await connect(server.port, client_context(secured.kit, certificate=True))
            assert (await join(conn, "cert-group", orders)).error == 0
            assert (await join(conn, "orders-x", orders)).error == GROUP_AUTHORIZATION_FAILED
            await conn.close()
            assert await refused(server.port, client_context(secured.kit))  # no certificate
        finally:
            await server.stop()

    asyncio.run(run())


def test_handshake_v0_then_bare_tokens(kafka: Cluster, secured: Secured) -> None:
    """Clients that speak SaslHandshake v0 send the SASL tokens as bare length-prefixed frames."""
    orders = topic(kafka)

    async def run() -> None:
        server = start_server(kafka.bootstrap_servers, sasl_listener(secured))
        await server.start()
        try:
            reader, writer = await asyncio.open_connection(
                "127.0.0.1", server.port, ssl=client_context(secured.kit), server_hostname="localhost"
            )
            writer.write(encode_request(SaslHandshakeV0(mechanism="PLAIN"), correlation_id=1))
            size = struct.unpack(">i", await reader.readexactly(4))[0]
            _, shake = decode_response(await reader.readexactly(size), SaslHandshakeV0Response)
            assert shake.error_code.value == 0
            token = f"\0alice\0{PASSWORDS['alice']}".encode()
            writer.write(struct.pack(">i", len(token)) + token)
            assert await reader.readexactly(4) == b"\0\0\0\0"  # an empty server token: done
            conn = AsyncConnection(reader, writer, "v0-client")
            assert (await join(conn, "orders-v0", orders)).error == 0
            await conn.close()
        finally:
            await server.stop()

    asyncio.run(run())


def test_a_tls_only_listener_serves_its_broker_listeners_over_tls_too(kafka: Cluster, tmp_path: Path) -> None:
    """TLS without authentication (an open listener, routing proxy): the per-broker listeners
    Metadata names speak TLS as the bootstrap listener does."""
    kit = make_secured(tmp_path, "").kit
    listener = ListenerSettings(tls_certfile=kit.broker_cert, tls_keyfile=kit.broker_key)
    orders = topic(kafka)

    async def run() -> None:
        server = start_server(kafka.bootstrap_servers, listener)
        await server.start()
        try:
            conn = await connect(server.port, client_context(kit))
            meta = await conn.call(metadata_request([orders]), MetadataResponse)
            await conn.close()
            ports = {int(b.port) for b in meta.brokers} - {server.port}
            assert ports
            for port in ports:
                proxied = await connect(port, client_context(kit))
                (t,) = (await proxied.call(metadata_request([orders]), MetadataResponse)).topics
                assert t.error_code.value == 0
                await proxied.close()
        finally:
            await server.stop()

    asyncio.run(run())


def test_list_groups_shows_only_the_groups_the_principal_may_describe(
    kafka: Cluster, secured: Secured
) -> None:
    orders = topic(kafka)

    async def listed(conn: AsyncConnection, **filters: tuple[str, ...]) -> list[tuple[str, str]]:
        request = ListGroupsRequest(
            states_filter=filters.get("states", ()), types_filter=filters.get("types", ())
        )
        response = await conn.call(request, ListGroupsResponse)
        assert response.error_code.value == 0
        return [(str(g.group_id), str(g.group_state)) for g in response.groups]

    async def run() -> None:
        server = start_server(kafka.bootstrap_servers, sasl_listener(secured))
        await server.start()
        try:
            alice = await logged_in(server.port, secured.kit, "PLAIN", "alice")
            bob = await logged_in(server.port, secured.kit, "PLAIN", "bob")
            assert (await join(alice, "orders-listed", orders)).error == 0
            assert (await join(bob, "bob-listed", orders)).error == 0
            assert [g for g, _ in await listed(alice)] == ["orders-listed"]
            assert [g for g, _ in await listed(bob)] == ["bob-listed"]
            assert await listed(alice, types=("classic",)) == []
            assert await listed(alice, states=("Dead",)) == []
            (state,) = {s for _, s in await listed(alice, types=("Consumer",))}
            assert state in ("Assigning", "Reconciling", "Stable")
            await alice.close()
            await bob.close()
        finally:
            await server.stop()

    asyncio.run(run())


def test_every_group_api_answers_group_authorization_failed(kafka: Cluster, secured: Secured) -> None:
    """FindCoordinator, OffsetCommit, OffsetFetch (a batch of groups) and a classic JoinGroup for
    a group alice has no right on: Kafka's per-key / per-partition / per-group error, nothing
    written, the allowed keys answered as usual."""
    orders = topic(kafka)

    async def run() -> None:
        server = start_server(kafka.bootstrap_servers, sasl_listener(secured))
        await server.start()
        conn = await logged_in(server.port, secured.kit, "SCRAM-SHA-512", "alice")
        try:
            found = await conn.call(
                find_req.FindCoordinatorRequest(key_type=i8(0), coordinator_keys=("orders-ok", "payments")),
                find_resp.FindCoordinatorResponse,
            )
            assert {c.key: (int(c.error_code.value), int(c.node_id)) for c in found.coordinators} == {
                "orders-ok": (0, server.config.node_id),
                "payments": (GROUP_AUTHORIZATION_FAILED, -1),
            }
            partition = commit_req.OffsetCommitRequestPartition(
                partition_index=i32(0),
                committed_offset=i64(5),
                committed_leader_epoch=i32(-1),
                committed_metadata=None,
            )
            committed = await conn.call(
                commit_req.OffsetCommitRequest(
                    group_id=GroupId("payments"),
                    generation_id_or_member_epoch=i32(-1),
                    member_id="",
                    group_instance_id=None,
                    topics=(
                        commit_req.OffsetCommitRequestTopic(name=TopicName(orders), partitions=(partition,)),
                    ),
                ),
                commit_resp.OffsetCommitResponse,
            )
            assert [int(p.error_code.value) for t in committed.topics for p in t.partitions] == [
                GROUP_AUTHORIZATION_FAILED
            ]
            assert server.offsets.committed("payments", orders, 0) is None
            fetched = await conn.call(
                fetch_req.OffsetFetchRequest(
                    groups=tuple(
                        fetch_req.OffsetFetchRequestGroup(group_id=GroupId(g), topics=None)
                        for g in ("orders-ok", "payments")
                    ),
                    require_stable=False,
                ),
                fetch_resp.OffsetFetchResponse,
            )
            assert {str(g.group_id): int(g.error_code.value) for g in fetched.groups} == {
                "orders-ok": 0,
                "payments": GROUP_AUTHORIZATION_FAILED,
            }
            joined = await conn.call(
                join_req.JoinGroupRequest(
                    group_id=GroupId("payments"),
                    session_timeout=i32Timedelta.parse(datetime.timedelta(seconds=10)),
                    rebalance_timeout=i32Timedelta.parse(datetime.timedelta(seconds=10)),
                    member_id="",
                    group_instance_id=None,
                    protocol_type="consumer",
                    protocols=(join_req.JoinGroupRequestProtocol(name="range", metadata=b""),),
                    reason=None,
                ),
                join_resp.JoinGroupResponse,
            )
            assert int(joined.error_code.value) == GROUP_AUTHORIZATION_FAILED
            assert "payments" not in server.coordinator.groups  # type: ignore[union-attr]
            assert server.handlers.stats.denied == 4  # type: ignore[union-attr]
        finally:
            await conn.close()
            await server.stop()

    asyncio.run(run())
