"""Malformed frames never crash the server nor touch other connections: random bytes, frames
with a size beyond the limit, truncated and bit-flipped valid requests of every API the server
decodes (the classic JoinGroup/SyncGroup/Heartbeat/LeaveGroup included, a JoinGroup carrying a
consumer-protocol subscription), each on its own connection, while a member on another
connection keeps heartbeating; afterwards the server is alive, that member is still in its group
at the same epoch, and a new connection is answered. Seeded (the seed is printed on failure)."""

from __future__ import annotations

import datetime
import io
import os
import random
import socket
import struct
import time
from typing import Any

import pytest

from streamtasks.embedded import Cluster
from streamtasks.protocol import assignment_rpc as rpc
from streamtasks.protocol import consumer_group_codec as codec
from streamtasks.protocol.consumer_group import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from streamtasks.protocol.consumer_protocol import ConsumerProtocolSubscription, encode_subscription
from streamtasks.runtime.framing import encode_raw_request
from streamtasks.server.offset_api import element
from streamtasks.server.offset_api import make as build
from streamtasks.server.wire import kio_request_class
from tests.server.support import ServerProcess

pytestmark = pytest.mark.integration

SEED = int(os.environ.get("FUZZ_SEED", "848")) if os.environ.get("CI") else random.randrange(1 << 30)


def _kio_body(api_key: int, version: int, **values: Any) -> bytes:
    """A flexible request body (what follows request header v2) through kio's writer."""
    from kio.serial import entity_writer

    cls = kio_request_class(api_key, version)
    buf = io.BytesIO()
    entity_writer(cls)(buf, build(cls, **values))
    return buf.getvalue()


def _classic_bodies() -> list[tuple[int, int, bytes]]:
    """JoinGroup v9, SyncGroup v5, Heartbeat v4, LeaveGroup v5: the flexible versions, whose
    request header is the one ``encode_raw_request`` writes."""
    ms = datetime.timedelta(milliseconds=1)
    subscription = encode_subscription(ConsumerProtocolSubscription(topics=("t",), user_data=None))
    protocol = element(kio_request_class(11, 9), "protocols")
    leaving = element(kio_request_class(13, 5), "members")
    member = {"group_id": "fuzz", "member_id": "m-fuzz", "group_instance_id": None}
    join = {
        "session_timeout": 10_000 * ms,
        "rebalance_timeout": 10_000 * ms,
        "protocol_type": "consumer",
        "protocols": (protocol(name="range", metadata=subscription),),
        "reason": None,
    }
    sync = {"generation_id": 1, "protocol_type": "consumer", "protocol_name": "range", "assignments": ()}
    return [
        (11, 9, _kio_body(11, 9, **{**member, "member_id": ""}, **join)),
        (14, 5, _kio_body(14, 5, **member, **sync)),
        (12, 4, _kio_body(12, 4, **member, generation_id=1)),
        (
            13,
            5,
            _kio_body(
                13,
                5,
                group_id="fuzz",
                members=(leaving(member_id="m-fuzz", group_instance_id=None, reason=None),),
            ),
        ),
    ]


def _valid_bodies() -> list[tuple[int, int, bytes]]:
    join = ConsumerGroupHeartbeatRequest(
        group_id="fuzz",
        member_id="m-fuzz",
        member_epoch=0,
        rebalance_timeout_ms=5000,
        subscribed_topic_names=("t",),
        topic_partitions=(),
    )
    return [
        (68, 1, codec.encode_heartbeat_request(join, 1)),
        (68, 0, codec.encode_heartbeat_request(join, 0)),
        (69, 1, codec.encode_describe_request(ConsumerGroupDescribeRequest(group_ids=("fuzz",)), 1)),
        (
            30848,
            0,
            rpc.encode_prepare_request(
                rpc.ConsumerGroupPrepareAssignmentRequest(group_id="fuzz", member_id="m", member_epoch=1)
            ),
        ),
        # OffsetFetch v8: groups [fuzz, topics null], require_stable false (flexible)
        (9, 8, b"\x02\x05fuzz\x00\x00\x00\x00"),
        # FindCoordinator v3: key "fuzz", key type 0
        (10, 3, b"\x05fuzz\x00\x00"),
        *_classic_bodies(),
    ]


class Peer:
    def __init__(self, address: str) -> None:
        host, port = address.split(":")
        self.sock = socket.create_connection((host, int(port)), timeout=10)
        self.cid = 0

    def call(self, api: int, version: int, body: bytes) -> bytes:
        self.cid += 1
        self.sock.sendall(encode_raw_request(api, version, body, correlation_id=self.cid))
        size = struct.unpack(">i", self._read(4))[0]
        payload = self._read(size)
        assert struct.unpack_from(">i", payload)[0] == self.cid
        return payload[5:]  # response header v1: correlation id + empty tagged fields

    def _read(self, n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("closed")
            out += chunk
        return out

    def close(self) -> None:
        self.sock.close()


def _send_and_drop(address: str, data: bytes) -> None:
    host, port = address.split(":")
    with socket.create_connection((host, int(port)), timeout=10) as s:
        try:
            s.sendall(data)
            s.shutdown(socket.SHUT_WR)
            s.settimeout(2)
            while s.recv(65536):
                pass
        except OSError:
            pass  # the server may close first: that is one of the allowed answers


def test_random_and_truncated_frames(kafka: Cluster) -> None:
    kafka.create_topics({"t": 2})
    server = ServerProcess(
        kafka.bootstrap_servers, extra=("--max-frame-bytes", "65536", "--status-interval-s", "1")
    ).start()
    rng = random.Random(SEED)
    member = Peer(server.address)
    try:
        join = ConsumerGroupHeartbeatRequest(
            group_id="steady",
            member_id="m-steady",
            member_epoch=0,
            rebalance_timeout_ms=30000,
            subscribed_topic_names=("t",),
            topic_partitions=(),
        )
        joined: ConsumerGroupHeartbeatResponse = codec.decode_heartbeat_response(
            member.call(68, 1, codec.encode_heartbeat_request(join, 1)), 1
        )
        assert joined.error == 0, f"seed {SEED}"
        valid = _valid_bodies()
        # the classic bodies are well formed: each unmodified is answered (an error code for a
        # member the group does not have), so their mutations reach the server's decoders
        probe = Peer(server.address)
        for api, version, body in _classic_bodies():
            assert len(probe.call(api, version, body)) > 2, f"API {api} v{version}"
        probe.close()
        for i in range(300):
            kind = rng.randrange(5)
            if kind == 0:
                data = rng.randbytes(rng.randrange(1, 200))
            elif kind == 1:
                data = struct.pack(">i", rng.choice([-1, 1 << 30, 65537, 2**31 - 1])) + rng.randbytes(8)
            else:
                api, version, body = rng.choice(valid)
                frame = bytearray(encode_raw_request(api, version, body, correlation_id=i))
                if kind == 2:  # truncated body, size prefix adjusted
                    cut = rng.randrange(12, len(frame))
                    frame = bytearray(struct.pack(">i", cut - 4)) + frame[4:cut]
                elif kind == 3:  # flipped bytes after the size prefix
                    for _ in range(rng.randrange(1, 4)):
                        frame[rng.randrange(4, len(frame))] = rng.randrange(256)
                else:  # truncated stream: the connection ends mid-frame
                    frame = frame[: rng.randrange(1, len(frame))]
                data = bytes(frame)
            _send_and_drop(server.address, data)
            if i % 50 == 0:  # the steady member keeps its membership throughout
                beat = ConsumerGroupHeartbeatRequest(
                    group_id="steady",
                    member_id="m-steady",
                    member_epoch=joined.member_epoch,
                    topic_partitions=joined.assignment.topic_partitions if joined.assignment else (),
                )
                answer = codec.decode_heartbeat_response(
                    member.call(68, 1, codec.encode_heartbeat_request(beat, 1)), 1
                )
                assert answer.error == 0, f"seed {SEED}: {answer}"
                assert answer.member_epoch == joined.member_epoch, f"seed {SEED}"
        assert server.alive(), f"seed {SEED}: " + "\n".join(server.lines[-20:])
        fresh = Peer(server.address)
        described = codec.decode_describe_response(
            fresh.call(
                69, 1, codec.encode_describe_request(ConsumerGroupDescribeRequest(group_ids=("steady",)), 1)
            ),
            1,
        )
        fresh.close()
        assert [m.member_id for m in described.groups[0].members] == ["m-steady"], f"seed {SEED}"
        time.sleep(1.5)
        assert "closed_malformed=0" not in server.status(), server.status()
        assert not any("Traceback" in line for line in server.lines), "\n".join(server.lines)
    finally:
        member.close()
        server.stop()
