"""The member side of an assignment, one hook for every assignor (Kafka's
``ConsumerPartitionAssignor.onAssignment``): when an assignment arrives, the assignor
registered under the protocol the coordinator chose reads the assignment's user data itself
(:class:`AssignmentReader`), and what it decoded (an :class:`AssignmentRead`) is all the
application sees. The application never looks at a protocol's name or at another assignor's
bytes: :class:`AssignmentReaders` maps the chosen name to its reader.

KIP-848 names no protocol: its assignment goes to the member's client-side assignor, registered
under ``None``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol, runtime_checkable

from assignors.partition.hooks import MemberAssignment
from streamtasks.streams.assignor import AssignmentRead

__all__ = ["AssignmentReader", "AssignmentReaders"]


@runtime_checkable
class AssignmentReader(Protocol):
    """An assignor that reads the user data of the assignments made under its protocol.

    ``follow_version``: whether the assignor's own userdata versions are followed (version
    probing; KIP-848 versions assignor metadata itself). Never raises for what the leader sent:
    unreadable bytes are an :attr:`AssignmentRead.error` and an empty :attr:`AssignmentRead.info`.
    """

    @property
    def name(self) -> str: ...

    def read_member_assignment(
        self, assignment: MemberAssignment, *, follow_version: bool
    ) -> AssignmentRead: ...


class AssignmentReaders:
    """The assignors a member offers, by protocol name; ``client_side``: the one a KIP-848
    assignment (no protocol name) goes to."""

    def __init__(
        self, assignors: Iterable[AssignmentReader], *, client_side: AssignmentReader | None
    ) -> None:
        self._by_name: dict[str | None, AssignmentReader] = {a.name: a for a in assignors}
        if client_side is not None:
            self._by_name[None] = client_side

    def read(
        self, protocol: str | None, assignment: MemberAssignment, *, follow_version: bool
    ) -> AssignmentRead | None:
        """What the assignor of ``protocol`` makes of ``assignment`` (None: no assignor of this
        member is registered under it)."""
        reader = self._by_name.get(protocol)
        if reader is None:
            return None
        return reader.read_member_assignment(assignment, follow_version=follow_version)
