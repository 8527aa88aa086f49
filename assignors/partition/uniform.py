"""``uniform``: KIP-848's server-side assignor, run by the member that computes the assignment.

Homogeneous groups (every member subscribes to the same topics): with ``P`` partitions and
``N`` members each member's quota is ``P // N`` and ``P % N`` members get one more. Which
members are "the first ``P % N``" is not fixed by the KIP; here they are the members that
already own the most partitions (ties: member id), because any other choice moves partitions
for nothing. Each member keeps what it owned up to its quota; the remaining partitions fill
the members under quota. Heterogeneous groups: members keep owned partitions of topics they
still subscribe to, the rest go to the least-loaded subscribers topic by topic, then partitions
move from the most- to the least-loaded subscriber of each topic, and finally along chains of
members, until the counts are as even as the subscriptions allow (Kafka stops after single
moves, which can leave a chain a=3, b=4, c=5, d=6). Details and guarantees:
:mod:`assignors.partition._balance`.

The previous assignment is ``Subscription.owned_partitions`` (for KIP-848 client-side
assignment, the member's current target assignment from ConsumerGroupPrepareAssignment);
conflicting claims are settled by generation as in :func:`assignors.cooperative.valid_claims`.
The result is the target assignment; KIP-848 reconciliation (or, in a classic group,
:func:`assignors.cooperative.assign`) hands partitions over only after their owner released
them.
"""

from __future__ import annotations

from typing import ClassVar

from assignors.partition.sticky import balanced_sticky_assignment
from assignors.partition.types import GroupAssignment, GroupSubscription, RebalanceProtocol

__all__ = ["UniformAssignor"]


class UniformAssignor:
    """KIP-848's ``uniform`` assignor: balanced, then sticky. COOPERATIVE and EAGER."""

    name: ClassVar[str] = "uniform"
    version: ClassVar[int] = 0

    def supported_protocols(self) -> tuple[RebalanceProtocol, ...]:
        return (RebalanceProtocol.EAGER, RebalanceProtocol.COOPERATIVE)

    def assign(self, group: GroupSubscription) -> GroupAssignment:
        return balanced_sticky_assignment(group)
