from __future__ import annotations

import pytest

from streamtasks.app import AppConfig, make_app_config
from streamtasks.errors import ConfigError


def test_kafka_streams_names_are_accepted() -> None:
    cfg = AppConfig.model_validate(
        {
            "application.id": "wordcount",
            "bootstrap.servers": "127.0.0.1:9092",
            "num.standby.replicas": 1,
            "acceptable.recovery.lag": 50,
            "probing.rebalance.interval.ms": 60_000,
        }
    )
    assert (cfg.num_standby_replicas, cfg.acceptable_recovery_lag) == (1, 50)
    assert cfg.probing_rebalance_interval_ms == 60_000


def test_defaults_follow_kafka_streams() -> None:
    cfg = make_app_config(application_id="a", bootstrap_servers="h:1")
    assert cfg.num_standby_replicas == 0
    assert cfg.acceptable_recovery_lag == 10_000
    assert cfg.max_warmup_replicas == 2
    assert cfg.probing_rebalance_interval_ms == 600_000
    assert cfg.auto_offset_reset == "earliest"
    assert cfg.task_assignor == "high_availability"


def test_every_bad_value_is_named_in_one_error() -> None:
    with pytest.raises(ConfigError) as info:
        make_app_config(
            application_id="bad id!", bootstrap_servers="h:1", num_standby_replicas=-1, max_warmup_replicas=0
        )
    text = str(info.value)
    for field in ("application_id", "num_standby_replicas", "max_warmup_replicas"):
        assert field in text


def test_probing_interval_below_kafka_minimum_is_refused() -> None:
    with pytest.raises(ConfigError, match="probing_rebalance_interval_ms"):
        make_app_config(application_id="a", bootstrap_servers="h:1", probing_rebalance_interval_ms=1_000)


def test_heartbeat_must_be_below_session_timeout() -> None:
    with pytest.raises(ConfigError, match="heartbeat"):
        make_app_config(
            application_id="a", bootstrap_servers="h:1", session_timeout_ms=6_000, heartbeat_interval_ms=6_000
        )


def test_config_is_frozen() -> None:
    cfg = make_app_config(application_id="a", bootstrap_servers="h:1")
    with pytest.raises(Exception, match="frozen"):
        cfg.num_standby_replicas = 3  # type: ignore[misc]


def test_consumer_settings_join_the_application_group_without_auto_commit() -> None:
    cfg = make_app_config(application_id="orders", bootstrap_servers="h:1", group_instance_id="p1")
    settings = cfg.consumer_settings()
    assert settings["group_id"] == "orders"
    assert settings["group_instance_id"] == "p1"
    assert settings["enable_auto_commit"] is False
    assert settings["lose_on_missed_generation"] is True
    tansu = make_app_config(
        {"application.id": "orders", "bootstrap.servers": "h:1", "lose.on.missed.generation": False}
    )
    assert tansu.consumer_settings()["lose_on_missed_generation"] is False


def test_group_protocol_reaches_the_consumer_and_refuses_upgrade_from() -> None:
    cfg = make_app_config(application_id="orders", bootstrap_servers="h:1")
    assert cfg.consumer_settings()["group_protocol"] == "classic"
    kip848 = make_app_config(
        {"application.id": "orders", "bootstrap.servers": "h:1", "group.protocol": "consumer"}
    )
    assert kip848.consumer_settings()["group_protocol"] == "consumer"
    with pytest.raises(ConfigError, match=r"upgrade.from is for group.protocol=classic"):
        make_app_config(
            application_id="o", bootstrap_servers="h:1", group_protocol="consumer", upgrade_from="0.2"
        )


def test_emulate_release_is_for_classic_groups_and_excludes_upgrade_from() -> None:
    cfg = make_app_config(
        {"application.id": "o", "bootstrap.servers": "h:1", "streamtasks.emulate.release": "0.3"}
    )
    assert cfg.emulate_release == "0.3"
    with pytest.raises(ConfigError, match=r"emulate_release is for group.protocol=classic"):
        make_app_config(
            application_id="o", bootstrap_servers="h:1", group_protocol="consumer", emulate_release="0.3"
        )
    with pytest.raises(ConfigError, match="not both"):
        make_app_config(
            application_id="o", bootstrap_servers="h:1", upgrade_from="0.3", emulate_release="0.3"
        )


def test_replication_factor_defaults_to_the_brokers_like_kafka_streams() -> None:
    # KIP-733: -1 asks the broker for its default.replication.factor.
    assert make_app_config(application_id="a", bootstrap_servers="h:1").replication_factor == -1
    cfg = AppConfig.model_validate(
        {"application.id": "a", "bootstrap.servers": "h:1", "replication.factor": 3}
    )
    assert cfg.replication_factor == 3


@pytest.mark.parametrize("factor", [0, -2, -100])
def test_replication_factor_refuses_zero_and_below_minus_one(factor: int) -> None:
    with pytest.raises(ConfigError, match=r"replication_factor.*must be -1 \(the broker's default"):
        make_app_config(application_id="a", bootstrap_servers="h:1", replication_factor=factor)


def test_exactly_once_v2_reads_committed_on_every_group_protocol() -> None:
    cfg = AppConfig.model_validate(
        {"application.id": "a", "bootstrap.servers": "h:1", "processing.guarantee": "exactly_once_v2"}
    )
    assert cfg.exactly_once
    assert cfg.transaction_timeout_ms == 10_000  # Kafka Streams' default under exactly-once
    assert cfg.consumer_settings()["isolation_level"] == "read_committed"
    at_least_once = make_app_config(application_id="a", bootstrap_servers="h:1")
    assert not at_least_once.exactly_once
    assert at_least_once.consumer_settings()["isolation_level"] == "read_uncommitted"
    # the streamtasks coordinator that serves group_protocol="consumer" takes TxnOffsetCommit
    on_the_coordinator = make_app_config(
        application_id="a",
        bootstrap_servers="h:1",
        processing_guarantee="exactly_once_v2",
        group_protocol="consumer",
    )
    assert on_the_coordinator.exactly_once
    assert on_the_coordinator.consumer_settings()["isolation_level"] == "read_committed"
    with pytest.raises(ConfigError, match="processing"):
        make_app_config(application_id="a", bootstrap_servers="h:1", processing_guarantee="exactly_once")
