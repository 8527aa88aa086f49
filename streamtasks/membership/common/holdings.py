"""What a member owns, held by one component (composition, not a base class): :class:`Holdings`.

Every member owns partitions under the generation (classic) or epoch (KIP-848) it was given them
in, with the user data of that assignment. :class:`Holdings` is the one owner of that record and
the only code that changes it: each change of the owned set emits ``AssignmentChanged``, and
each revocation or loss the listener call KIP-429 orders before it (through the member's
:class:`~.kernel.Kernel`). A protocol's record may carry more (the classic member's sticky
memory, the KIP-848 assignment's error and version); ``update`` changes those.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from streamtasks.membership.common.actions import ListenerKind, assignment_changed
from topology.ids import TopicPartition

__all__ = ["Holdings", "Owns"]


class Owns(Protocol):
    """A protocol's frozen record of what its member owns."""

    __dataclass_fields__: ClassVar[dict[str, Any]]

    @property
    def owned(self) -> frozenset[TopicPartition]: ...

    @property
    def owned_generation(self) -> int: ...

    @property
    def user_data(self) -> bytes: ...


_NONE: frozenset[TopicPartition] = frozenset()
OwnsT = TypeVar("OwnsT", bound=Owns)


class _Emits(Protocol):
    """What :class:`Holdings` needs of the member's kernel."""

    def emit(self, action: Any) -> None: ...

    def listener(
        self, kind: ListenerKind, partitions: frozenset[TopicPartition], now_ms: int, generation: int
    ) -> None: ...


class Holdings(Generic[OwnsT]):
    """The record of what the member owns, and the moves that change it.

    ``none_generation``: the generation of an empty holding (-1 classic, 0 KIP-848). The
    ``generation`` passed to the listener moves is the member's current one (the listener
    call carries it); ``now_ms`` is when the call is emitted.
    """

    __slots__ = ("_k", "_none", "record")

    def __init__(self, kernel: _Emits, record: OwnsT, none_generation: int) -> None:
        self._k = kernel
        self._none = none_generation
        self.record = record

    @property
    def owned(self) -> frozenset[TopicPartition]:
        return self.record.owned

    def update(self, **changes: Any) -> None:
        """Change fields other than the owned set (the assignment's user data, ...)."""
        self.record = replace(self.record, **changes)

    def set(
        self, owned: frozenset[TopicPartition], generation: int, *, lost: frozenset[TopicPartition] = _NONE
    ) -> None:
        """Own ``owned`` under ``generation``; ``lost``: partitions given up without a revocation
        (``AssignmentChanged.lost``)."""
        before = self.record
        self.record = replace(before, owned=owned, owned_generation=generation)
        self._k.emit(assignment_changed(before.owned, owned, generation, before.user_data, lost))

    def assign(
        self,
        assigned: frozenset[TopicPartition],
        generation: int,
        now_ms: int,
        *,
        revoked: frozenset[TopicPartition] = frozenset(),
        **changes: Any,
    ) -> None:
        """Take an assignment in KIP-429's listener order: revoked (if any), the new holding
        (with ``changes`` to the record), assigned (always, maybe with no partitions)."""
        added = assigned - self.record.owned
        if revoked:
            self._k.listener(ListenerKind.REVOKED, revoked, now_ms, generation)
        if changes:
            self.update(**changes)
        self.set(assigned, generation)
        self._k.listener(ListenerKind.ASSIGNED, added, now_ms, generation)

    def revoke(self, partitions: frozenset[TopicPartition], now_ms: int, generation: int) -> None:
        """Give up those of ``partitions`` it owns (after their commit): listener, then the change."""
        owned = self.record.owned
        revoked = partitions & owned
        if revoked:
            self._k.listener(ListenerKind.REVOKED, revoked, now_ms, generation)
            self.set(owned - revoked, self.record.owned_generation)

    def lose(self, partitions: frozenset[TopicPartition], now_ms: int, generation: int) -> None:
        """``partitions`` (all owned) are lost: no commit, no revocation."""
        if partitions:
            self._k.listener(ListenerKind.LOST, partitions, now_ms, generation)
            self.set(self.record.owned - partitions, self.record.owned_generation, lost=partitions)

    def lose_all(self, now_ms: int, generation: int, **cleared: Any) -> None:
        """The member fell out of the group: the assignment's data goes (with ``cleared``),
        everything owned is lost."""
        owned = self.record.owned
        self.update(user_data=b"", **cleared)
        if owned:
            self._k.listener(ListenerKind.LOST, owned, now_ms, generation)
            self.set(frozenset(), self._none, lost=owned)

    def lose_gone(self, counts: Mapping[str, int], now_ms: int, generation: int) -> frozenset[TopicPartition]:
        """The owned partitions the metadata no longer has (a topic deleted or shrunk) are lost;
        returns them."""
        gone = frozenset(tp for tp in self.record.owned if tp.partition >= counts.get(tp.topic, 0))
        self.lose(gone, now_ms, generation)
        return gone
