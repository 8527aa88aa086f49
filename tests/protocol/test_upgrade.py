"""The upgrade_from table and the protocols a member advertises in JoinGroup."""

from __future__ import annotations

import uuid

import pytest

from assignors.partition.types import RebalanceProtocol
from streamtasks.errors import ConfigError, LocalProtocolError
from streamtasks.protocol import (
    ACCEPTED_UPGRADE_FROM,
    CURRENT_RELEASE,
    FAUST_PROTOCOL_NAME,
    LATEST_VERSION,
    NO_UPGRADE,
    RELEASES,
    STREAMTASKS_PROTOCOL_NAME,
    UPGRADE_FROM_TABLE,
    FaustClientMetadata,
    SubscriptionInfo,
    UpgradeFrom,
    advertised_protocols,
    decode_faust_subscription,
    decode_subscription,
    decode_subscription_info,
    peek_version,
    resolve_release,
    resolve_upgrade_from,
)
from topology.ids import TaskId, TopicPartition

EAGER, COOPERATIVE = RebalanceProtocol.EAGER, RebalanceProtocol.COOPERATIVE
INFO = SubscriptionInfo(process_id=uuid.UUID(int=9), task_offset_sums={TaskId(0, 1): 42}, endpoint="h:1")


@pytest.mark.parametrize(
    ("value", "metadata_version", "protocol", "faust"),
    [
        (None, LATEST_VERSION, COOPERATIVE, False),
        ("0.1", 1, EAGER, False),
        ("0.2", 2, EAGER, False),
        ("0.3", 2, COOPERATIVE, False),
        ("faust", LATEST_VERSION, EAGER, True),
    ],
)
def test_table(value: str | None, metadata_version: int, protocol: RebalanceProtocol, faust: bool) -> None:
    entry = resolve_upgrade_from(value)
    assert entry.metadata_version == metadata_version
    assert entry.protocol is protocol
    assert entry.advertise_faust is faust


def test_releases_before_cooperative_support_force_eager() -> None:
    assert resolve_upgrade_from("0.1").supported_protocols == (EAGER,)
    assert resolve_upgrade_from("0.2").supported_protocols == (EAGER,)
    assert resolve_upgrade_from("0.3").supported_protocols == (EAGER, COOPERATIVE)
    assert NO_UPGRADE.supported_protocols == (EAGER, COOPERATIVE)


def test_accepted_values_are_the_table() -> None:
    assert ACCEPTED_UPGRADE_FROM == ("0.1", "0.2", "0.3", "faust")
    assert [e.value for e in UPGRADE_FROM_TABLE] == list(ACCEPTED_UPGRADE_FROM)
    versions = [e.metadata_version for e in UPGRADE_FROM_TABLE if e.value != "faust"]
    assert versions == sorted(versions)  # releases are listed oldest first


def test_releases_oldest_first_end_with_this_code() -> None:
    assert [(r.name, r.latest_version, r.protocol) for r in RELEASES] == [
        ("0.1", 1, EAGER),
        ("0.2", 2, EAGER),
        ("0.3", 2, COOPERATIVE),
        (CURRENT_RELEASE, LATEST_VERSION, COOPERATIVE),
    ]
    assert resolve_release("0.3") is RELEASES[2]


def test_upgrade_from_a_release_pins_what_that_release_speaks() -> None:
    for release in RELEASES[:-1]:
        entry = resolve_upgrade_from(release.name)
        assert (entry.metadata_version, entry.protocol) == (release.latest_version, release.protocol)


@pytest.mark.parametrize("name", ["0.5", "", "faust", "v0.3"])
def test_unknown_release_is_a_config_error_listing_the_known(name: str) -> None:
    with pytest.raises(ConfigError) as info:
        resolve_release(name)
    for release in RELEASES:
        assert repr(release.name) in str(info.value)


@pytest.mark.parametrize("value", ["0.4", "2.3", "", "FAUST", " 0.1"])
def test_unknown_value_is_a_config_error_listing_accepted_values(value: str) -> None:
    with pytest.raises(ConfigError) as info:
        resolve_upgrade_from(value)
    for accepted in ACCEPTED_UPGRADE_FROM:
        assert repr(accepted) in str(info.value)


@pytest.mark.parametrize("value", [None, "0.1", "0.2", "0.3"])
def test_streamtasks_only_protocol_pins_the_version(value: str | None) -> None:
    protocols = advertised_protocols(
        value, topics=["b", "a"], info=INFO, owned_partitions=[TopicPartition("a", 0)], generation_id=4
    )
    assert [name for name, _ in protocols] == [STREAMTASKS_PROTOCOL_NAME]
    sub = decode_subscription(protocols[0][1])
    assert sub.version == 3
    assert (sub.topics, sub.generation_id) == (("a", "b"), 4)
    assert sub.user_data is not None
    version, latest = peek_version(sub.user_data)
    assert version == resolve_upgrade_from(value).metadata_version
    assert latest == LATEST_VERSION  # so probing can move everyone up once all run new code
    assert decode_subscription_info(sub.user_data).process_id == INFO.process_id


def test_used_version_from_probing_overrides_the_pin() -> None:
    ((_, data),) = advertised_protocols("0.1", topics=["t"], info=INFO, used_version=3)
    sub = decode_subscription(data)
    assert sub.user_data is not None
    assert peek_version(sub.user_data) == (3, 3)


def test_faust_advertises_faust_first_then_streamtasks() -> None:
    meta = FaustClientMetadata(url="http://app-1:6066/", actives={"orders": (0, 2)})
    protocols = advertised_protocols("faust", topics=["orders"], info=INFO, faust_metadata=meta)
    assert [name for name, _ in protocols] == [FAUST_PROTOCOL_NAME, STREAMTASKS_PROTOCOL_NAME]
    faust_sub = decode_faust_subscription(protocols[0][1])
    assert faust_sub.version == 4
    assert faust_sub.topics == ("orders",)
    assert faust_sub.metadata == meta
    streamtasks_sub = decode_subscription(protocols[1][1])
    assert streamtasks_sub.user_data is not None
    assert peek_version(streamtasks_sub.user_data)[0] == LATEST_VERSION


def test_faust_needs_faust_metadata() -> None:
    with pytest.raises(LocalProtocolError, match="faust_metadata"):
        advertised_protocols("faust", topics=["t"], info=INFO)


def test_an_entry_can_be_passed_directly() -> None:
    custom = UpgradeFrom(value="x", metadata_version=2, protocol=EAGER)
    ((_, data),) = advertised_protocols(custom, topics=["t"], info=INFO)
    user_data = decode_subscription(data).user_data
    assert user_data is not None
    assert peek_version(user_data)[0] == 2
