"""Running the server as a process: ``streamtasks coordinator`` arguments, SIGTERM / SIGINT for
a clean stop, exit status 1 when the log could not be written (a restart replays it)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal

from streamtasks.coordinator import CoordinatorConfig
from streamtasks.server.config import DEFAULT_NODE_ID, ServerConfig, parse_host_port
from streamtasks.server.log import DEFAULT_TOPIC
from streamtasks.server.server import CoordinatorServer

__all__ = ["add_coordinator_arguments", "config_from_args", "run_server"]


def add_coordinator_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--listen", default="127.0.0.1:9092", help="host:port to listen on (port 0: any free)"
    )
    parser.add_argument(
        "--advertised",
        default=None,
        help="host:port FindCoordinator answers with (default: the listen address)",
    )
    parser.add_argument("--bootstrap-servers", default=None, help="the backing Kafka cluster")
    parser.add_argument(
        "--broker",
        choices=("auto", "kafka", "tansu"),
        default=None,
        help="without --bootstrap-servers: start an embedded backing broker "
        "(default $STREAMTASKS_BROKER, else auto)",
    )
    parser.add_argument(
        "--topic", default=DEFAULT_TOPIC, help="the compacted topic holding the coordinator's log"
    )
    parser.add_argument(
        "--routing",
        choices=("proxy", "direct"),
        default="proxy",
        help="proxy (default): every broker listed at a listener of this server, so no client can ask "
        "a broker for Kafka's own coordinator; direct: the real brokers (see docs/coordinator.md)",
    )
    parser.add_argument("--proxy-port-base", type=int, default=None, help="first per-broker listener port")
    parser.add_argument("--node-id", type=int, default=DEFAULT_NODE_ID)
    parser.add_argument("--max-frame-bytes", type=int, default=16 * 1024 * 1024)
    parser.add_argument("--max-connections", type=int, default=10_000)
    parser.add_argument("--max-groups", type=int, default=10_000)
    parser.add_argument("--max-members-per-group", type=int, default=None)
    parser.add_argument("--session-timeout-ms", type=int, default=45_000)
    parser.add_argument("--heartbeat-interval-ms", type=int, default=5_000)
    parser.add_argument(
        "--assignment-interval-ms",
        type=int,
        default=0,
        help="batch target assignments: compute at most one per interval per group (Apache Kafka's "
        "group.consumer.assignment.interval.ms, default 1000 there; 0 computes one per epoch bump, "
        "fine for small groups; set 1000 for groups of thousands of members)",
    )
    parser.add_argument("--status-interval-s", type=float, default=5.0)
    parser.add_argument(
        "--log-level", default="WARNING", help="INFO logs every error a member is answered with"
    )


def config_from_args(args: argparse.Namespace, bootstrap_servers: str) -> ServerConfig:
    host, port = parse_host_port(args.listen, "--listen")
    advertised = parse_host_port(args.advertised, "--advertised") if args.advertised else (None, None)
    return ServerConfig(
        bootstrap_servers=bootstrap_servers,
        listen_host=host,
        listen_port=port,
        advertised_host=advertised[0],
        advertised_port=advertised[1],
        node_id=args.node_id,
        routing=args.routing,
        proxy_port_base=args.proxy_port_base,
        topic=args.topic,
        max_frame_bytes=args.max_frame_bytes,
        max_connections=args.max_connections,
        max_groups=args.max_groups,
        status_interval_s=args.status_interval_s,
        coordinator=CoordinatorConfig(
            session_timeout_ms=args.session_timeout_ms,
            heartbeat_interval_ms=args.heartbeat_interval_ms,
            assignment_interval_ms=args.assignment_interval_ms,
            max_group_size=args.max_members_per_group,
        ),
    )


async def serve(config: ServerConfig) -> int:
    server = CoordinatorServer(config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):  # before start: a signal while replaying stops after it
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    await server.start()
    stopping = loop.create_task(stop.wait())
    failing = loop.create_task(server.failed.wait())
    await asyncio.wait({stopping, failing}, return_when=asyncio.FIRST_COMPLETED)
    stopping.cancel()
    failing.cancel()
    failure = server.log.failure
    await server.stop()
    if failure is not None:
        server.say(f"streamtasks coordinator: the log could not be written ({failure}); exiting")
        return 1
    return 0


def run_server(config: ServerConfig, *, log_level: str = "WARNING") -> int:
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("aiokafka").setLevel(logging.ERROR)
    logging.getLogger("streamtasks.server").setLevel(log_level)
    return asyncio.run(serve(config))
