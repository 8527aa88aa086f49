"""The demo's cluster: which one (an embedded broker, ``--bootstrap-servers`` with
``--client-config``, or ``--secure``: the secured embedded Apache Kafka with the settings of its
``app`` user, SASL_SSL and SCRAM-SHA-512), and what it serves (ApiVersions, asked over whatever
security the cluster wants)."""

from __future__ import annotations

import dataclasses
import os
from typing import TYPE_CHECKING, Any, TextIO

from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.api_versions.v3.response import ApiVersionsResponse
from pydantic import SecretStr

from streamtasks.drills.coordinator_proc import SECURED_COORDINATOR_REFUSED
from streamtasks.embedded import Cluster, EmbeddedBroker, ExternalCluster, start_broker
from streamtasks.errors import BrokerError, ConfigError
from streamtasks.protocol.consumer_group import CONSUMER_GROUP_HEARTBEAT_API_KEY
from streamtasks.protocol.streams_group import STREAMS_GROUP_HEARTBEAT_API_KEY
from streamtasks.runtime.connection import open_any
from streamtasks.runtime.security import ClientSettings, SecuritySettings, make_client_settings

if TYPE_CHECKING:
    from streamtasks.drills.demo_options import DemoOptions

__all__ = [
    "PASSWORD_ENV",
    "SECURE_MECHANISM",
    "SECURE_USER",
    "TANSU_STATIC_PAUSE_S",
    "api_keys",
    "open_cluster",
    "prepare_cluster",
    "require_kip848",
    "require_streams_groups",
    "start_secure_cluster",
]

#: The user and mechanism of ``demo --secure`` (the broker's ACLs give ``app`` its ``secure-*``).
SECURE_USER, SECURE_MECHANISM = "app", "SCRAM-SHA-512"
#: Fixes the password of ``demo --secure``'s user (random otherwise), read once: a test sets it
#: to grep everything the demo printed and wrote for it.
PASSWORD_ENV = "STREAMTASKS_DEMO_PASSWORD"
#: ``DemoOptions.static_pause_s`` on the embedded Tansu broker.
TANSU_STATIC_PAUSE_S = 10.0


def start_secure_cluster(log_path: str | os.PathLike[str] | None = None) -> tuple[Any, ClientSettings]:
    """Start the secured embedded Apache Kafka (its own certificate kit, random passwords) and
    return it with the SASL_SSL settings of :data:`SECURE_USER`."""
    from streamtasks.embedded.secure_broker import SecureKafkaBroker

    given = os.environ.get(PASSWORD_ENV)
    passwords = {SECURE_USER: SecretStr(given)} if given else None
    broker = SecureKafkaBroker(log_path=log_path, passwords=passwords).start()
    try:
        settings = make_client_settings(broker.secured().settings(SECURE_USER, SECURE_MECHANISM))
    except BaseException:
        broker.stop()
        raise
    return broker, settings


def open_cluster(
    *,
    bootstrap: str | None,
    client: SecuritySettings | None,
    secure: bool,
    broker: str | None,
    log_path: str | None,
    out: TextIO,
) -> tuple[Any, ClientSettings]:
    """The demo's cluster and the settings its clients use: the secured embedded broker
    (``secure``), the cluster at ``bootstrap`` with ``client``'s security, or an embedded
    broker of kind ``broker`` (PLAINTEXT). The cluster is started; stop() it."""
    if secure and bootstrap:
        raise ConfigError("--secure starts its own secured broker: give no --bootstrap-servers")
    if client is not None and not bootstrap:
        raise ConfigError("--client-config needs --bootstrap-servers (the cluster it is for)")
    if secure:
        cluster, settings = start_secure_cluster(log_path)
        out.write(
            f"secured Apache Kafka: SASL_SSL on {settings.bootstrap_servers}, "
            f"{SECURE_MECHANISM} as user {SECURE_USER}\n"
        )
        return cluster, settings
    if bootstrap:
        settings = client.client_settings_for(bootstrap) if client else ClientSettings.of(bootstrap)
        return ExternalCluster(bootstrap), settings
    started = start_broker(broker, log_path=log_path)
    return started, ClientSettings.of(started.bootstrap_servers)


async def api_keys(settings: ClientSettings) -> set[int]:
    """The API keys the first bootstrap server of ``settings`` serves (ApiVersions)."""
    conn = await open_any(settings, "streamtasks-demo")
    try:
        response = await conn.call(
            ApiVersionsRequest(client_software_name="streamtasks", client_software_version="0.1.0"),
            ApiVersionsResponse,
        )
    finally:
        await conn.close()
    return {int(k.api_key) for k in response.api_keys}


def _require_api(
    cluster: Cluster, served: set[int] | None, *, api_key: int, kip: str, what: str, hint: str
) -> None:
    if served is None:
        served = set(cluster.api_versions())
    if api_key not in served:
        tansu = " (Tansu does not)" if isinstance(cluster, EmbeddedBroker) else ""
        raise BrokerError(
            f"{what} (API key {api_key}, {kip}){tansu}: the cluster at {cluster.bootstrap_servers} "
            f"does not. {hint}"
        )


def require_kip848(cluster: Cluster, served: set[int] | None = None) -> None:
    """:class:`BrokerError` unless ``cluster`` serves ConsumerGroupHeartbeat (KIP-848);
    ``served``: its API keys when already asked (over TLS/SASL: :func:`api_keys`)."""
    _require_api(
        cluster,
        served,
        api_key=CONSUMER_GROUP_HEARTBEAT_API_KEY,
        kip="KIP-848",
        what="--protocol consumer needs a cluster serving ConsumerGroupHeartbeat",
        hint="Use --broker kafka (Apache Kafka 4.x), or --protocol consumer-client, which serves "
        "KIP-848 from streamtasks coordinator in front of it",
    )


def require_streams_groups(cluster: Cluster, served: set[int] | None = None) -> None:
    """:class:`BrokerError` unless ``cluster`` serves StreamsGroupHeartbeat (KIP-1071)."""
    _require_api(
        cluster,
        served,
        api_key=STREAMS_GROUP_HEARTBEAT_API_KEY,
        kip="KIP-1071",
        what="--protocol streams needs a cluster serving StreamsGroupHeartbeat",
        hint="Use --broker kafka (Apache Kafka 4.2+)",
    )


def prepare_cluster(options: DemoOptions, out: TextIO) -> tuple[DemoOptions, Any, ClientSettings]:
    """The demo's cluster, started, with its client settings, and the options completed for it
    (the ``secure-`` names under ``--secure``, the Tansu workarounds on Tansu). Refuses a
    streamtasks coordinator in front of a secured cluster."""
    bootstrap = options.bootstrap_servers or os.environ.get("STREAMTASKS_BOOTSTRAP")
    client_secured = options.client is not None and options.client.security_protocol != "PLAINTEXT"
    if options.protocol == "consumer-client" and (options.secure or client_secured):
        raise ConfigError(SECURED_COORDINATOR_REFUSED)
    log_dir = os.environ.get("STREAMTASKS_DEMO_LOGS")
    if log_dir:
        os.makedirs(log_dir, exist_ok=True)
    cluster, settings = open_cluster(
        bootstrap=bootstrap,
        client=options.client,
        secure=options.secure,
        broker=options.broker,
        log_path=os.path.join(log_dir, "broker.log") if log_dir else None,
        out=out,
    )
    if options.secure:
        options = dataclasses.replace(options, name_prefix=options.name_prefix or "secure-")
    if options.static_pause_s is None:
        pause = TANSU_STATIC_PAUSE_S if isinstance(cluster, EmbeddedBroker) else 0.0
        options = dataclasses.replace(options, static_pause_s=pause)
    if options.tansu_workarounds is None:
        # Tansu's classic-group quirks only: under KIP-848 the group is served by Apache Kafka
        # (never Tansu) or by streamtasks coordinator.
        classic = options.protocol in ("eager", "cooperative")
        options = dataclasses.replace(
            options, tansu_workarounds=classic and isinstance(cluster, EmbeddedBroker)
        )
    return options, cluster, settings
