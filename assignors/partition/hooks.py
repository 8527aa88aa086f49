"""The optional user-data hooks of a partition assignor (Kafka's ``ConsumerPartitionAssignor``:
``subscriptionUserData`` and ``onAssignment``). Each assignor owns its user data in both
directions; the member machines call these hooks and never look at an assignor's name.

* :class:`SubscriptionUserData` (member side): the bytes the member offers with this assignor
  (the consumer protocol's ``Subscription.UserData``; KIP-848's client-side assignor metadata).
  The member passes what only it knows: its topics, its previous assignment and the generation
  that assignment was made in (``None`` when the member runs without KIP-341's generation
  marker). Whatever else an assignor writes (process ids, task offset sums) it is given when it
  is constructed, as injected callables.
* :class:`SubscriptionReader` (leader side): the leader's reading of one member's subscription
  before it runs the assignor, for an assignor whose claims travel in its user data (the eager
  ``sticky`` assignor: KIP-341's previous assignment and generation). Returns the subscription
  with ``owned_partitions`` and ``generation`` filled; raises ``DecodeError`` for bytes it cannot
  read (the leader reports that and ignores the member's claims).
* :class:`AssignmentListener` (member side): what the member makes of the assignment it got
  (``Assignment.UserData``): the streams assignor decodes the tasks it names. It returns the
  decoded value instead of keeping it, so one assignor object may serve several members.

Assignors without a hook offer no user data, are read as the consumer protocol has it, and
ignore their assignment's user data: :func:`subscription_user_data`, :func:`read_subscription`
and :func:`on_assignment` apply those defaults.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from assignors.partition.types import PartitionAssignor, Subscription
from topology.ids import TopicPartition

__all__ = [
    "AssignmentListener",
    "MemberAssignment",
    "SubscriptionReader",
    "SubscriptionUserData",
    "claims_in_user_data",
    "on_assignment",
    "read_subscription",
    "subscription_user_data",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberAssignment:
    """One member's assignment as its assignor's :meth:`AssignmentListener.on_assignment` reads
    it: the partitions, the assignment's user data (``b""``: none) and the generation (KIP-848:
    the member epoch) it belongs to."""

    partitions: tuple[TopicPartition, ...] = ()
    user_data: bytes = b""
    generation: int = -1


@runtime_checkable
class SubscriptionUserData(Protocol):
    """An assignor that writes the user data of its members' subscriptions."""

    def subscription_user_data(
        self,
        *,
        topics: tuple[str, ...],
        previous: tuple[TopicPartition, ...],
        generation: int | None,
    ) -> bytes: ...


@runtime_checkable
class SubscriptionReader(Protocol):
    """An assignor whose members' claims travel in their subscription user data."""

    def read_subscription(self, subscription: Subscription) -> Subscription: ...


@runtime_checkable
class AssignmentListener(Protocol):
    """An assignor that reads the user data of the assignment a member got."""

    def on_assignment(self, assignment: MemberAssignment) -> object: ...


def subscription_user_data(
    assignor: PartitionAssignor,
    *,
    topics: tuple[str, ...],
    previous: tuple[TopicPartition, ...],
    generation: int | None,
) -> bytes:
    """The user data a member offers with ``assignor`` (``b""`` for an assignor without the hook)."""
    if isinstance(assignor, SubscriptionUserData):
        return assignor.subscription_user_data(topics=topics, previous=previous, generation=generation)
    return b""


def claims_in_user_data(assignor: PartitionAssignor) -> bool:
    """Whether the leader reads ``assignor``'s claims from its user data (:class:`SubscriptionReader`)."""
    return isinstance(assignor, SubscriptionReader)


def read_subscription(assignor: PartitionAssignor | None, subscription: Subscription) -> Subscription:
    """The leader's reading of a subscription for ``assignor`` (unchanged without the hook)."""
    if assignor is not None and isinstance(assignor, SubscriptionReader):
        return assignor.read_subscription(subscription)
    return subscription


def on_assignment(assignor: PartitionAssignor, assignment: MemberAssignment) -> object:
    """What ``assignor`` makes of ``assignment`` (``None`` for an assignor without the hook)."""
    if isinstance(assignor, AssignmentListener):
        return assignor.on_assignment(assignment)
    return None
