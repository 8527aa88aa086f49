"""Consumer configuration: a frozen pydantic model that also accepts Kafka's property names.

    ConsumerConfig(bootstrap_servers="127.0.0.1:9092", group_id="orders")
    ConsumerConfig.model_validate({"bootstrap.servers": "...", "group.id": "orders",
                                   "partition.assignment.strategy": "cooperative-sticky"})

Invalid values raise :class:`streamtasks.errors.ConfigError` naming every offending field.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from streamtasks.errors import ConfigError
from streamtasks.runtime.security import ClientSettings, SecuritySettings, describe_errors

__all__ = ["KAFKA_ASSIGNOR_NAMES", "ConsumerConfig", "make_config", "validate_settings"]

#: Kafka / librdkafka assignor names → streamtasks partition assignor names.
KAFKA_ASSIGNOR_NAMES = {
    "range": "range",
    "roundrobin": "round_robin",
    "round_robin": "round_robin",
    "sticky": "sticky",
    "cooperative-sticky": "cooperative_sticky",
    "cooperative_sticky": "cooperative_sticky",
    "uniform": "uniform",
    "org.apache.kafka.clients.consumer.RangeAssignor": "range",
    "org.apache.kafka.clients.consumer.RoundRobinAssignor": "round_robin",
    "org.apache.kafka.clients.consumer.StickyAssignor": "sticky",
    "org.apache.kafka.clients.consumer.CooperativeStickyAssignor": "cooperative_sticky",
}


class ConsumerConfig(SecuritySettings):
    """Settings of a :class:`streamtasks.Consumer`; defaults follow Apache Kafka's. The TLS and
    SASL settings are :class:`~streamtasks.runtime.security.SecuritySettings`'."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    bootstrap_servers: str = Field(alias="bootstrap.servers", min_length=3)
    group_id: str = Field(alias="group.id", min_length=1)
    group_instance_id: str | None = Field(default=None, alias="group.instance.id", min_length=1)
    client_id: str = Field(default="streamtasks", alias="client.id")
    client_rack: str | None = Field(default=None, alias="client.rack")
    #: ``classic`` (JoinGroup/SyncGroup, KIP-429) or ``consumer`` (KIP-848's ConsumerGroupHeartbeat);
    #: ``streams`` (KIP-1071) only inside an App, which declares the topology.
    group_protocol: Literal["classic", "consumer", "streams"] = Field(
        default="classic", alias="group.protocol"
    )
    #: ``consumer`` protocol only: the coordinator-side assignor (Apache Kafka: ``uniform`` or
    #: ``range``); ``None`` leaves the choice to the coordinator (its first configured assignor).
    group_remote_assignor: str | None = Field(default=None, alias="group.remote.assignor", min_length=1)
    assignors: tuple[str, ...] = Field(
        default=("cooperative_sticky",), alias="partition.assignment.strategy", min_length=1
    )
    session_timeout_ms: int = Field(default=45_000, alias="session.timeout.ms", ge=1_000, le=3_600_000)
    heartbeat_interval_ms: int = Field(default=3_000, alias="heartbeat.interval.ms", ge=100)
    rebalance_timeout_ms: int = Field(default=300_000, alias="max.poll.interval.ms", ge=1_000)
    retry_backoff_ms: int = Field(default=100, alias="retry.backoff.ms", ge=0)
    request_timeout_ms: int = Field(default=30_000, alias="request.timeout.ms", ge=1_000)
    auto_offset_reset: Literal["earliest", "latest", "none"] = Field(
        default="latest", alias="auto.offset.reset"
    )
    enable_auto_commit: bool = Field(default=True, alias="enable.auto.commit")
    auto_commit_interval_ms: int = Field(default=5_000, alias="auto.commit.interval.ms", ge=100)
    max_poll_records: int = Field(default=500, alias="max.poll.records", ge=1)
    metadata_max_age_ms: int = Field(default=300_000, alias="metadata.max.age.ms", ge=100)
    #: Classic protocol: owned partitions are lost when a JoinGroup answer skips a generation
    #: (``MemberConfig.lose_on_missed_generation``). Set false on Tansu, which skips generation
    #: numbers for members that took part (docs/testing.md, "generation gaps").
    lose_on_missed_generation: bool = Field(default=True, alias="lose.on.missed.generation")
    #: A lapsed assignment taken back (the coordinator vouched for the generation or epoch it
    #: was lost in) resumes from the positions held at the loss instead of the committed offsets.
    #: ``None``: only when no listener callback ran for the loss (no ``on_partitions_lost`` and
    #: no ``on_partitions_revoked``, Kafka's fallback), since a callback may have rolled back
    #: what was handed out; ``True``: the listener's loss handling keeps what it processed.
    take_back_positions: bool | None = Field(default=None, alias="take.back.positions")
    #: ``read_committed``: records of open or aborted transactions are not handed out, and the
    #: committed offsets of a new assignment are read once no transaction holds them (KIP-447's
    #: ``require_stable``).
    isolation_level: Literal["read_uncommitted", "read_committed"] = Field(
        default="read_uncommitted", alias="isolation.level"
    )

    @field_validator("assignors", mode="before")
    @classmethod
    def _split_assignors(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = [v.strip() for v in value.split(",") if v.strip()]
        return tuple(KAFKA_ASSIGNOR_NAMES.get(v, v) if isinstance(v, str) else v for v in value)

    @model_validator(mode="after")
    def _check(self) -> ConsumerConfig:
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise ValueError(
                f"heartbeat.interval.ms ({self.heartbeat_interval_ms}) must be lower than "
                f"session.timeout.ms ({self.session_timeout_ms})"
            )
        if self.group_remote_assignor is not None and self.group_protocol != "consumer":
            raise ValueError("group.remote.assignor needs group.protocol=consumer")
        if self.group_protocol == "consumer" and "assignors" in self.model_fields_set:
            raise ValueError(
                "partition.assignment.strategy is for group.protocol=classic: under the consumer "
                "protocol the coordinator assigns (group.remote.assignor), or pass "
                "partition_assignors= to Consumer for client-side assignors"
            )
        if len(set(self.assignors)) != len(self.assignors):
            raise ValueError(f"partition.assignment.strategy lists an assignor twice: {self.assignors}")
        return self

    def client_settings(self) -> ClientSettings:
        """The bootstrap servers and security settings, for every connection the consumer opens."""
        return self.client_settings_for(self.bootstrap_servers)


_Model = TypeVar("_Model", bound=BaseModel)


def validate_settings(model: type[_Model], values: Mapping[str, Any], what: str) -> _Model:
    """``model.model_validate(values)`` with every problem in one :class:`ConfigError`."""
    try:
        return model.model_validate(dict(values))
    except ValidationError as exc:
        raise ConfigError(f"invalid {what} config: {describe_errors(exc)}") from None


def make_config(values: dict[str, Any] | None = None, /, **kwargs: Any) -> ConsumerConfig:
    """Build a :class:`ConsumerConfig` from Python or Kafka-style names; errors are ConfigErrors."""
    return validate_settings(ConsumerConfig, {**(values or {}), **kwargs}, "consumer")
