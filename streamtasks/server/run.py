"""Running the server as a process: ``streamtasks coordinator`` arguments, SIGTERM / SIGINT for
a clean stop, exit status 1 when the log could not be written (a restart replays it)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import getpass
import logging
import signal
import sys
from pathlib import Path
from typing import Any

from pydantic import SecretStr, ValidationError

from assignors import registry
from streamtasks.coordinator import CoordinatorConfig
from streamtasks.coordinator.streams import StreamsCoordinatorConfig
from streamtasks.errors import ConfigError
from streamtasks.runtime.security import (
    ClientSettings,
    client_config_path,
    load_client_config,
    make_client_settings,
)
from streamtasks.server.config import (
    DEFAULT_NODE_ID,
    DEFAULT_STREAMS_ASSIGNOR,
    ListenerSettings,
    ServerConfig,
    parse_host_port,
)
from streamtasks.server.credentials import SCRAM_MECHANISMS, add_user
from streamtasks.server.log import DEFAULT_TOPIC
from streamtasks.server.metrics_flags import add_metrics_security_arguments, metrics_security_from_args
from streamtasks.server.server import CoordinatorServer

__all__ = [
    "add_coordinator_arguments",
    "add_user_arguments",
    "backing_values",
    "config_from_args",
    "listener_from_args",
    "run_add_user",
    "run_server",
]


def add_coordinator_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--listen", default="127.0.0.1:9092", help="host:port to listen on (port 0: any free)"
    )
    parser.add_argument(
        "--advertised",
        default=None,
        help="host:port FindCoordinator answers with (default: the listen address)",
    )
    parser.add_argument(
        "--bootstrap-servers",
        default=None,
        help="the backing Kafka cluster (default: the --client-config file's bootstrap.servers, else an "
        "embedded broker, see --broker)",
    )
    parser.add_argument(
        "--client-config",
        default=None,
        help="how the coordinator reaches the backing cluster: a .properties or YAML file of client "
        "security settings (security.protocol, ssl.*, sasl.*; docs/security.md), default "
        "$STREAMTASKS_CLIENT_CONFIG; its bootstrap.servers is used without --bootstrap-servers",
    )
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
        default=None,
        help="proxy (default on an open listener): every broker listed at a listener of this server, so "
        "no client can ask a broker for Kafka's own coordinator; direct (default, and the only choice, "
        "on a secured listener): the real brokers (see docs/coordinator.md, docs/security.md)",
    )
    parser.add_argument(
        "--proxy-port-base",
        type=int,
        default=None,
        help="first per-broker listener port (default: any free port)",
    )
    _add_limit_arguments(parser)
    _add_streams_arguments(parser)
    _add_status_arguments(parser)
    _add_listener_security_arguments(parser)


def _add_limit_arguments(parser: argparse.ArgumentParser) -> None:
    """``coordinator``'s node id, limits and KIP-848 member timings."""
    parser.add_argument(
        "--node-id", type=int, default=DEFAULT_NODE_ID, help="the broker node id FindCoordinator answers with"
    )
    parser.add_argument(
        "--max-frame-bytes", type=int, default=16 * 1024 * 1024, help="the largest request or response frame"
    )
    parser.add_argument("--max-connections", type=int, default=10_000, help="client connections open at once")
    parser.add_argument("--max-groups", type=int, default=10_000, help="groups this coordinator serves")
    parser.add_argument(
        "--max-members-per-group",
        type=int,
        default=None,
        help="members a group admits; more get GROUP_MAX_SIZE_REACHED (default: no limit)",
    )
    parser.add_argument(
        "--session-timeout-ms", type=int, default=45_000, help="KIP-848 members' session timeout"
    )
    parser.add_argument(
        "--heartbeat-interval-ms", type=int, default=5_000, help="KIP-848 members' heartbeat interval"
    )
    parser.add_argument(
        "--assignment-interval-ms",
        type=int,
        default=0,
        help="batch target assignments: compute at most one per interval per group (Apache Kafka's "
        "group.consumer.assignment.interval.ms, default 1000 there; 0 computes one per epoch bump, "
        "fine for small groups; set 1000 for groups of thousands of members)",
    )


def _add_streams_arguments(parser: argparse.ArgumentParser) -> None:
    """``coordinator``'s streams groups (KIP-1071): the task assignor and its settings; the
    session timeout and heartbeat interval are the KIP-848 members' (above)."""
    parser.add_argument(
        "--streams-assignor",
        default=DEFAULT_STREAMS_ASSIGNOR,
        help="the task assignor of streams groups, by name in the registry (sticky, high_availability, "
        "fallback_prior, or a plug-in of the entry-point group streamtasks.assignors; default "
        f"{DEFAULT_STREAMS_ASSIGNOR}: warm-ups and the lag-triggered hand-over)",
    )
    parser.add_argument(
        "--streams-group-assignor",
        action="append",
        default=[],
        metavar="GROUP=NAME",
        help="one streams group's own task assignor (repeatable)",
    )
    parser.add_argument(
        "--streams-num-standby-replicas", type=int, default=0, help="standby replicas per stateful task"
    )
    parser.add_argument(
        "--streams-acceptable-recovery-lag",
        type=int,
        default=10_000,
        help="a process this close to a task's end offsets is caught up (high_availability)",
    )
    parser.add_argument(
        "--streams-max-warmup-replicas", type=int, default=2, help="warm-up tasks at once (high_availability)"
    )
    parser.add_argument(
        "--streams-probing-rebalance-interval-ms",
        type=int,
        default=600_000,
        help="how soon a group with warm-ups is assigned again (high_availability)",
    )
    parser.add_argument(
        "--streams-task-offset-interval-ms",
        type=int,
        default=60_000,
        help="how often members report their task offsets (their lags)",
    )
    parser.add_argument(
        "--streams-initial-rebalance-delay-ms",
        type=int,
        default=0,
        help="the first target of a group a member joins empty waits this long for more members "
        "(Kafka's group.streams.initial.rebalance.delay.ms, 3000 there; 0: none)",
    )
    parser.add_argument(
        "--streams-assignment-interval-ms",
        type=int,
        default=0,
        help="at most one target per group per interval (Kafka's group.streams.assignment.interval.ms, "
        "1000 there; 0: one per epoch bump)",
    )


def streams_from_args(args: argparse.Namespace) -> StreamsCoordinatorConfig:
    """The streams groups' settings; an unknown assignor name is an UnknownAssignorError."""
    pairs = []
    for item in args.streams_group_assignor:
        group, sep, name = item.partition("=")
        if not sep or not group or not name:
            raise ConfigError(f"--streams-group-assignor takes GROUP=NAME, got {item!r}")
        pairs.append((group, name))
    for name in {args.streams_assignor, *(n for _, n in pairs)}:
        registry.get(name)
    return StreamsCoordinatorConfig(
        session_timeout_ms=args.session_timeout_ms,
        heartbeat_interval_ms=args.heartbeat_interval_ms,
        assignor=args.streams_assignor,
        group_assignors=tuple(pairs),
        num_standby_replicas=args.streams_num_standby_replicas,
        acceptable_recovery_lag=args.streams_acceptable_recovery_lag,
        max_warmup_replicas=args.streams_max_warmup_replicas,
        probing_rebalance_interval_ms=args.streams_probing_rebalance_interval_ms,
        task_offset_interval_ms=args.streams_task_offset_interval_ms,
        initial_rebalance_delay_ms=args.streams_initial_rebalance_delay_ms,
        assignment_interval_ms=args.streams_assignment_interval_ms,
        max_group_size=args.max_members_per_group,
    )


def _add_status_arguments(parser: argparse.ArgumentParser) -> None:
    """``coordinator``'s status lines and Prometheus metrics."""
    parser.add_argument(
        "--status-interval-s", type=float, default=5.0, help="seconds between status lines (groups, epochs)"
    )
    parser.add_argument(
        "--metrics-port",
        type=int,
        default=None,
        help="serve Prometheus metrics at /metrics on this port (the 'metrics' extra; default: none)",
    )
    parser.add_argument("--metrics-host", default="127.0.0.1", help="the address of the metrics server")
    add_metrics_security_arguments(parser)


def _add_listener_security_arguments(parser: argparse.ArgumentParser) -> None:
    """``coordinator``'s listener security flags: TLS, client certificates, SASL, ACLs."""
    sec = parser.add_argument_group("the listener's security (docs/security.md)")
    sec.add_argument(
        "--tls-cert",
        type=Path,
        default=None,
        help="PEM certificate (chain): TLS on --listen (default: none, plaintext)",
    )
    sec.add_argument("--tls-key", type=Path, default=None, help="its PEM private key (default: none)")
    sec.add_argument(
        "--tls-key-password-file",
        type=Path,
        default=None,
        help="a file holding the key's password (default: none, an unencrypted key)",
    )
    sec.add_argument(
        "--tls-client-ca",
        type=Path,
        default=None,
        help="require client certificates signed by this CA (principal User:<the certificate's DN>; "
        "default: none, no client certificates)",
    )
    sec.add_argument(
        "--sasl-mechanisms",
        default=None,
        help="comma-separated: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (needs --credentials; "
        "default: none, no SASL)",
    )
    sec.add_argument(
        "--credentials", type=Path, default=None, help="the users file written by add-user (default: none)"
    )
    sec.add_argument(
        "--acl-file",
        type=Path,
        default=None,
        help="per-group allow rules; what no rule allows is denied (default: none, every client "
        "may do everything)",
    )
    sec.add_argument(
        "--session-lifetime-ms",
        type=int,
        default=None,
        help="KIP-368: clients must re-authenticate within this (Kafka's connections.max.reauth.ms; default: "
        "no re-authentication)",
    )


def add_user_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--credentials", type=Path, required=True, help="the users file (created if missing)")
    parser.add_argument("--user", required=True, help="the user name")
    parser.add_argument(
        "--mechanism",
        action="append",
        choices=SCRAM_MECHANISMS,
        default=None,
        help="repeat for several (default: both); PLAIN logs in against these",
    )
    parser.add_argument("--iterations", type=int, default=8192, help="SCRAM's PBKDF2 iterations")
    parser.add_argument(
        "--password-stdin", action="store_true", help="read the password from stdin's first line (no prompt)"
    )


def run_add_user(args: argparse.Namespace) -> int:
    """Read the password (a prompt, twice, or stdin's first line; never argv) and store the
    user's SCRAM credentials."""
    if args.password_stdin or not sys.stdin.isatty():
        password = sys.stdin.readline().rstrip("\r\n")
    else:
        password = getpass.getpass(f"password for {args.user}: ")
        if getpass.getpass("again: ") != password:
            raise ConfigError("the passwords differ")
    mechanisms = tuple(dict.fromkeys(args.mechanism or SCRAM_MECHANISMS))
    add_user(
        args.credentials, args.user, SecretStr(password), mechanisms=mechanisms, iterations=args.iterations
    )
    stored = ", ".join(mechanisms)
    print(f"{args.user}: {stored} credentials ({args.iterations} iterations) in {args.credentials}")
    return 0


def listener_from_args(args: argparse.Namespace) -> ListenerSettings:
    password = None
    if args.tls_key_password_file is not None:
        try:
            text = args.tls_key_password_file.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(
                f"--tls-key-password-file {args.tls_key_password_file}: {exc.strerror}"
            ) from None
        password = SecretStr(text.rstrip("\r\n"))
    mechanisms = tuple(m.strip().upper() for m in (args.sasl_mechanisms or "").split(",") if m.strip())
    try:
        return ListenerSettings(
            tls_certfile=args.tls_cert,
            tls_keyfile=args.tls_key,
            tls_key_password=password,
            tls_client_cafile=args.tls_client_ca,
            sasl_mechanisms=mechanisms,
            credentials_file=args.credentials,
            acl_file=args.acl_file,
            session_lifetime_ms=args.session_lifetime_ms,
        )
    except ValidationError as exc:
        raise ConfigError(
            "the listener's security: "
            + "; ".join(str(e["msg"]).removeprefix("Value error, ") for e in exc.errors())
        ) from None


def backing_values(args: argparse.Namespace) -> dict[str, Any]:
    """The settings of --client-config (or $STREAMTASKS_CLIENT_CONFIG); empty without one."""
    path = client_config_path(args.client_config)
    return load_client_config(path) if path is not None else {}


def config_from_args(args: argparse.Namespace, bootstrap_servers: str) -> ServerConfig:
    host, port = parse_host_port(args.listen, "--listen")
    advertised = parse_host_port(args.advertised, "--advertised") if args.advertised else (None, None)
    listener = listener_from_args(args)
    routing = args.routing or ("direct" if listener.guarded else "proxy")
    values = backing_values(args)
    backing: str | ClientSettings = bootstrap_servers
    if values:
        backing = make_client_settings({**values, "bootstrap_servers": bootstrap_servers})
    return ServerConfig(
        bootstrap_servers=backing,
        listen_host=host,
        listen_port=port,
        advertised_host=advertised[0],
        advertised_port=advertised[1],
        node_id=args.node_id,
        routing=routing,
        listener=listener,
        proxy_port_base=args.proxy_port_base,
        topic=args.topic,
        max_frame_bytes=args.max_frame_bytes,
        max_connections=args.max_connections,
        max_groups=args.max_groups,
        status_interval_s=args.status_interval_s,
        metrics_port=args.metrics_port,
        metrics_host=args.metrics_host,
        metrics_security=metrics_security_from_args(args),
        otel_metrics=args.otel_metrics,
        coordinator=CoordinatorConfig(
            session_timeout_ms=args.session_timeout_ms,
            heartbeat_interval_ms=args.heartbeat_interval_ms,
            assignment_interval_ms=args.assignment_interval_ms,
            max_group_size=args.max_members_per_group,
        ),
        streams=streams_from_args(args),
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
