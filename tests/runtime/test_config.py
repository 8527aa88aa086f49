from __future__ import annotations

import pytest

from streamtasks.errors import ConfigError
from streamtasks.membership.classic import ClassicMember
from streamtasks.runtime.config import make_config
from streamtasks.runtime.consumer import Consumer


def test_python_and_kafka_names_build_the_same_config() -> None:
    a = make_config(bootstrap_servers="h:1", group_id="g", session_timeout_ms=6000, assignors=["range"])
    b = make_config(
        {
            "bootstrap.servers": "h:1",
            "group.id": "g",
            "session.timeout.ms": 6000,
            "partition.assignment.strategy": "org.apache.kafka.clients.consumer.RangeAssignor",
        }
    )
    assert a == b
    assert a.assignors == ("range",)


def test_kafka_assignor_list_maps_to_streamtasks_names() -> None:
    cfg = make_config(
        {
            "bootstrap.servers": "h:1",
            "group.id": "g",
            "partition.assignment.strategy": "cooperative-sticky, range",
        }
    )
    assert cfg.assignors == ("cooperative_sticky", "range")


def test_defaults_follow_kafka() -> None:
    cfg = make_config(bootstrap_servers="h:1", group_id="g")
    assert cfg.session_timeout_ms == 45_000
    assert cfg.heartbeat_interval_ms == 3_000
    assert cfg.rebalance_timeout_ms == 300_000
    assert cfg.auto_offset_reset == "latest"
    assert cfg.lose_on_missed_generation is True


def test_the_missed_generation_rule_can_be_turned_off_for_tansu() -> None:
    cfg = {"bootstrap.servers": "h:1", "group.id": "g", "lose.on.missed.generation": False}
    assert make_config(cfg).lose_on_missed_generation is False
    member = Consumer(["t"], config=cfg)._member
    assert isinstance(member, ClassicMember)
    assert member.config.lose_on_missed_generation is False


def test_config_is_frozen() -> None:
    cfg = make_config(bootstrap_servers="h:1", group_id="g")
    with pytest.raises(ValueError, match="frozen"):
        cfg.group_id = "other"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"group_id": "g"}, "bootstrap.servers"),
        ({"bootstrap_servers": "h:1", "group_id": ""}, "group.id"),
        ({"bootstrap_servers": "h:1", "group_id": "g", "session_timeout_ms": 5}, "session.timeout.ms"),
        (
            {
                "bootstrap_servers": "h:1",
                "group_id": "g",
                "heartbeat_interval_ms": 9000,
                "session_timeout_ms": 6000,
            },
            "must be lower than session.timeout.ms",
        ),
        (
            {"bootstrap_servers": "h:1", "group_id": "g", "auto_offset_reset": "sometimes"},
            "auto.offset.reset",
        ),
        ({"bootstrap_servers": "h:1", "group_id": "g", "fetch.everything": True}, "fetch.everything"),
        ({"bootstrap_servers": "h:1", "group_id": "g", "assignors": ["range", "range"]}, "twice"),
    ],
)
def test_invalid_values_are_config_errors(values: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        make_config(values)
