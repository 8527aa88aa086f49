"""Sticky partition assignors: ``sticky`` (eager only) and ``cooperative_sticky``.

Both put balance first and stickiness second, as Kafka's ``StickyAssignor`` and
``CooperativeStickyAssignor`` do: member partition counts differ by at most one when every
member subscribes to the same topics, and are as even as the subscriptions allow when they
differ (Kafka only guarantees that no single partition move helps; chains of moves are also
done here). With identical subscriptions a member keeps as many of its previous partitions as
any balanced assignment allows (the fewest possible partitions move); with differing ones the
fewest partitions move that any assignment with those member counts allows (two members one
partition apart may trade counts to keep more: :mod:`assignors.partition._keep`). See
:mod:`assignors.partition._balance`.

The previous assignment is each member's ``Subscription.owned_partitions`` with its
``Subscription.generation``. For ``sticky`` (eager members revoke everything before joining)
they travel in KIP-341's sticky userdata (``previous_assignment``, ``generation``), which the
assignor writes and reads itself (its :mod:`~assignors.partition.hooks`:
``subscription_user_data`` for the member, ``read_subscription`` for the leader, codec in
:mod:`assignors.partition.sticky_user_data`, kafka-python 3's variant included); for
``cooperative_sticky`` they are the consumer protocol's own fields. When
two members claim the same partition the claim of the higher generation wins; claims tied at
the highest generation are all ignored (Kafka invalidates such a partition for every claimant),
see :func:`assignors.cooperative.valid_claims`. (The member machine's leader has a legacy,
simulation-only pre-KIP-341 mode for ``sticky`` without the marker that trusts every claim on
top of this assignor's result: ``streamtasks.membership.classic.leader.legacy_trust_claims``.)

``cooperative_sticky`` returns the *target* assignment. Under the COOPERATIVE protocol the
leader runs it through :func:`assignors.cooperative.assign`, which withholds partitions that
change owner this round (KIP-429) and sets ``followup_needed``.

Racks (``partition_racks``, ``Subscription.rack``) are not used yet.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import ClassVar

from assignors.partition._balance import quota_assign, spread_assign
from assignors.partition._layout import Layout
from assignors.partition.sticky_user_data import (
    StickyUserData,
    decode_sticky_userdata,
    encode_sticky_userdata,
)
from assignors.partition.types import GroupAssignment, GroupSubscription, RebalanceProtocol, Subscription
from topology.ids import TopicPartition

__all__ = ["CooperativeStickyAssignor", "StickyAssignor", "balanced_sticky_assignment"]


def balanced_sticky_assignment(group: GroupSubscription) -> GroupAssignment:
    """Balance first, then keep owned partitions: the shared body of ``sticky``,
    ``cooperative_sticky`` and ``uniform``. Raises ``AssignorInputError`` for bad input."""
    layout = Layout(group)
    owned = layout.owned()
    numbers: Sequence[Sequence[int]]
    if layout.homogeneous:
        numbers = quota_assign(layout.total, owned)
    else:
        numbers = spread_assign(layout.offsets, layout.member_topics, owned)
    return layout.assignment(numbers)


class StickyAssignor:
    """Kafka's ``sticky`` (KIP-54 with KIP-341's generation marker). EAGER only, like Kafka's,
    so that a group moves to cooperative through ``cooperative_sticky`` and two rolling
    bounces (KIP-429)."""

    name: ClassVar[str] = "sticky"
    version: ClassVar[int] = 0

    def supported_protocols(self) -> tuple[RebalanceProtocol, ...]:
        return (RebalanceProtocol.EAGER,)

    def assign(self, group: GroupSubscription) -> GroupAssignment:
        return balanced_sticky_assignment(group)

    def subscription_user_data(
        self,
        *,
        topics: tuple[str, ...],
        previous: tuple[TopicPartition, ...],
        generation: int | None,
    ) -> bytes:
        """KIP-341 userdata: the previous assignment and its generation (v1); without the
        generation marker (``generation=None``) the v0 layout, partitions only."""
        if generation is None:
            return encode_sticky_userdata(StickyUserData(partitions=previous), version=0)
        return encode_sticky_userdata(StickyUserData(partitions=previous, generation=generation))

    def read_subscription(self, subscription: Subscription) -> Subscription:
        """The member's claims from its KIP-341 userdata (none without userdata); raises
        ``DecodeError`` for bytes no known layout reads."""
        if not subscription.user_data:
            return replace(subscription, owned_partitions=(), generation=-1)
        data = decode_sticky_userdata(subscription.user_data)
        return replace(subscription, owned_partitions=data.partitions, generation=data.effective_generation)


class CooperativeStickyAssignor:
    """Kafka's ``cooperative-sticky`` (KIP-429). Supports EAGER and COOPERATIVE; under
    COOPERATIVE use it through :func:`assignors.cooperative.assign`."""

    #: The JoinGroup protocol name, Kafka's, so that Java, librdkafka and kafka-python members
    #: can share the group (the registry knows it as ``cooperative_sticky``).
    name: ClassVar[str] = "cooperative-sticky"
    version: ClassVar[int] = 0

    def supported_protocols(self) -> tuple[RebalanceProtocol, ...]:
        return (RebalanceProtocol.EAGER, RebalanceProtocol.COOPERATIVE)

    def assign(self, group: GroupSubscription) -> GroupAssignment:
        return balanced_sticky_assignment(group)
