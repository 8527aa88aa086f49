"""``streamtasks coordinator`` as a server: heartbeats and offset commits per second over TCP
(every answer after its records are acknowledged by the backing cluster), and the time a
restarted server takes to replay its log.

    .venv/bin/python benchmarks/coordinator_server.py [--members 1000] [--groups 10]
        [--connections 20] [--seconds 10] [--broker auto|kafka|tansu]

Starts the embedded broker (``--broker``, else ``$STREAMTASKS_BROKER``, else auto) unless
STREAMTASKS_BOOTSTRAP names a cluster, then the server as a child process
(``python -m streamtasks coordinator``). Members are raw KIP-848 clients (streamtasks' own
codec) spread over a few connections, each sending its next request as soon as the last is
answered; ``lean`` heartbeats carry the epoch only (nothing changed). ``commit`` is an
OffsetCommit v9 of one partition with the member's epoch (one record written per commit).
``replay``: the server killed with -9 and started on the same log; the time its startup line
reports (read the topic, take the cluster's metadata, load, persist the resume write).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import struct
import sys
import time
import uuid
from pathlib import Path

_HERE = Path(__file__).parent.resolve()
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

from streamtasks.embedded import BROKER_ENV, BROKER_KINDS, cluster_from_env  # noqa: E402
from streamtasks.protocol import consumer_group_codec as codec  # noqa: E402
from streamtasks.protocol.consumer_group import ConsumerGroupHeartbeatRequest  # noqa: E402
from streamtasks.runtime.connection import AsyncConnection  # noqa: E402
from tests.server.support import ServerProcess  # noqa: E402

sys.path.insert(0, str(_HERE))
from _table import format_table  # noqa: E402

TOPIC_PARTITIONS = 64


def commit_v9(group: str, member: str, epoch: int, *, topic: str, partition: int, offset: int) -> bytes:
    """OffsetCommit v9 body (flexible): group, epoch, member, instance null, one topic, one partition."""

    def cstr(s: str) -> bytes:
        raw = s.encode()
        return bytes([len(raw) + 1]) + raw

    partition_body = struct.pack(">iqi", partition, offset, -1) + b"\x01" + b"\x00"  # metadata "" + tags
    topic_body = cstr(topic) + b"\x02" + partition_body + b"\x00"
    return cstr(group) + struct.pack(">i", epoch) + cstr(member) + b"\x00" + b"\x02" + topic_body + b"\x00"


async def run(args: argparse.Namespace, bootstrap: str) -> list[list[str]]:
    topic = f"bench-{uuid.uuid4().hex[:6]}"
    server = ServerProcess(bootstrap, extra=("--status-interval-s", "5", "--session-timeout-ms", "120000"))
    from streamtasks.runtime.admin import create_topics_async

    await create_topics_async(bootstrap, {topic: TOPIC_PARTITIONS})
    await asyncio.to_thread(server.start)
    host, port = server.address.split(":")
    conns = [await AsyncConnection.open(host, int(port)) for _ in range(args.connections)]
    members = [(f"g{i % args.groups}", f"m{i}") for i in range(args.members)]
    epochs: dict[str, int] = {}
    rows: list[list[str]] = []

    async def heartbeat(conn: AsyncConnection, group: str, member: str) -> None:
        request = ConsumerGroupHeartbeatRequest(
            group_id=group,
            member_id=member,
            member_epoch=epochs.get(member, 0),
            rebalance_timeout_ms=60_000 if member not in epochs else -1,
            subscribed_topic_names=(topic,) if member not in epochs else None,
            topic_partitions=() if member not in epochs else None,
        )
        body = await conn.call_raw(68, 1, codec.encode_heartbeat_request(request, 1))
        response = codec.decode_heartbeat_response(body, 1)
        if response.error == 0:
            epochs[member] = response.member_epoch

    started = time.perf_counter()
    for i in range(0, len(members), 200):
        await asyncio.gather(
            *(heartbeat(conns[j % len(conns)], g, m) for j, (g, m) in enumerate(members[i : i + 200]))
        )
    join_s = time.perf_counter() - started
    for _ in range(3):  # let the groups settle (targets, epochs)
        await asyncio.gather(*(heartbeat(conns[j % len(conns)], g, m) for j, (g, m) in enumerate(members)))

    async def drive(kind: str) -> tuple[int, list[float]]:
        done = 0
        latencies: list[float] = []
        stop = time.perf_counter() + args.seconds

        async def worker(k: int) -> None:
            nonlocal done
            conn = conns[k % len(conns)]
            mine = members[k :: args.concurrency]
            n = 0
            while time.perf_counter() < stop:
                group, member = mine[n % len(mine)]
                t0 = time.perf_counter()
                if kind == "lean heartbeat":
                    await heartbeat(conn, group, member)
                else:
                    body = commit_v9(
                        group,
                        member,
                        epochs.get(member, 0),
                        topic=topic,
                        partition=n % TOPIC_PARTITIONS,
                        offset=n,
                    )
                    await conn.call_raw(8, 9, body)
                latencies.append(time.perf_counter() - t0)
                done += 1
                n += 1

        await asyncio.gather(*(worker(k) for k in range(min(args.concurrency, len(members)))))
        return done, latencies

    for kind in ("lean heartbeat", "commit"):
        count, latencies = await drive(kind)
        latencies.sort()
        rows.append(
            [
                kind,
                f"{args.members:,} in {args.groups}",
                f"{count / args.seconds:,.0f}/s",
                f"{latencies[len(latencies) // 2] * 1000:.1f} ms",
                f"{latencies[int(len(latencies) * 0.99)] * 1000:.1f} ms",
            ]
        )
    for conn in conns:
        await conn.close()
    await asyncio.to_thread(server.kill)
    await asyncio.to_thread(server.start)
    line = next(x for x in reversed(server.lines) if "listening on" in x)
    replayed = line.split("replayed ", 1)[1]
    rows.append(["replay after kill -9", f"{args.members:,} in {args.groups}", replayed, "", ""])
    rows.append(["joins", f"{args.members:,} in {args.groups}", f"{join_s:.1f} s for all", "", ""])
    await asyncio.to_thread(server.stop)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--members", type=int, default=1000)
    parser.add_argument("--groups", type=int, default=10)
    parser.add_argument("--connections", type=int, default=20)
    parser.add_argument("--concurrency", type=int, default=200, help="requests in flight at once")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--broker", choices=BROKER_KINDS, default=None)
    args = parser.parse_args()
    if args.broker:
        os.environ[BROKER_ENV] = args.broker
    cluster = cluster_from_env()
    try:
        print(f"backing cluster {cluster.bootstrap_servers}; load average {os.getloadavg()[0]:.1f}")
        rows = asyncio.run(run(args, cluster.bootstrap_servers))
    finally:
        cluster.stop()
    print(format_table(["what", "members in groups", "rate / result", "p50", "p99"], rows))


if __name__ == "__main__":
    main()
