"""One kind of group per id, and the offline conversions between a classic group and a streams
group, by Apache Kafka's rules (``GroupMetadataManager``):

- a StreamsGroupHeartbeat for the id of a group with no members converts it: the group's records
  are deleted (tombstones) and a streams group of the id is created; for a group with members
  it is GROUP_ID_NOT_FOUND ("... is not a streams group");
- a classic JoinGroup for the id of a streams group with no members converts it back: the
  streams group's records are deleted and the join creates the group; for one with members it
  is INCONSISTENT_GROUP_PROTOCOL;
- a ConsumerGroupHeartbeat for a streams group's id is GROUP_ID_NOT_FOUND (Kafka converts only
  an empty classic group there, never a streams group).

On this coordinator a classic group is a consumer group whose members are classic members
(``classic.py``); once they all left it is an empty consumer group, which is what a streams
heartbeat converts. Deviation: Kafka converts an empty *classic* group only, an empty KIP-848
consumer group answers the streams heartbeat GROUP_ID_NOT_FOUND; here any empty consumer group
is converted (its committed offsets stay, as in Kafka: they are not group records).

A conversion is the deletion of the other kind's group, written before (in the same append
as) the write that creates the new group, and only when that write succeeds (Kafka drops the
deletion's records with a failed heartbeat's); replaying the log gives the same result.
"""

from __future__ import annotations

from dataclasses import dataclass

from streamtasks.coordinator.coordinator import GroupCoordinator
from streamtasks.coordinator.streams import StreamsGroupCoordinator
from streamtasks.protocol.errors import KafkaErrorCode

__all__ = ["KindCheck", "for_consumer_write", "for_streams_heartbeat"]


@dataclass(frozen=True, slots=True, kw_only=True)
class KindCheck:
    """What a write on ``group_id`` meets: ``error`` NONE to go ahead (``convert``: the other
    kind's empty group of the id is deleted first), else the error and message to answer."""

    error: KafkaErrorCode = KafkaErrorCode.NONE
    message: str = ""
    convert: bool = False


_GO = KindCheck()


def for_streams_heartbeat(consumer: GroupCoordinator, group_id: str) -> KindCheck:
    """A StreamsGroupHeartbeat for ``group_id``: a consumer (classic) group of the id is
    converted when empty, else the heartbeat is refused."""
    group = consumer.group(group_id)
    if group is None:
        return _GO
    if not group.members:
        return KindCheck(convert=True)
    kinds = sorted({"classic" if m.classic is not None else "consumer" for m in group.members.values()})
    return KindCheck(
        error=KafkaErrorCode.GROUP_ID_NOT_FOUND,
        message=f"group {group_id} is not a streams group (a {' and '.join(kinds)} group of this id "
        f"still has {len(group.members)} member(s): only an empty group becomes a streams group)",
    )


def for_consumer_write(streams: StreamsGroupCoordinator, group_id: str, *, classic_join: bool) -> KindCheck:
    """A consumer group's write (``classic_join``: a JoinGroup; else a ConsumerGroupHeartbeat)
    for ``group_id``: a streams group of the id is converted by a JoinGroup when empty."""
    group = streams.group(group_id)
    if group is None:
        return _GO
    if not classic_join:
        return KindCheck(
            error=KafkaErrorCode.GROUP_ID_NOT_FOUND, message=f"group {group_id} is not a consumer group"
        )
    if not group.members:
        return KindCheck(convert=True)
    return KindCheck(
        error=KafkaErrorCode.INCONSISTENT_GROUP_PROTOCOL,
        message=f"group {group_id} is a streams group with {len(group.members)} member(s): a classic "
        "member can join it only once it is empty",
    )
