"""The simulated network between member processes and the group coordinator.

Each member has one link to the coordinator, one queue per direction. A message gets a random
delay within the link's profile; a link is FIFO like the TCP connection it stands for (a
message is never delivered before one sent earlier on the same direction). Faults: message
loss, duplication, and partitions that cut a member off from the whole cluster for a while
(messages sent or in flight during the cut are dropped). Pausing a process (KIP-341's debugger
scenario) is the world's business, not the network's: the wire still works, the process does
not read it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from streamtasks.errors import ConfigError

__all__ = ["Direction", "LinkProfile", "Network", "NetworkStats"]

#: ``"up"``: member → coordinator; ``"down"``: coordinator → member.
Direction = str


@dataclass(frozen=True, slots=True, kw_only=True)
class LinkProfile:
    """Per-message delay range and fault probabilities of a link."""

    min_delay_ms: int = 1
    max_delay_ms: int = 5
    loss: float = 0.0
    duplication: float = 0.0

    def __post_init__(self) -> None:
        if not 0 <= self.min_delay_ms <= self.max_delay_ms:
            raise ConfigError(f"need 0 <= min_delay_ms <= max_delay_ms, got {self}")
        for name, p in (("loss", self.loss), ("duplication", self.duplication)):
            if not 0.0 <= p < 1.0:
                raise ConfigError(f"{name} must be in [0, 1), got {p}")


@dataclass(slots=True)
class NetworkStats:
    sent: int = 0
    delivered: int = 0
    lost: int = 0
    duplicated: int = 0
    cut: int = 0
    by_kind: dict[str, int] = field(default_factory=dict)


class Network:
    """Decides when (and whether) each message arrives. Uses only the ``rng`` it is given."""

    def __init__(self, rng: random.Random, default: LinkProfile | None = None) -> None:
        self._rng = rng
        self.default = default or LinkProfile()
        self._override: LinkProfile | None = None
        self._override_until = 0
        self._cut_until: dict[str, int] = {}
        self._last: dict[tuple[str, Direction], int] = {}
        self.stats = NetworkStats()

    # -- faults -----------------------------------------------------------------------------

    def degrade(self, profile: LinkProfile, until_ms: int) -> None:
        """Every link uses ``profile`` until ``until_ms``."""
        self._override = profile
        self._override_until = until_ms

    def partition(self, member: str, until_ms: int) -> None:
        """Cut ``member`` off from the cluster until ``until_ms``."""
        self._cut_until[member] = max(self._cut_until.get(member, 0), until_ms)

    def is_cut(self, member: str, now_ms: int) -> bool:
        return self._cut_until.get(member, 0) > now_ms

    def faults_active(self, now_ms: int) -> bool:
        return self._override_until > now_ms or any(t > now_ms for t in self._cut_until.values())

    def profile(self, now_ms: int) -> LinkProfile:
        if self._override is not None and now_ms < self._override_until:
            return self._override
        return self.default

    # -- transmission -----------------------------------------------------------------------

    def transmit(self, member: str, direction: Direction, now_ms: int, kind: str = "") -> list[int]:
        """Delivery times for one message (empty: dropped; two: duplicated)."""
        stats = self.stats
        stats.sent += 1
        if kind:
            stats.by_kind[kind] = stats.by_kind.get(kind, 0) + 1
        if self.is_cut(member, now_ms):
            stats.cut += 1
            return []
        profile = self.profile(now_ms)
        if profile.loss and self._rng.random() < profile.loss:
            stats.lost += 1
            return []
        key = (member, direction)
        at = max(
            now_ms + self._rng.randint(profile.min_delay_ms, profile.max_delay_ms), self._last.get(key, 0)
        )
        self._last[key] = at
        times = [at]
        if profile.duplication and self._rng.random() < profile.duplication:
            stats.duplicated += 1
            again = at + self._rng.randint(profile.min_delay_ms, profile.max_delay_ms)
            self._last[key] = again
            times.append(again)
        return times

    def arrives(self, member: str, now_ms: int) -> bool:
        """Whether a message in flight survives to ``now_ms`` (a cut drops it)."""
        if self.is_cut(member, now_ms):
            self.stats.cut += 1
            return False
        self.stats.delivered += 1
        return True

    def round_trip_ms(self, now_ms: int) -> int:
        profile = self.profile(now_ms)
        return 2 * self._rng.randint(profile.min_delay_ms, profile.max_delay_ms)
