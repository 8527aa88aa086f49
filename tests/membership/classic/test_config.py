"""MemberConfig validation and KIP-429's protocol selection across assignors."""

from __future__ import annotations

import pytest

from assignors.partition.range import RangeAssignor
from assignors.partition.sticky import CooperativeStickyAssignor, StickyAssignor
from assignors.partition.types import RebalanceProtocol
from streamtasks.errors import ConfigError
from streamtasks.membership.classic import select_protocol
from tests.membership.classic.helpers import config


def test_protocol_is_the_highest_common_to_every_assignor() -> None:
    assert select_protocol((CooperativeStickyAssignor(),)) is RebalanceProtocol.COOPERATIVE
    assert select_protocol((CooperativeStickyAssignor(), RangeAssignor())) is RebalanceProtocol.EAGER
    assert select_protocol((StickyAssignor(),)) is RebalanceProtocol.EAGER
    assert (
        config(assignors=(CooperativeStickyAssignor(), RangeAssignor())).protocol is RebalanceProtocol.EAGER
    )


def test_no_common_protocol_is_a_config_error() -> None:
    class CoopOnly:
        name = "coop_only"
        version = 0

        def supported_protocols(self) -> tuple[RebalanceProtocol, ...]:
            return (RebalanceProtocol.COOPERATIVE,)

        def assign(self, group: object) -> object:
            raise NotImplementedError

    with pytest.raises(ConfigError, match="no rebalance protocol in common"):
        config(assignors=(CoopOnly(), RangeAssignor()))


@pytest.mark.parametrize(
    "kw",
    [
        {"group_id": ""},
        {"session_timeout_ms": 0},
        {"heartbeat_interval_ms": 10_000, "session_timeout_ms": 10_000},
        {"retry_backoff_ms": -1},
        {"group_instance_id": ""},
        {"assignors": (RangeAssignor(), RangeAssignor())},
    ],
)
def test_bad_config_is_refused(kw: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        config(**kw)


def test_no_assignor_is_refused() -> None:
    with pytest.raises(ConfigError):
        select_protocol(())


def test_topics_are_sorted_and_deduplicated() -> None:
    assert config(topics=("b", "a", "b")).topics == ("a", "b")
