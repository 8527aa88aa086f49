"""What the member offers in JoinGroup: one (assignor name, subscription bytes) per assignor.

Each subscription is the consumer protocol's v3 ``ConsumerProtocolSubscription``: the topics,
the assignor's user data, the owned partitions (KIP-429; empty for EAGER members, which revoked
everything before joining), the generation those partitions were owned under (KIP-341 / KIP-792,
``-1`` when the marker is off) and the rack.

User data: each assignor writes its own (its ``subscription_user_data`` hook,
:mod:`assignors.partition.hooks`), given the topics, the previous assignment and the generation
it was made in (``None`` with the generation marker off); an assignor without the hook gets
none. The eager ``sticky`` assignor writes KIP-341 userdata that way, the streams assignor its
``SubscriptionInfo``. An assignor that owns its wire format
(:mod:`streamtasks.membership.classic.foreign`) writes its whole metadata itself.
"""

from __future__ import annotations

from assignors.partition.hooks import subscription_user_data
from assignors.partition.types import PartitionAssignor
from streamtasks.membership.classic.config import MemberConfig
from streamtasks.membership.classic.foreign import ForeignProtocolAssignor
from streamtasks.protocol.classic_group import ProtocolMetadata
from streamtasks.protocol.consumer_protocol import ConsumerProtocolSubscription, encode_subscription
from topology.ids import TopicPartition

__all__ = ["join_protocols", "user_data_for"]


def user_data_for(
    config: MemberConfig,
    assignor: PartitionAssignor,
    topics: tuple[str, ...],
    previous: tuple[TopicPartition, ...],
    previous_generation: int,
) -> bytes:
    """The user data offered with ``assignor`` (see the module docstring)."""
    generation = previous_generation if config.generation_marker else None
    return subscription_user_data(assignor, topics=topics, previous=previous, generation=generation)


def join_protocols(
    config: MemberConfig,
    *,
    topics: tuple[str, ...],
    owned: tuple[TopicPartition, ...],
    owned_generation: int,
    previous: tuple[TopicPartition, ...],
    previous_generation: int,
) -> tuple[ProtocolMetadata, ...]:
    """One ``ProtocolMetadata`` per configured assignor, in preference order."""
    generation = owned_generation if config.generation_marker else -1
    out: list[ProtocolMetadata] = []
    for assignor in config.assignors:
        if isinstance(assignor, ForeignProtocolAssignor):
            out.append(
                ProtocolMetadata(name=assignor.name, metadata=assignor.join_metadata(topics, previous))
            )
            continue
        sub = ConsumerProtocolSubscription(
            topics=topics,
            user_data=user_data_for(config, assignor, topics, previous, previous_generation),
            owned_partitions=tuple(sorted(owned)),
            generation_id=generation,
            rack_id=config.rack,
        )
        out.append(ProtocolMetadata(name=assignor.name, metadata=encode_subscription(sub)))
    return tuple(out)
