"""``AppConfig``: the settings of a stateful stream application, frozen, with Kafka Streams'
property names accepted as aliases::

    AppConfig(application_id="wordcount", bootstrap_servers="127.0.0.1:9092", num_standby_replicas=1)
    AppConfig.model_validate({"application.id": "wordcount", "bootstrap.servers": "...",
                              "num.standby.replicas": 1})

Defaults follow Kafka Streams where a default exists (standbys 0, acceptable recovery lag
10,000, 2 warm-ups, 10-minute probing interval, ``earliest`` offset reset). Two differ and say
so: ``commit_interval_ms`` is 5 s (Kafka Streams: 30 s under at-least-once), because a shorter
interval bounds the duplicates a crash replays; ``state_dir`` defaults to
``<tmp>/streamtasks``. Invalid values raise :class:`streamtasks.errors.ConfigError` naming
every offending field.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, ConfigDict, Field, field_validator, model_validator

from streamtasks.app.handlers import HANDLER_NAMES, ErrorHandler, ErrorHandling, resolve_handler
from streamtasks.runtime.config import validate_settings
from streamtasks.runtime.http_security import HttpSecurity
from streamtasks.runtime.security import ClientSettings, SecuritySettings, security_fields
from streamtasks.state.cache import DEFAULT_CACHE_MAX_BYTES

__all__ = ["AppConfig", "make_app_config"]


def _replication_factor(value: int) -> int:
    if value == 0 or value < -1:
        raise ValueError(f"must be -1 (the broker's default.replication.factor) or at least 1, not {value}")
    return value


#: Kafka Streams' ``replication.factor`` (KIP-733): -1, the default, takes the broker's
#: ``default.replication.factor`` for the changelog and repartition topics the app creates.
ReplicationFactor = Annotated[int, AfterValidator(_replication_factor)]


class AppConfig(SecuritySettings):
    """Settings of a :class:`streamtasks.App` (see the module docstring); the TLS and SASL
    settings are :class:`~streamtasks.runtime.security.SecuritySettings`'."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    application_id: str = Field(alias="application.id", min_length=1, pattern=r"^[A-Za-z0-9._-]+$")
    bootstrap_servers: str = Field(alias="bootstrap.servers", min_length=3)
    state_dir: Path = Field(default=Path(tempfile.gettempdir()) / "streamtasks", alias="state.dir")
    num_standby_replicas: int = Field(default=0, alias="num.standby.replicas", ge=0)
    acceptable_recovery_lag: int = Field(default=10_000, alias="acceptable.recovery.lag", ge=0)
    max_warmup_replicas: int = Field(default=2, alias="max.warmup.replicas", ge=1)
    probing_rebalance_interval_ms: int = Field(
        default=600_000, alias="probing.rebalance.interval.ms", ge=60_000
    )
    #: A task assignor registered under this name (built-in or an entry-point plug-in).
    task_assignor: str = Field(default="high_availability", alias="task.assignor", min_length=1)
    upgrade_from: str | None = Field(default=None, alias="upgrade.from")
    #: Drills and tests only: behave on the wire as an older streamtasks release (``"0.1"``,
    #: ``"0.2"``, ``"0.3"``): its userdata version is also the newest this app reads, writes and
    #: advertises, as leader and as member, and its rebalance protocol the newest it supports
    #: (``streamtasks.protocol.upgrade.RELEASES``). ``upgrade_from`` is the new code joining
    #: such a group; this is the old code itself.
    emulate_release: str | None = Field(default=None, alias="streamtasks.emulate.release")
    group_instance_id: str | None = Field(default=None, alias="group.instance.id", min_length=1)
    rack: str | None = Field(default=None, alias="client.rack", min_length=1)
    client_tags: dict[str, str] = Field(default_factory=dict, alias="client.tags")
    #: Serve Prometheus metrics at ``/metrics`` on this port (0: any free port; None: no server);
    #: shares the server of ``application_server`` when that names the same address.
    metrics_port: int | None = Field(default=None, alias="metrics.port", ge=0, le=65535)
    metrics_host: str = Field(default="0.0.0.0", alias="metrics.host", min_length=1)
    #: Also export the metrics through the OpenTelemetry API's global MeterProvider (the
    #: ``otel`` extra; :mod:`streamtasks.app.otel`).
    metrics_otel: bool = Field(default=False, alias="metrics.otel")
    #: TLS and authentication of the HTTP servers (``/metrics``, interactive queries) and of
    #: the queries sent to other processes (:mod:`streamtasks.runtime.http_security`).
    http_security: HttpSecurity | None = Field(default=None, alias="http.security")
    #: Client tag keys across which the assignor spreads standbys (Kafka Streams'
    #: ``rack.aware.assignment.tags``); empty: spread across ``client_rack`` when racks are set.
    rack_aware_assignment_tags: tuple[str, ...] = Field(default=(), alias="rack.aware.assignment.tags")
    #: KIP-925: place actives where their input partitions have replicas (``min_traffic`` or
    #: ``balance_subtopology``; needs ``client.rack`` on every process and brokers' racks).
    rack_aware_assignment_strategy: Literal["none", "min_traffic", "balance_subtopology"] = Field(
        default="none", alias="rack.aware.assignment.strategy"
    )
    #: KIP-925's weights (None: Kafka Streams' defaults, 10 and 1).
    rack_aware_assignment_traffic_cost: int | None = Field(
        default=None, alias="rack.aware.assignment.traffic_cost", ge=0, le=2**31 - 1
    )
    rack_aware_assignment_non_overlap_cost: int | None = Field(
        default=None, alias="rack.aware.assignment.non_overlap_cost", ge=0, le=2**31 - 1
    )
    #: ``host:port`` of this process's interactive-query HTTP server (Kafka Streams'
    #: ``application.server``): carried in the group metadata so that other processes route a
    #: key's query here (:mod:`streamtasks.app.queries`); None: no server, local reads only.
    application_server: str | None = Field(default=None, alias="application.server")
    #: ``exactly_once_v2``: changelog, output and offset writes committed in one transaction
    #: per commit (KIP-447; docs/app.md, "Exactly-once"); inputs and restores read committed.
    processing_guarantee: Literal["at_least_once", "exactly_once_v2"] = Field(
        default="at_least_once", alias="processing.guarantee"
    )
    #: Exactly-once: how long the broker keeps a transaction of a crashed process open before
    #: aborting it (read_committed readers of its partitions wait that long). Kafka Streams: 10 s.
    transaction_timeout_ms: int = Field(default=10_000, alias="transaction.timeout.ms", ge=1_000)
    #: KIP-572: how long the tasks may keep failing for a retriable reason (a changelog, output
    #: or repartition record not delivered, an aborted transaction) without a commit in between;
    #: each failure revives them in place, and one this long after the first is fatal. 0: the
    #: first is fatal. Kafka Streams: 300 s.
    task_timeout_ms: int = Field(default=300_000, alias="task.timeout.ms", ge=0)
    commit_interval_ms: int = Field(default=5_000, alias="commit.interval.ms", ge=10)
    #: How often standby and warm-up lags are measured (changelog end offsets are listed).
    lag_check_interval_ms: int = Field(default=500, alias="lag.check.interval.ms", ge=50)
    #: A standby whose lag keeps growing this long triggers a rebalance.
    standby_lag_growth_ms: int = Field(default=60_000, alias="standby.lag.growth.ms", ge=100)
    #: At most one lag-triggered rebalance per this interval.
    lag_trigger_min_interval_ms: int = Field(default=2_000, alias="lag.trigger.min.interval.ms", ge=0)
    replication_factor: ReplicationFactor = Field(default=-1, alias="replication.factor")
    session_timeout_ms: int = Field(default=45_000, alias="session.timeout.ms", ge=1_000)
    heartbeat_interval_ms: int = Field(default=3_000, alias="heartbeat.interval.ms", ge=100)
    rebalance_timeout_ms: int = Field(default=300_000, alias="max.poll.interval.ms", ge=1_000)
    request_timeout_ms: int = Field(default=30_000, alias="request.timeout.ms", ge=1_000)
    max_poll_records: int = Field(default=500, alias="max.poll.records", ge=1)
    metadata_max_age_ms: int = Field(default=300_000, alias="metadata.max.age.ms", ge=100)
    auto_offset_reset: Literal["earliest", "latest"] = Field(default="earliest", alias="auto.offset.reset")
    client_id: str = Field(default="streamtasks-app", alias="client.id")
    #: The record cache (docs/state.md): bytes for the whole app, shared by its tasks' stores;
    #: updates of a key between commits are merged and only the last is written. 0 disables it.
    cache_max_bytes: int = Field(default=DEFAULT_CACHE_MAX_BYTES, alias="statestore.cache.max.bytes", ge=0)
    #: Handed to the consumer (:class:`streamtasks.runtime.config.ConsumerConfig`): false on Tansu.
    lose_on_missed_generation: bool = Field(default=True, alias="lose.on.missed.generation")
    #: ``classic`` (JoinGroup/SyncGroup, KIP-429) or ``consumer`` (KIP-848): under ``consumer``
    #: the app's assignor runs client-side (PrepareAssignment / InstallAssignment), which only a
    #: ``streamtasks coordinator`` serves; lag triggers travel as the heartbeat's reason.
    #: ``streams`` (KIP-1071, Apache Kafka 4.2+): a streams group, the broker's task assignor
    #: places the active and standby tasks (docs/streams-groups.md).
    group_protocol: Literal["classic", "consumer", "streams"] = Field(
        default="classic", alias="group.protocol"
    )

    #: What to do with an input record a source serde cannot read (KIP-161), a record the
    #: processor raised on (KIP-1033), an output record the broker refused (KIP-210):
    #: ``"log_and_fail"`` (the default, as in Kafka Streams), ``"log_and_continue"``, or a
    #: callable (:mod:`streamtasks.app.handlers`).
    deserialization_exception_handler: str | ErrorHandler = Field(
        default="log_and_fail", alias="deserialization.exception.handler"
    )
    processing_exception_handler: str | ErrorHandler = Field(
        default="log_and_fail", alias="processing.exception.handler"
    )
    production_exception_handler: str | ErrorHandler = Field(
        default="log_and_fail", alias="production.exception.handler"
    )
    #: KIP-1034: the built-in handlers write each record they handle to this topic (which must
    #: exist, as in Kafka Streams) with the error in its headers.
    dead_letter_queue_topic: str | None = Field(
        default=None, alias="errors.dead.letter.queue.topic.name", min_length=1
    )

    @field_validator(
        "deserialization_exception_handler", "processing_exception_handler", "production_exception_handler"
    )
    @classmethod
    def _known_handler(cls, value: str | ErrorHandler) -> str | ErrorHandler:
        if isinstance(value, str) and value not in HANDLER_NAMES:
            raise ValueError(
                f"unknown handler {value!r} (known: {', '.join(sorted(HANDLER_NAMES))} or a callable)"
            )
        return value

    @field_validator("application_server")
    @classmethod
    def _host_port(cls, value: str | None) -> str | None:
        if value is not None:
            host, sep, port = value.rpartition(":")
            if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise ValueError(f"must be host:port with a port in 1..65535, not {value!r}")
        return value

    @model_validator(mode="after")
    def _check(self) -> AppConfig:
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise ValueError(
                f"heartbeat.interval.ms ({self.heartbeat_interval_ms}) must be lower than "
                f"session.timeout.ms ({self.session_timeout_ms})"
            )
        if self.group_protocol != "classic" and self.upgrade_from is not None:
            raise ValueError(
                "upgrade.from is for group.protocol=classic (a rolling upgrade of classic members)"
            )
        if self.group_protocol != "classic" and self.emulate_release is not None:
            raise ValueError(
                "emulate_release is for group.protocol=classic (releases before 0.4 had no KIP-848)"
            )
        if self.upgrade_from is not None and self.emulate_release is not None:
            raise ValueError(
                "set upgrade.from or emulate_release, not both (an emulated release pins its wire)"
            )
        return self

    @property
    def exactly_once(self) -> bool:
        return self.processing_guarantee == "exactly_once_v2"

    def error_handling(self) -> ErrorHandling:
        """The three exception handlers, resolved, and the dead-letter topic."""
        return ErrorHandling(
            deserialization=resolve_handler(self.deserialization_exception_handler),
            processing=resolve_handler(self.processing_exception_handler),
            production=resolve_handler(self.production_exception_handler),
            dead_letter_topic=self.dead_letter_queue_topic,
        )

    @property
    def isolation_level(self) -> Literal["read_uncommitted", "read_committed"]:
        """What the app's consumers read: committed records only under exactly-once."""
        return "read_committed" if self.exactly_once else "read_uncommitted"

    def client_settings(self) -> ClientSettings:
        """The bootstrap servers and security settings, for every connection the app opens."""
        return self.client_settings_for(self.bootstrap_servers)

    def consumer_settings(self) -> dict[str, Any]:
        """The group/fetch settings handed to the embedded :class:`streamtasks.Consumer`, with
        the security settings (only those set, so that defaults stay defaults)."""
        return {
            **{k: v for k, v in security_fields(self).items() if k in self.model_fields_set},
            "bootstrap_servers": self.bootstrap_servers,
            "group_id": self.application_id,
            "group_instance_id": self.group_instance_id,
            "client_id": self.client_id,
            "client_rack": self.rack,
            "session_timeout_ms": self.session_timeout_ms,
            "heartbeat_interval_ms": self.heartbeat_interval_ms,
            "rebalance_timeout_ms": self.rebalance_timeout_ms,
            "request_timeout_ms": self.request_timeout_ms,
            "max_poll_records": self.max_poll_records,
            "metadata_max_age_ms": self.metadata_max_age_ms,
            "auto_offset_reset": self.auto_offset_reset,
            "enable_auto_commit": False,
            "lose_on_missed_generation": self.lose_on_missed_generation,
            "group_protocol": self.group_protocol,
            "isolation_level": self.isolation_level,
        }


def make_app_config(values: dict[str, Any] | None = None, /, **kwargs: Any) -> AppConfig:
    """Build an :class:`AppConfig` from Python or Kafka-style names; errors are ConfigErrors."""
    return validate_settings(AppConfig, {**(values or {}), **kwargs}, "app")
