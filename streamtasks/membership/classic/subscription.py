"""What the member offers in JoinGroup: one (assignor name, subscription bytes) per assignor.

Each subscription is the consumer protocol's v3 ``ConsumerProtocolSubscription``: the topics,
the assignor's user data, the owned partitions (KIP-429; empty for EAGER members, which revoked
everything before joining), the generation those partitions were owned under (KIP-341 / KIP-792,
``-1`` when the marker is off) and the rack.

User data: ``MemberConfig.user_data_provider`` when set; otherwise the built-in ``sticky``
assignor gets KIP-341 sticky userdata (the previous assignment and, with the marker, its
generation; v0 without it) and every other assignor gets none. An assignor that owns its wire
format (:mod:`streamtasks.membership.classic.foreign`) writes its whole metadata itself.
"""

from __future__ import annotations

from assignors.partition.types import PartitionAssignor
from streamtasks.membership.classic.config import MemberConfig
from streamtasks.membership.classic.foreign import ForeignProtocolAssignor
from streamtasks.protocol.classic_group import ProtocolMetadata
from streamtasks.protocol.consumer import ConsumerProtocolSubscription, encode_subscription
from streamtasks.protocol.sticky import StickyUserData, encode_sticky_userdata
from topology.ids import TopicPartition

__all__ = ["STICKY_ASSIGNOR_NAME", "join_protocols", "user_data_for"]

#: The eager sticky assignor whose user data carries the previous assignment (KIP-54/341).
STICKY_ASSIGNOR_NAME = "sticky"


def user_data_for(
    config: MemberConfig,
    assignor: PartitionAssignor,
    topics: tuple[str, ...],
    previous: tuple[TopicPartition, ...],
    previous_generation: int,
) -> bytes:
    """The user data offered with ``assignor`` (see the module docstring)."""
    generation = previous_generation if config.generation_marker else -1
    if config.user_data_provider is not None:
        return config.user_data_provider(assignor, topics, previous, generation)
    if assignor.name == STICKY_ASSIGNOR_NAME:
        if config.generation_marker:
            return encode_sticky_userdata(StickyUserData(partitions=previous, generation=generation))
        return encode_sticky_userdata(StickyUserData(partitions=previous), version=0)
    return b""


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
