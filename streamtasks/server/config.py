"""The server's settings: where it listens and what it tells clients, the backing cluster, the
log topic, the limits, the coordinator's own (``group.consumer.*``) settings, and the listener's
security (:class:`ListenerSettings`: TLS, SASL, ACLs; ``docs/security.md``)."""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict, SecretStr, model_validator

from streamtasks.coordinator import CoordinatorConfig
from streamtasks.coordinator.streams import StreamsCoordinatorConfig
from streamtasks.errors import ConfigError
from streamtasks.runtime.http_security import HttpSecurity
from streamtasks.runtime.security import ClientSettings, load_cert_chain
from streamtasks.server.log import DEFAULT_TOPIC
from streamtasks.server.sasl_server import SUPPORTED_MECHANISMS

__all__ = [
    "DEFAULT_NODE_ID",
    "DEFAULT_STREAMS_ASSIGNOR",
    "ListenerSettings",
    "ServerConfig",
    "parse_host_port",
]

#: The node id FindCoordinator answers with: far above any real broker's, so a client never
#: mistakes the coordinator for a broker of the backing cluster.
DEFAULT_NODE_ID = 2_000_000_000
#: Streams groups' task assignor unless ``--streams-assignor`` names another.
DEFAULT_STREAMS_ASSIGNOR = "high_availability"


def parse_host_port(value: str, what: str) -> tuple[str, int]:
    host, sep, port = value.strip().rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ConfigError(f"{what} must be host:port, got {value!r}")
    return host, int(port)


class ListenerSettings(BaseModel):
    """The coordinator listener's security. Nothing set: plaintext, anyone may do anything (as
    before). ``tls_certfile``/``tls_keyfile``: TLS; ``tls_client_cafile``: clients must show a
    certificate signed by it (their principal: ``User:`` + the certificate's distinguished name,
    as Kafka's default SSL principal builder); ``sasl_mechanisms`` with ``credentials_file``:
    SASL before anything else (its principal wins over the certificate's); ``acl_file``: per
    group rights, deny by default; ``session_lifetime_ms``: KIP-368 re-authentication."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tls_certfile: Path | None = None
    tls_keyfile: Path | None = None
    tls_key_password: SecretStr | None = None
    tls_client_cafile: Path | None = None
    sasl_mechanisms: tuple[str, ...] = ()
    credentials_file: Path | None = None
    acl_file: Path | None = None
    session_lifetime_ms: int | None = None

    @model_validator(mode="after")
    def _check(self) -> ListenerSettings:
        if (self.tls_certfile is None) != (self.tls_keyfile is None):
            raise ValueError("TLS needs both a certificate and its key")
        if self.tls_certfile is None and (self.tls_client_cafile or self.tls_key_password):
            raise ValueError("client certificates and a key password need TLS (a certificate and key)")
        unknown = [m for m in self.sasl_mechanisms if m not in SUPPORTED_MECHANISMS]
        if unknown:
            raise ValueError(
                f"unknown SASL mechanism(s) {', '.join(unknown)} (served: {', '.join(SUPPORTED_MECHANISMS)})"
            )
        if bool(self.sasl_mechanisms) != (self.credentials_file is not None):
            raise ValueError("SASL mechanisms and a credentials file go together")
        if self.session_lifetime_ms is not None and (
            self.session_lifetime_ms < 1 or not self.sasl_mechanisms
        ):
            raise ValueError("a session lifetime must be positive and needs SASL")
        return self

    @property
    def tls(self) -> bool:
        return self.tls_certfile is not None

    @property
    def authenticates(self) -> bool:
        """Clients prove who they are (SASL or a client certificate)."""
        return bool(self.sasl_mechanisms) or self.tls_client_cafile is not None

    @property
    def guarded(self) -> bool:
        """Principals matter here: forwarding is limited to what cannot escalate (docs/security.md)."""
        return self.authenticates or self.acl_file is not None

    def ssl_context(self) -> ssl.SSLContext | None:
        """The server-side TLS context; ConfigError naming the file that cannot be used."""
        if self.tls_certfile is None or self.tls_keyfile is None:
            return None
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        load_cert_chain(
            context,
            self.tls_certfile,
            self.tls_keyfile,
            self.tls_key_password,
            what=f"TLS certificate {self.tls_certfile} / key {self.tls_keyfile} cannot be used",
        )
        if self.tls_client_cafile is not None:
            try:
                context.load_verify_locations(cafile=self.tls_client_cafile)
            except (OSError, ssl.SSLError) as exc:
                raise ConfigError(
                    f"client CA {self.tls_client_cafile} cannot be used: "
                    f"{getattr(exc, 'strerror', None) or exc.__class__.__name__}"
                ) from None
            context.verify_mode = ssl.CERT_REQUIRED
        return context


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerConfig:
    #: The backing cluster, and how the coordinator reaches it (TLS, SASL: ``--client-config``).
    bootstrap_servers: str | ClientSettings
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
    #: Serve Prometheus metrics at ``/metrics`` on this port (0: any free port; None: none).
    metrics_port: int | None = None
    metrics_host: str = "127.0.0.1"
    #: TLS and authentication of the metrics server.
    metrics_security: HttpSecurity | None = None
    #: Also export the metrics through OpenTelemetry: ``"console"`` / ``"otlp"`` (an SDK
    #: MeterProvider of the ``otel`` extra), ``"global"`` (the API's global MeterProvider) or a
    #: MeterProvider; None: not.
    otel_metrics: object = None
    #: How often the OpenTelemetry snapshot is refreshed from the coordinator's state.
    otel_refresh_s: float = 5.0
    metadata_refresh_s: float = 10.0
    #: "proxy": every broker listed at a listener of the server; "direct": the real brokers.
    routing: str = "proxy"
    #: First port of the per-broker listeners (None: any free port).
    proxy_port_base: int | None = None
    coordinator: CoordinatorConfig = field(default_factory=CoordinatorConfig)
    #: Streams groups (KIP-1071): timings and the task assignor (default high_availability:
    #: warm-ups and the lag-triggered hand-over).
    streams: StreamsCoordinatorConfig = field(
        default_factory=lambda: StreamsCoordinatorConfig(assignor=DEFAULT_STREAMS_ASSIGNOR)
    )
    listener: ListenerSettings = field(default_factory=ListenerSettings)

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
        if self.listener.guarded and self.routing == "proxy":
            raise ConfigError(
                "a secured listener (SASL, client certificates or an ACL file) forwards no fetch or "
                "produce under the coordinator's identity: use --routing direct, so clients reach "
                "the brokers with their own (docs/security.md)"
            )

    @property
    def backing(self) -> ClientSettings:
        """The backing cluster's client settings (PLAINTEXT for a bare ``host:port`` string)."""
        return ClientSettings.of(self.bootstrap_servers)

    def backing_broker(self, host: str, port: int) -> ClientSettings:
        """The same security for one broker of the backing cluster."""
        return self.backing.client_settings_for(f"{host}:{port}")

    @property
    def advertised(self) -> tuple[str, int]:
        return (self.advertised_host or self.listen_host, self.advertised_port or self.listen_port)
