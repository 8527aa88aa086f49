"""Version probing: which userdata version the group speaks, decided from headers alone.

Leader side (:func:`negotiate`), over every member's ``(version, latest_supported_version)``:

* ``min_received`` = the lowest version any member sent; ``min_latest`` = the lowest latest
  version any member supports;
* assignments are encoded at ``used_version = min(min_received, my_latest)`` and carry
  ``common_latest = min(min_latest, my_latest)`` as their ``latest_supported_version``;
* a member that sent a version newer than ``my_latest`` (a *future* member) is still given an
  assignment, at ``used_version``, treated as a member without previous tasks; the round is
  version probing and needs a follow-up rebalance;
* when ``used_version < common_latest`` every member can move up, so a follow-up is due too;
* a member that sent a version below ``min_supported`` (or supports none that high) makes the
  round fail with :class:`~streamtasks.errors.UnsupportedVersionError` naming it.

Member side (:func:`on_assignment_version`): with ``received`` the assignment's version and
``common_latest`` its ``latest_supported_version``, the member moves its used version to
``common_latest`` when that is above what it used (upgrade: everyone speaks it now) or when the
assignment came at a lower version than it sent (downgrade: someone older is in the group), and
asks for a follow-up rebalance (``enforce_rebalance``) exactly when its version changed.

KIP-848 client-side assignors see a ``MetadataVersion`` per member; a member translated from the
classic protocol reports -1 there (:func:`metadata_version`), and the userdata header decides.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from streamtasks.errors import AssignorInputError, DecodeError, RemoteProtocolError, UnsupportedVersionError
from streamtasks.protocol._buf import INT32_MAX
from streamtasks.protocol.userdata import LATEST_VERSION, MIN_SUPPORTED_VERSION, peek_version

__all__ = [
    "UNKNOWN_METADATA_VERSION",
    "MemberVersionUpdate",
    "ProbingDecision",
    "metadata_version",
    "negotiate",
    "on_assignment_version",
]

#: KIP-848: the ``MetadataVersion`` of an assignor entry converted from a classic JoinGroup.
UNKNOWN_METADATA_VERSION = -1


@dataclass(frozen=True, slots=True, kw_only=True)
class ProbingDecision:
    """The leader's verdict for one rebalance."""

    #: Version to encode every member's AssignmentInfo at.
    used_version: int
    #: ``latest_supported_version`` to write into every AssignmentInfo.
    common_latest: int
    min_received_version: int
    min_latest_supported: int
    #: Members (sorted) that sent a version newer than the leader's latest.
    future_members: tuple[str, ...] = ()
    #: Members (sorted) that sent a version below ``common_latest``: they will move up.
    outdated_members: tuple[str, ...] = ()

    @property
    def version_probing(self) -> bool:
        return bool(self.future_members)

    @property
    def upgrade_pending(self) -> bool:
        return self.used_version < self.common_latest

    @property
    def followup_needed(self) -> bool:
        """Members will change their subscription version, so the group must rebalance again."""
        return self.version_probing or self.upgrade_pending

    def is_future(self, member_id: str) -> bool:
        return member_id in self.future_members


def negotiate(
    subscriptions: Mapping[str, tuple[int, int]],
    my_latest: int = LATEST_VERSION,
    *,
    min_supported: int = MIN_SUPPORTED_VERSION,
) -> ProbingDecision:
    """Decide the group's userdata version from ``member id -> (version, latest_supported)``."""
    if not subscriptions:
        raise AssignorInputError("version negotiation needs at least one member subscription")
    if not 1 <= min_supported <= my_latest:
        raise AssignorInputError(f"need 1 <= min_supported ({min_supported}) <= my_latest ({my_latest})")
    min_received = min_latest = INT32_MAX
    future: list[str] = []
    for member in sorted(subscriptions):
        version, latest = subscriptions[member]
        if version < min_supported or latest < min_supported:
            raise UnsupportedVersionError(
                f"member {member!r} sent streamtasks metadata version {version} (latest supported "
                f"{latest}); this leader handles versions {min_supported}..{my_latest}. Upgrade that "
                "member, or roll back this one with upgrade_from set to its release"
            )
        if latest < version:
            raise RemoteProtocolError(
                f"member {member!r} claims version {version} but latest supported {latest}"
            )
        if version > my_latest:
            future.append(member)
        min_received = min(min_received, version)
        min_latest = min(min_latest, latest)
    used = min(min_received, my_latest)
    common = min(min_latest, my_latest)
    outdated = tuple(m for m in sorted(subscriptions) if subscriptions[m][0] < common)
    return ProbingDecision(
        used_version=used,
        common_latest=common,
        min_received_version=min_received,
        min_latest_supported=min_latest,
        future_members=tuple(future),
        outdated_members=outdated,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberVersionUpdate:
    """The member's next subscription version and whether it must rejoin to send it."""

    new_used_version: int
    enforce_rebalance: bool


def on_assignment_version(
    used_version: int,
    received_version: int,
    common_latest: int,
    my_latest: int = LATEST_VERSION,
) -> MemberVersionUpdate:
    """Member side of probing, after decoding the assignment's header.

    Raises :class:`RemoteProtocolError` when the leader broke the rules: an assignment newer
    than the subscription, a common version above this member's latest, or below the
    assignment's own version.
    """
    if received_version > used_version:
        raise RemoteProtocolError(
            f"sent a version {used_version} subscription but got a version {received_version} assignment"
        )
    if common_latest > my_latest:
        raise RemoteProtocolError(
            f"leader claims the group supports version {common_latest}; "
            f"this member supports up to {my_latest}"
        )
    if common_latest < received_version:
        raise RemoteProtocolError(
            f"assignment version {received_version} is above its commonly supported version {common_latest}"
        )
    if common_latest > used_version or received_version < used_version:
        return MemberVersionUpdate(
            new_used_version=common_latest, enforce_rebalance=common_latest != used_version
        )
    return MemberVersionUpdate(new_used_version=used_version, enforce_rebalance=False)


def metadata_version(declared: int, metadata: bytes) -> int:
    """The userdata version of a KIP-848 assignor entry.

    ``declared`` is the entry's ``MetadataVersion``; -1 (a member translated from the classic
    protocol during an online migration) means "unknown": the userdata header tells. Any other
    value must match the header.
    """
    version, _ = peek_version(metadata)
    if declared not in (UNKNOWN_METADATA_VERSION, version):
        raise DecodeError(
            f"assignor metadata declares version {declared} but its userdata is version {version}"
        )
    return version
