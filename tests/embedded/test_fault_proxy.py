"""The fault proxy: forwards bytes unchanged, delays them, drops and black-holes connections,
switched at run time; first in front of a local echo server, then in front of the cluster's
brokers with Kafka clients."""

from __future__ import annotations

import asyncio
import socket
import socketserver
import threading
import time
from collections.abc import Iterator

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError

from streamtasks.embedded import Fault, FaultProxy
from streamtasks.embedded._process import free_port
from streamtasks.embedded.kafka_cluster import KafkaCluster
from streamtasks.errors import BrokerError


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        while data := self.request.recv(65536):
            self.request.sendall(data)


class _EchoServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


@pytest.fixture
def echo() -> Iterator[tuple[str, int]]:
    server = _EchoServer(("127.0.0.1", 0), _Echo)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield "127.0.0.1", int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture
def proxy(echo: tuple[str, int]) -> Iterator[FaultProxy]:
    with FaultProxy(*echo) as started:
        yield started


def _connect(proxy: FaultProxy) -> socket.socket:
    return socket.create_connection((proxy.host, proxy.port), timeout=2.0)


def _round_trip(conn: socket.socket, payload: bytes = b"ping") -> bytes:
    conn.sendall(payload)
    got = b""
    while len(got) < len(payload):
        chunk = conn.recv(65536)
        if not chunk:
            break
        got += chunk
    return got


def _cut(conn: socket.socket) -> bool:
    """Whether the connection is closed or reset by the other side (within the timeout)."""
    try:
        conn.sendall(b"x")
        return conn.recv(1) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True


def test_forwards_bytes_unchanged_both_ways(proxy: FaultProxy) -> None:
    payload = bytes(range(256)) * 1000
    with _connect(proxy) as conn:
        assert _round_trip(conn, payload) == payload
    assert proxy.accepted == 1
    assert proxy.fault is Fault.NONE


def test_delay_holds_each_direction_and_keeps_the_order(proxy: FaultProxy) -> None:
    with _connect(proxy) as conn:
        start = time.monotonic()
        assert _round_trip(conn) == b"ping"
        plain = time.monotonic() - start
        proxy.set_delay(0.2)
        start = time.monotonic()
        assert _round_trip(conn, b"one-two-three") == b"one-two-three"
        delayed = time.monotonic() - start
    assert delayed >= 0.4  # 0.2 s to the server, 0.2 s back
    assert plain < 0.2
    with pytest.raises(BrokerError, match="negative"):
        proxy.set_delay(-1)


def test_drop_cuts_open_and_new_connections_until_healed(proxy: FaultProxy) -> None:
    with _connect(proxy) as conn:
        assert _round_trip(conn) == b"ping"
        proxy.drop()
        assert _cut(conn)
    with _connect(proxy) as conn:  # the kernel accepts, the proxy cuts at once
        assert _cut(conn)
    proxy.heal()
    with _connect(proxy) as conn:
        assert _round_trip(conn) == b"ping"
    assert proxy.connections <= 1


def test_cut_cuts_once_and_new_connections_work(proxy: FaultProxy) -> None:
    with _connect(proxy) as old:
        assert _round_trip(old) == b"ping"
        proxy.cut()
        assert _cut(old)
    with _connect(proxy) as new:
        assert _round_trip(new) == b"ping"


def test_blackhole_accepts_and_never_answers_until_healed(proxy: FaultProxy) -> None:
    with _connect(proxy) as open_before:
        assert _round_trip(open_before) == b"ping"
        proxy.blackhole()
        open_before.sendall(b"held")
        with _connect(proxy) as opened_during:
            opened_during.sendall(b"also held")
            opened_during.settimeout(0.5)
            open_before.settimeout(0.5)
            with pytest.raises(TimeoutError):
                opened_during.recv(1)
            with pytest.raises(TimeoutError):
                open_before.recv(1)
            proxy.heal()  # what was held is delivered, as TCP would once a partition heals
            opened_during.settimeout(2.0)
            open_before.settimeout(2.0)
            assert opened_during.recv(65536) == b"also held"
            assert open_before.recv(65536) == b"held"


def test_a_dead_upstream_cuts_the_client() -> None:
    with FaultProxy("127.0.0.1", free_port("127.0.0.1")) as proxy, _connect(proxy) as conn:
        assert _cut(conn)


def test_faults_need_a_running_proxy(echo: tuple[str, int]) -> None:
    proxy = FaultProxy(*echo)
    with pytest.raises(BrokerError, match="not running"):
        proxy.drop()
    proxy.stop()  # idempotent, also before start


def test_a_taken_port_is_one_clear_error(proxy: FaultProxy, echo: tuple[str, int]) -> None:
    with pytest.raises(BrokerError, match=f"cannot listen on 127.0.0.1:{proxy.port}"):
        FaultProxy(*echo, listen_port=proxy.port).start()


# -- in front of the cluster's brokers ------------------------------------------------------


async def _send(bootstrap: str, topic: str, *, timeout_ms: int) -> float:
    """Produce one record with acks=all and return the seconds it took."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", request_timeout_ms=timeout_ms)
    await producer.start()
    try:
        start = time.monotonic()
        await producer.send_and_wait(topic, b"v", partition=0)
        return time.monotonic() - start
    finally:
        await producer.stop()


@pytest.mark.integration
def test_clients_reach_the_brokers_only_through_their_proxies(cluster_to_break: KafkaCluster) -> None:
    cluster = cluster_to_break
    cluster.create_topics({"proxy-faults": 1})
    leader = cluster.broker(cluster.leaders(["proxy-faults"])[("proxy-faults", 0)])
    assert leader.proxy is not None
    asyncio.run(_send(cluster.bootstrap_servers, "proxy-faults", timeout_ms=10_000))

    leader.proxy.set_delay(0.3)  # a slow broker: the produce takes at least a round trip longer
    assert asyncio.run(_send(cluster.bootstrap_servers, "proxy-faults", timeout_ms=10_000)) >= 0.6
    leader.proxy.set_delay(0.0)

    leader.proxy.blackhole()  # a partitioned leader: the produce times out, nothing hangs
    with pytest.raises(KafkaError):
        asyncio.run(asyncio.wait_for(_send(cluster.bootstrap_servers, "proxy-faults", timeout_ms=2_000), 30))
    leader.proxy.heal()
    accepted = leader.proxy.accepted
    leader.proxy.drop()  # a leader that refuses clients
    with pytest.raises(KafkaError):
        asyncio.run(asyncio.wait_for(_send(cluster.bootstrap_servers, "proxy-faults", timeout_ms=2_000), 30))
    assert leader.proxy.accepted > accepted
    leader.proxy.heal()
    asyncio.run(_send(cluster.bootstrap_servers, "proxy-faults", timeout_ms=10_000))
