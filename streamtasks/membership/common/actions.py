"""The actions both members ask their driver to take, whatever the protocol.

``handle`` and ``poll`` return a list of actions. The driver executes one list **in order**.
Listener rule (KIP-429 "Rebalance Callback Error Handling"): every ``InvokeListener`` in a list
is executed even when an earlier one raised; the first exception is re-raised once the whole
list has been executed; the member's assignment change stands either way (it is already
applied when the list is returned). :func:`streamtasks.membership.common.listener.execute`
implements that rule for drivers.

Each protocol adds its own ``SendRequest`` (the requests it sends) and names its ``Action``
union; under KIP-848 ``CommitOffsets.generation_id`` carries the member epoch (OffsetCommit
v9's ``GenerationIdOrMemberEpoch``) and ``AssignmentChanged.generation`` the member epoch the
partitions are owned under.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from streamtasks.protocol.classic_group import CommittedOffset, OffsetCommitRequest
from streamtasks.protocol.errors import KafkaErrorCode
from topology.ids import TopicPartition

__all__ = [
    "AssignmentChanged",
    "CommitOffsets",
    "CommonAction",
    "ErrorReported",
    "FindCoordinator",
    "InvokeListener",
    "ListenerKind",
    "assignment_changed",
    "listener_call",
    "sorted_tps",
]


def sorted_tps(partitions: Iterable[TopicPartition]) -> tuple[TopicPartition, ...]:
    return tuple(sorted(partitions))


@dataclass(frozen=True, slots=True, kw_only=True)
class FindCoordinator:
    """Look the group coordinator up; answer with ``CoordinatorDiscovered(request_id=...)`` or
    ``RequestFailed(request_id, ...)``. The member sends nothing to the coordinator until then.

    ``silent``: the coordinator known before fell silent (a request of the member's timed out,
    or no heartbeat was answered within the session timeout: a hung broker keeps its
    connections open and answers nothing). The driver drops the connection to it first,
    failing every request still in flight there, as Kafka's ``markCoordinatorUnknown``
    disconnects: an application's commit waiting on it is sent again to the coordinator found
    next instead of holding the application's poll loop until its request timeout, and the
    lookup asks the other bootstrap servers first."""

    request_id: int
    group_id: str
    silent: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class CommitOffsets:
    """Commit the consumed positions of ``partitions`` before they are revoked.

    The driver knows the positions: it builds the request with :meth:`to_request` and answers
    with ``ResponseReceived(request_id, OffsetCommitResponse)`` or ``RequestFailed``. The
    member does not call the revocation listener (nor send JoinGroup / LeaveGroup) until the
    commit completed, failed for good, or ``rebalance_timeout_ms`` passed.
    """

    request_id: int
    group_id: str
    member_id: str
    generation_id: int
    group_instance_id: str | None
    partitions: tuple[TopicPartition, ...]

    def to_request(
        self, offsets: Mapping[TopicPartition, int], metadata: Mapping[TopicPartition, str] | None = None
    ) -> OffsetCommitRequest:
        """The OffsetCommit request for the driver's ``offsets`` (only ``partitions`` are used;
        a partition without a position is skipped), each with its ``metadata`` string if any."""
        meta = metadata or {}
        return OffsetCommitRequest(
            group_id=self.group_id,
            generation_id=self.generation_id,
            member_id=self.member_id,
            group_instance_id=self.group_instance_id,
            offsets=tuple(
                CommittedOffset(partition=tp, offset=offsets[tp], metadata=meta.get(tp, ""))
                for tp in self.partitions
                if tp in offsets
            ),
        )


class ListenerKind(enum.Enum):
    """Which ``ConsumerRebalanceListener`` callback to run."""

    REVOKED = "on_partitions_revoked"
    ASSIGNED = "on_partitions_assigned"
    LOST = "on_partitions_lost"


@dataclass(frozen=True, slots=True, kw_only=True)
class InvokeListener:
    """Call the rebalance listener's ``kind`` callback with ``partitions`` (sorted).

    Emitted in KIP-429's order: ``LOST`` (only when non-empty), ``REVOKED`` (only when
    non-empty), then ``ASSIGNED`` (always after a completed rebalance, even when empty).
    ``generation`` is the member's generation when the callback was decided.
    """

    invocation_id: int
    kind: ListenerKind
    partitions: tuple[TopicPartition, ...]
    generation: int


@dataclass(frozen=True, slots=True, kw_only=True)
class AssignmentChanged:
    """The member's owned partitions changed: ``owned`` is the new set (sorted), ``added`` and
    ``removed`` the difference, ``generation`` the generation it is owned under (-1: none).

    Also emitted after every completed rebalance when only the generation changed (``added``
    and ``removed`` empty): the partitions are now owned under the new generation.

    ``user_data`` is the assignment user data (``Assignment.UserData``, ``b""`` when none) of
    the SyncGroup assignment that is applied now: after a revocation gate, the one of the
    SyncGroup that started the gate. A revocation before a rejoin (join prepare, leaving)
    keeps the current assignment's user data, so it may name tasks whose partitions are no
    longer in ``owned``: the partitions are the source of truth. Partitions lost (fenced,
    reset, failed) leave no assignment: ``b""``.

    ``lost``: the partitions of ``removed`` that were lost, not revoked (fenced, reset, failed,
    or gone from the metadata; KIP-429 ``on_partitions_lost``): their state was not committed,
    so whoever keeps state for them must not trust it (a task closes dirty). Always a subset of
    ``removed``; empty when the partitions were revoked or nothing was removed.
    """

    generation: int
    owned: tuple[TopicPartition, ...]
    added: tuple[TopicPartition, ...] = ()
    removed: tuple[TopicPartition, ...] = ()
    user_data: bytes = b""
    lost: tuple[TopicPartition, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorReported:
    """Something went wrong that the member handled without raising: a broker error, a
    malformed assignment or subscription, a commit that failed or timed out.

    ``fatal`` errors (``FENCED_INSTANCE_ID``, an inconsistent group protocol...) stop the
    member: it moved to ``MemberState.FAILED`` and the application should close it.
    """

    reason: str
    code: KafkaErrorCode | None = None
    fatal: bool = False


#: The actions every member emits (each protocol adds its ``SendRequest``).
CommonAction = FindCoordinator | CommitOffsets | InvokeListener | AssignmentChanged | ErrorReported


def listener_call(
    invocation_id: int, kind: ListenerKind, partitions: frozenset[TopicPartition], generation: int
) -> InvokeListener:
    return InvokeListener(
        invocation_id=invocation_id, kind=kind, partitions=sorted_tps(partitions), generation=generation
    )


def assignment_changed(
    before: frozenset[TopicPartition],
    owned: frozenset[TopicPartition],
    generation: int,
    user_data: bytes,
    lost: frozenset[TopicPartition] = frozenset(),
) -> AssignmentChanged:
    """What the driver hears when ownership goes from ``before`` to ``owned``; ``lost``:
    partitions given up without a revocation (only those removed are reported lost)."""
    removed = before - owned
    return AssignmentChanged(
        generation=generation,
        owned=sorted_tps(owned),
        added=sorted_tps(owned - before),
        removed=sorted_tps(removed),
        user_data=user_data,
        lost=sorted_tps(lost & removed),
    )
