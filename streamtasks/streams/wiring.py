"""What an App's upgrade settings pin on the wire, and the streams assignor class that follows
(pure): ``upgrade_from`` and ``emulate_release`` (:mod:`streamtasks.protocol.upgrade`) become the
rebalance protocol, the userdata version the first subscription is encoded at, the newest
userdata version the process speaks, and whether it also offers faust's protocol.

:class:`streamtasks.App` builds its assignors from this, and so does the simulator's App model
(:mod:`streamtasks.sim.apps`), so a simulated member's wire is the live App's.
"""

from __future__ import annotations

from dataclasses import dataclass

from assignors.partition.types import RebalanceProtocol
from streamtasks.protocol.upgrade import resolve_release, resolve_upgrade_from
from streamtasks.protocol.userdata import LATEST_VERSION
from streamtasks.streams.assignor import StreamsPartitionAssignor

__all__ = ["EagerStreamsPartitionAssignor", "StreamsWire", "streams_assignor_type", "streams_wire"]


class EagerStreamsPartitionAssignor(StreamsPartitionAssignor):
    """The streams assignor pinned to EAGER (``upgrade_from`` a release before 0.3, or faust)."""

    def supported_protocols(self) -> tuple[RebalanceProtocol, ...]:
        return (RebalanceProtocol.EAGER,)


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsWire:
    """What a process's upgrade settings pin."""

    #: The newest rebalance protocol its streams assignor claims.
    protocol: RebalanceProtocol
    #: The userdata version its first subscription is encoded at (None: :attr:`latest_version`).
    metadata_version: int | None
    #: The newest userdata version it reads, writes and advertises.
    latest_version: int
    #: Offer faust's ``"faust"`` protocol first (``upgrade_from="faust"``).
    advertise_faust: bool


def streams_wire(upgrade_from: str | None, emulate_release: str | None) -> StreamsWire:
    """The wire of a process configured with ``upgrade_from`` / ``emulate_release`` (unknown
    values raise :class:`~streamtasks.errors.ConfigError`)."""
    upgrade = resolve_upgrade_from(upgrade_from)
    protocol, latest = upgrade.protocol, LATEST_VERSION
    if emulate_release is not None:
        release = resolve_release(emulate_release)
        protocol, latest = release.protocol, release.latest_version
    return StreamsWire(
        protocol=protocol,
        metadata_version=None if upgrade_from is None else upgrade.metadata_version,
        latest_version=latest,
        advertise_faust=upgrade.advertise_faust,
    )


def streams_assignor_type(protocol: RebalanceProtocol) -> type[StreamsPartitionAssignor]:
    """The streams assignor class for ``protocol`` (:attr:`StreamsWire.protocol`)."""
    return EagerStreamsPartitionAssignor if protocol is RebalanceProtocol.EAGER else StreamsPartitionAssignor
