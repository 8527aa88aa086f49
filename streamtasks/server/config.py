"""The server's settings: where it listens and what it tells clients, the backing cluster, the
log topic, the limits, and the coordinator's own (``group.consumer.*``) settings."""

from __future__ import annotations

from dataclasses import dataclass, field

from streamtasks.coordinator import CoordinatorConfig
from streamtasks.errors import ConfigError
from streamtasks.server.log import DEFAULT_TOPIC

__all__ = ["DEFAULT_NODE_ID", "ServerConfig", "parse_host_port"]

#: The node id FindCoordinator answers with: far above any real broker's, so a client never
#: mistakes the coordinator for a broker of the backing cluster.
DEFAULT_NODE_ID = 2_000_000_000


def parse_host_port(value: str, what: str) -> tuple[str, int]:
    host, sep, port = value.strip().rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ConfigError(f"{what} must be host:port, got {value!r}")
    return host, int(port)


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerConfig:
    bootstrap_servers: str
    listen_host: str = "127.0.0.1"
    listen_port: int = 9092
    #: host:port FindCoordinator answers with (default: the listen address).
    advertised_host: str | None = None
    advertised_port: int | None = None
    node_id: int = DEFAULT_NODE_ID
    topic: str = DEFAULT_TOPIC
    max_frame_bytes: int = 16 * 1024 * 1024
    max_connections: int = 10_000
    max_groups: int = 10_000
    max_in_flight_per_connection: int = 1_000
    status_interval_s: float = 5.0
    metadata_refresh_s: float = 10.0
    #: "proxy": every broker listed at a listener of the server; "direct": the real brokers.
    routing: str = "proxy"
    #: First port of the per-broker listeners (None: any free port).
    proxy_port_base: int | None = None
    coordinator: CoordinatorConfig = field(default_factory=CoordinatorConfig)

    def __post_init__(self) -> None:
        if self.max_frame_bytes < 64:
            raise ConfigError("max_frame_bytes must be at least 64")
        for name in ("max_connections", "max_groups", "max_in_flight_per_connection"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be at least 1")
        if self.routing not in ("proxy", "direct"):
            raise ConfigError(f"routing must be proxy or direct, got {self.routing!r}")
        if self.advertised_host is None and self.listen_host in ("0.0.0.0", "::", ""):
            raise ConfigError("listening on every interface: give the address clients reach (--advertised)")

    @property
    def advertised(self) -> tuple[str, int]:
        return (self.advertised_host or self.listen_host, self.advertised_port or self.listen_port)
