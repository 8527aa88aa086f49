"""``upgrade_from``: safe rolling upgrades in two bounces (KIP-429's Streams upgrade path).

streamtasks' release history, as far as the wire is concerned:

=========  ================  ===========  =================================================
release    userdata version  rebalancing  what changed
=========  ================  ===========  =================================================
0.1        1                 EAGER        first release: previous active/standby task sets
0.2        2                 EAGER        task offset sums, endpoint, capacity
0.3        2                 COOPERATIVE  cooperative rebalancing (KIP-429)
0.4        3                 COOPERATIVE  rack, client tags, topology fingerprint, error code
=========  ================  ===========  =================================================

Upgrading from release R: first bounce with ``upgrade_from=R`` (new code subscribes with R's
userdata version, and stays EAGER when R predates cooperative rebalancing, so an old leader
never sees a member that kept its partitions); second bounce without ``upgrade_from``. Once
every member runs the new code, version probing moves the group to the latest userdata version
by itself (the subscriptions still advertise the latest supported version).

The table is :data:`RELEASES`. A drill *emulates* release R (:func:`resolve_release`, the
App's ``emulate_release``): R's userdata version is then also the newest the process reads,
writes and advertises, as a leader and as a member, which ``upgrade_from=R`` does not pin (that
is the new code joining a group of R members). That is what an old leader meeting a newer member
needs: the one-bounce version-probing path.

``upgrade_from="faust"`` moves a running faust-streaming app onto streamtasks: the first
bounce's members advertise faust's ``"faust"`` assignor protocol first and streamtasks' second,
so the group keeps running faust's assignment (EAGER) while old members remain; the second
bounce advertises only ``"streamtasks"``, which the coordinator then has to select.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from assignors.partition.types import RebalanceProtocol
from streamtasks.errors import ConfigError, LocalProtocolError
from streamtasks.protocol.consumer_protocol import ConsumerProtocolSubscription, encode_subscription
from streamtasks.protocol.faust_compat import (
    FAUST_PROTOCOL_NAME,
    FaustClientMetadata,
    FaustSubscription,
    encode_faust_subscription,
)
from streamtasks.protocol.userdata import LATEST_VERSION, SubscriptionInfo, encode_subscription_info
from topology.ids import TopicPartition

__all__ = [
    "ACCEPTED_UPGRADE_FROM",
    "CURRENT_RELEASE",
    "NO_UPGRADE",
    "RELEASES",
    "STREAMTASKS_PROTOCOL_NAME",
    "UPGRADE_FROM_TABLE",
    "Release",
    "UpgradeFrom",
    "advertised_protocols",
    "resolve_release",
    "resolve_upgrade_from",
]

#: The assignor protocol name streamtasks members advertise in JoinGroup.
STREAMTASKS_PROTOCOL_NAME = "streamtasks"
#: The release this code is, in the history above.
CURRENT_RELEASE = "0.4"


@dataclass(frozen=True, slots=True, kw_only=True)
class Release:
    """One streamtasks release as the wire sees it (the table in the module docstring)."""

    name: str
    #: The newest userdata version it reads, writes and advertises.
    latest_version: int
    #: The newest rebalance protocol it supports.
    protocol: RebalanceProtocol
    note: str = ""


#: Every release, oldest first; the last is this code.
RELEASES: tuple[Release, ...] = (
    Release(
        name="0.1",
        latest_version=1,
        protocol=RebalanceProtocol.EAGER,
        note="0.1 knows userdata v1 and eager rebalancing only",
    ),
    Release(
        name="0.2",
        latest_version=2,
        protocol=RebalanceProtocol.EAGER,
        note="0.2 knows userdata v2 and eager rebalancing only",
    ),
    Release(
        name="0.3",
        latest_version=2,
        protocol=RebalanceProtocol.COOPERATIVE,
        note="0.3 knows userdata v2 and cooperative rebalancing",
    ),
    Release(
        name=CURRENT_RELEASE,
        latest_version=LATEST_VERSION,
        protocol=RebalanceProtocol.COOPERATIVE,
        note="this code",
    ),
)
_RELEASE_BY_NAME = {r.name: r for r in RELEASES}


def resolve_release(name: str) -> Release:
    """The release called ``name``; unknown → ConfigError listing the known ones."""
    release = _RELEASE_BY_NAME.get(name)
    if release is None:
        raise ConfigError(f"no streamtasks release {name!r}; known: {', '.join(map(repr, _RELEASE_BY_NAME))}")
    return release


@dataclass(frozen=True, slots=True, kw_only=True)
class UpgradeFrom:
    """One accepted ``upgrade_from`` value and what it pins."""

    value: str | None
    metadata_version: int
    protocol: RebalanceProtocol
    #: Also advertise faust's assignor protocol, preferred over streamtasks'.
    advertise_faust: bool = False
    note: str = ""

    @property
    def supported_protocols(self) -> tuple[RebalanceProtocol, ...]:
        """What the streamtasks assignor claims (``PartitionAssignor.supported_protocols()``)."""
        if self.protocol is RebalanceProtocol.EAGER:
            return (RebalanceProtocol.EAGER,)
        return (RebalanceProtocol.EAGER, RebalanceProtocol.COOPERATIVE)


#: No upgrade in progress: latest userdata, cooperative rebalancing.
NO_UPGRADE = UpgradeFrom(
    value=None,
    metadata_version=LATEST_VERSION,
    protocol=RebalanceProtocol.COOPERATIVE,
    note="no upgrade in progress",
)

#: Every accepted value, oldest first: each release before this one pins its own wire.
UPGRADE_FROM_TABLE: tuple[UpgradeFrom, ...] = (
    *(
        UpgradeFrom(value=r.name, metadata_version=r.latest_version, protocol=r.protocol, note=r.note)
        for r in RELEASES
        if r.name != CURRENT_RELEASE
    ),
    UpgradeFrom(
        value="faust",
        metadata_version=LATEST_VERSION,
        protocol=RebalanceProtocol.EAGER,
        advertise_faust=True,
        note="a faust-streaming app: advertise faust's 'faust' assignor first; faust is eager-only",
    ),
)

ACCEPTED_UPGRADE_FROM: tuple[str, ...] = tuple(str(e.value) for e in UPGRADE_FROM_TABLE)
_BY_VALUE = {e.value: e for e in UPGRADE_FROM_TABLE}


def resolve_upgrade_from(value: str | None) -> UpgradeFrom:
    """The table entry for ``value`` (``None`` → :data:`NO_UPGRADE`); unknown → ConfigError."""
    if value is None:
        return NO_UPGRADE
    entry = _BY_VALUE.get(value)
    if entry is None:
        raise ConfigError(
            f"upgrade_from={value!r} is not accepted; use one of "
            f"{', '.join(map(repr, ACCEPTED_UPGRADE_FROM))} (the release the running members have), "
            "or leave it unset"
        )
    return entry


def advertised_protocols(
    upgrade_from: str | UpgradeFrom | None,
    *,
    topics: Iterable[str],
    info: SubscriptionInfo,
    owned_partitions: Iterable[TopicPartition] = (),
    generation_id: int = -1,
    rack_id: str | None = None,
    used_version: int | None = None,
    faust_metadata: FaustClientMetadata | None = None,
) -> tuple[tuple[str, bytes], ...]:
    """The ``(protocol name, metadata)`` pairs for JoinGroup, most preferred first.

    The streamtasks entry is a consumer protocol v3 subscription whose userdata is ``info`` at
    ``used_version`` (default: the version ``upgrade_from`` pins; after version probing the
    member passes what :func:`~streamtasks.protocol.probing.on_assignment_version` returned).
    With ``upgrade_from="faust"`` a faust subscription built from ``faust_metadata`` comes first.
    Under EAGER the caller passes no owned partitions (it revoked them before joining).
    """
    entry = upgrade_from if isinstance(upgrade_from, UpgradeFrom) else resolve_upgrade_from(upgrade_from)
    topic_tuple = tuple(topics)
    version = entry.metadata_version if used_version is None else used_version
    streamtasks = encode_subscription(
        ConsumerProtocolSubscription(
            topics=topic_tuple,
            user_data=encode_subscription_info(info, version),
            owned_partitions=tuple(owned_partitions),
            generation_id=generation_id,
            rack_id=rack_id,
        )
    )
    if not entry.advertise_faust:
        return ((STREAMTASKS_PROTOCOL_NAME, streamtasks),)
    if faust_metadata is None:
        raise LocalProtocolError("upgrade_from='faust' needs faust_metadata (faust's ClientMetadata) to join")
    faust = encode_faust_subscription(FaustSubscription(topics=topic_tuple, metadata=faust_metadata))
    return ((FAUST_PROTOCOL_NAME, faust), (STREAMTASKS_PROTOCOL_NAME, streamtasks))
