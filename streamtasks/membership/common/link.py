"""A member's link to its group coordinator, as every member keeps it: :class:`CoordinatorLink`.

Whether the coordinator is known, the lookup (FindCoordinator, backing off with failures in a
row), when the coordinator was last heard from and when the next heartbeat is due. Each protocol
keeps these in its own frozen ``Link`` record (with what only it times: the classic member's
JoinGroup retry, the KIP-848 member's heartbeat interval); :class:`CoordinatorLink` is that
record's one owner (h11's rule) and emits the lookup through the member's
:class:`~.kernel.Kernel`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from streamtasks.membership.common.kernel import Kernel
from streamtasks.membership.common.requests import lookup_backoff_ms

__all__ = ["CoordinatorLink", "LinkFields", "LookupTiming"]


class LinkFields(Protocol):
    """What every protocol's ``Link`` record holds (a frozen dataclass)."""

    __dataclass_fields__: ClassVar[dict[str, Any]]

    @property
    def coordinator_known(self) -> bool: ...
    @property
    def find_retry_ms(self) -> int: ...
    @property
    def find_failures(self) -> int: ...
    @property
    def hb_next_ms(self) -> int: ...
    @property
    def hb_last_ok_ms(self) -> int: ...


class LookupTiming(Protocol):
    """The settings the link reads (each member's config has them)."""

    @property
    def group_id(self) -> str: ...
    @property
    def request_timeout_ms(self) -> int: ...
    @property
    def retry_backoff_ms(self) -> int: ...
    @property
    def retry_backoff_max_ms(self) -> int: ...


LinkT = TypeVar("LinkT", bound=LinkFields)


class CoordinatorLink(Generic[LinkT]):
    """The coordinator and the member's timers towards it (``record``, read-only)."""

    __slots__ = ("_config", "_k", "_record", "_silent")

    def __init__(self, record: LinkT, config: LookupTiming, kernel: Kernel[Any, Any, Any, Any]) -> None:
        self._record = record
        self._config = config
        self._k = kernel
        #: The coordinator was lost to silence; the next lookup says so (``FindCoordinator.silent``).
        self._silent = False

    @property
    def record(self) -> LinkT:
        return self._record

    @property
    def known(self) -> bool:
        """Whether a lookup found the coordinator and it was not lost since."""
        return self._record.coordinator_known

    def change(self, **fields: Any) -> None:
        """Set the protocol's own timers (``join_retry_ms``, ``interval_ms``, ...)."""
        self._record = replace(self._record, **fields)

    def lookup(self, now_ms: int, generation: int) -> None:
        """Send a FindCoordinator, unless one is in flight or the backoff is not over."""
        if not self._k.requests.finds_in_flight() and now_ms >= self._record.find_retry_ms:
            deadline = now_ms + self._config.request_timeout_ms
            self._k.find(self._config.group_id, deadline, generation, silent=self._silent)
            self._silent = False

    def lookup_failed(self, now_ms: int) -> None:
        """A FindCoordinator failed: the next one after a backoff growing with failures in a row."""
        c = self._config
        failures = self._record.find_failures + 1
        wait = lookup_backoff_ms(c.retry_backoff_ms, c.retry_backoff_max_ms, failures)
        self.change(find_retry_ms=now_ms + wait, find_failures=failures)

    def found(self, now_ms: int, **fields: Any) -> None:
        """The coordinator is known: heartbeat at once."""
        self.change(coordinator_known=True, find_failures=0, hb_next_ms=now_ms, **fields)

    def lost(self, now_ms: int, *, silent: bool = False, **fields: Any) -> None:
        """The coordinator is unknown: look it up again after the backoff. ``silent``: it
        answered nothing in time (a request timed out, the session lapsed), and the lookup
        tells the driver to drop its connection (``FindCoordinator.silent``)."""
        retry = now_ms + self._config.retry_backoff_ms
        self._silent = self._silent or (silent and self._record.coordinator_known)
        self.change(coordinator_known=False, find_retry_ms=retry, **fields)

    def heard(self, now_ms: int) -> None:
        """The coordinator answered a heartbeat (or a join) at ``now_ms``."""
        self.change(hb_last_ok_ms=now_ms)

    def beat_at(self, at_ms: int) -> None:
        """The next heartbeat is due at ``at_ms``."""
        self.change(hb_next_ms=at_ms)

    def beat_by(self, at_ms: int) -> None:
        """The next heartbeat is due at ``at_ms`` at the latest."""
        self.change(hb_next_ms=min(self._record.hb_next_ms, at_ms))

    def silent(self, now_ms: int, timeout_ms: int) -> bool:
        """Whether no heartbeat was answered for longer than ``timeout_ms``."""
        return now_ms - self._record.hb_last_ok_ms > timeout_ms
