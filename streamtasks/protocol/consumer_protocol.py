"""Kafka's embedded consumer protocol: ``ConsumerProtocolSubscription`` / ``ConsumerProtocolAssignment``
v0-v3, byte for byte as Apache Kafka's Java client writes them.

Layout (all versions start with an int16 version; non-flexible, so no tagged fields)::

    Subscription v0 => Version Topics UserData
    Subscription v1 => ... OwnedPartitions        ([Topic [Partition]], KIP-429)
    Subscription v2 => ... GenerationId           (int32, KIP-792)
    Subscription v3 => ... RackId                 (nullable string, KIP-881)
    Assignment  v0-v3 => Version AssignedPartitions UserData   (only the version differs)

Compatibility rules, as in the Java client:

* encoding at a version above 3 writes version 3 (header included); below 0 is an error;
* decoding reads the fields of ``min(version, 3)`` and ignores anything after them, so an old
  reader skips trailing fields it does not know; fields the version lacks get their defaults
  (no owned partitions, generation -1, no rack);
* a subscription sorts its topics and groups its owned partitions by topic in (topic,
  partition) order; an assignment groups its partitions by topic in order of first
  appearance and keeps their order within a topic;
* an empty rack id reads as ``None``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from itertools import groupby
from operator import attrgetter

from assignors.partition.types import Subscription
from streamtasks.errors import DecodeError, LocalProtocolError
from streamtasks.protocol._buf import INT16_MAX, INT32_MAX, INT32_MIN, Reader, Writer
from topology.ids import TopicPartition
from topology.partitions import topic_partitions

__all__ = [
    "CONSUMER_PROTOCOL_TYPE",
    "HIGHEST_CONSUMER_PROTOCOL_VERSION",
    "ConsumerProtocolAssignment",
    "ConsumerProtocolSubscription",
    "decode_assignment",
    "decode_subscription",
    "encode_assignment",
    "encode_subscription",
    "subscription_from",
]

#: The ``ProtocolType`` of every consumer group's JoinGroup request.
CONSUMER_PROTOCOL_TYPE = "consumer"
#: The highest version Apache Kafka defines for both messages.
HIGHEST_CONSUMER_PROTOCOL_VERSION = 3

_get_topic = attrgetter("topic")
_get_partition = attrgetter("partition")


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerProtocolSubscription:
    """One member's subscription. ``version``: decoded from / to be encoded at."""

    topics: tuple[str, ...]
    user_data: bytes | None
    owned_partitions: tuple[TopicPartition, ...] = ()
    generation_id: int = -1
    rack_id: str | None = None
    version: int = HIGHEST_CONSUMER_PROTOCOL_VERSION

    def __post_init__(self) -> None:
        object.__setattr__(self, "topics", tuple(self.topics))
        object.__setattr__(self, "owned_partitions", tuple(self.owned_partitions))
        if self.rack_id == "":
            object.__setattr__(self, "rack_id", None)
        _check_version(self.version)
        if not INT32_MIN <= self.generation_id <= INT32_MAX:
            raise LocalProtocolError(f"generation_id {self.generation_id} does not fit in an int32")
        _check_partitions(self.owned_partitions, "owned_partitions")


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerProtocolAssignment:
    """The leader's assignment for one member. ``version``: decoded from / to be encoded at."""

    assigned_partitions: tuple[TopicPartition, ...]
    user_data: bytes | None
    version: int = HIGHEST_CONSUMER_PROTOCOL_VERSION

    def __post_init__(self) -> None:
        object.__setattr__(self, "assigned_partitions", tuple(self.assigned_partitions))
        _check_version(self.version)
        _check_partitions(self.assigned_partitions, "assigned_partitions")


def _check_version(version: int) -> None:
    if not 0 <= version <= INT16_MAX:
        raise LocalProtocolError(f"consumer protocol version {version} is not in [0, {INT16_MAX}]")


def _check_partitions(partitions: tuple[TopicPartition, ...], field: str) -> None:
    numbers = list(map(_get_partition, partitions))
    if numbers and min(numbers) >= INT32_MIN and max(numbers) <= INT32_MAX:
        return
    for tp in partitions:
        if not INT32_MIN <= tp.partition <= INT32_MAX:
            raise LocalProtocolError(f"{field}: partition {tp} does not fit in an int32")


def _wire_version(version: int | None, default: int) -> int:
    chosen = default if version is None else version
    _check_version(chosen)
    return min(chosen, HIGHEST_CONSUMER_PROTOCOL_VERSION)


def _group_sorted(partitions: Iterable[TopicPartition]) -> list[tuple[str, list[int]]]:
    """Java's subscription grouping: sort by (topic, partition), start a group per new topic."""
    groups: list[tuple[str, list[int]]] = []
    for tp in sorted(partitions):
        if not groups or groups[-1][0] != tp.topic:
            groups.append((tp.topic, []))
        groups[-1][1].append(tp.partition)
    return groups


def _group_by_first_appearance(partitions: tuple[TopicPartition, ...]) -> list[tuple[str, list[int]]]:
    """Java's assignment grouping: one group per topic, in order of the topic's first partition.
    (Runs of one topic are moved as a whole: an assignment is usually sorted, one run a topic.)"""
    by_topic: dict[str, list[int]] = {}
    for topic, run in groupby(partitions, _get_topic):
        if topic in by_topic:
            by_topic[topic].extend(map(_get_partition, run))
        else:
            by_topic[topic] = list(map(_get_partition, run))
    return list(by_topic.items())


def _write_groups(w: Writer, groups: list[tuple[str, list[int]]], field: str) -> None:
    w.kafka_array_length(len(groups), field)
    for topic, parts in groups:
        w.kafka_nullable_string(topic, f"{field}.topic")
        w.kafka_array_length(len(parts), f"{field}.partitions")
        w.int32s(parts, f"{field}.partition")


def _read_groups(r: Reader, field: str) -> tuple[TopicPartition, ...]:
    out: list[TopicPartition] = []
    # A group is at least a 2-byte topic length and a 4-byte partition count.
    for _ in range(r.kafka_array_length(field, 6)):
        topic = r.kafka_string(f"{field}.topic")
        count = r.kafka_array_length(f"{field}.partitions", 4)
        out += topic_partitions(topic, r.int32s(count))
    return tuple(out)


def encode_subscription(sub: ConsumerProtocolSubscription, version: int | None = None) -> bytes:
    """The bytes Java's ``ConsumerProtocol.serializeSubscription(sub, version)`` produces.

    ``version`` defaults to ``sub.version``; above 3 writes 3. Fields the version lacks are
    dropped (all of them are "ignorable" in Kafka's schema).
    """
    v = _wire_version(version, sub.version)
    w = Writer()
    w.int16(v, "version")
    w.kafka_array_length(len(sub.topics), "topics")
    for topic in sorted(sub.topics):
        w.kafka_nullable_string(topic, "topic")
    w.kafka_nullable_bytes(sub.user_data, "user_data")
    if v >= 1:
        _write_groups(w, _group_sorted(sub.owned_partitions), "owned_partitions")
    if v >= 2:
        w.int32(sub.generation_id, "generation_id")
    if v >= 3:
        w.kafka_nullable_string(sub.rack_id, "rack_id")
    return w.getvalue()


def decode_subscription(data: bytes) -> ConsumerProtocolSubscription:
    """Read any version's subscription; see the module notes for the compatibility rules."""
    r = Reader(data, "consumer protocol subscription")
    version = r.int16()
    if version < 0:
        raise r.fail(f"unsupported version {version}")
    topics = tuple(r.kafka_string("topic") for _ in range(r.kafka_array_length("topics", 2)))
    user_data = r.kafka_nullable_bytes("user_data")
    owned: tuple[TopicPartition, ...] = ()
    generation_id = -1
    rack_id: str | None = None
    if version >= 1:
        owned = _read_groups(r, "owned_partitions")
    if version >= 2:
        generation_id = r.int32()
    if version >= 3:
        rack_id = r.kafka_nullable_string("rack_id")
    return ConsumerProtocolSubscription(
        topics=topics,
        user_data=user_data,
        owned_partitions=owned,
        generation_id=generation_id,
        rack_id=rack_id or None,
        version=version,
    )


def encode_assignment(a: ConsumerProtocolAssignment, version: int | None = None) -> bytes:
    """The bytes Java's ``ConsumerProtocol.serializeAssignment(a, version)`` produces."""
    v = _wire_version(version, a.version)
    w = Writer()
    w.int16(v, "version")
    _write_groups(w, _group_by_first_appearance(a.assigned_partitions), "assigned_partitions")
    w.kafka_nullable_bytes(a.user_data, "user_data")
    return w.getvalue()


def decode_assignment(data: bytes) -> ConsumerProtocolAssignment:
    """Read any version's assignment (all versions share one layout)."""
    r = Reader(data, "consumer protocol assignment")
    version = r.int16()
    if version < 0:
        raise r.fail(f"unsupported version {version}")
    partitions = _read_groups(r, "assigned_partitions")
    user_data = r.kafka_nullable_bytes("user_data")
    try:
        return ConsumerProtocolAssignment(
            assigned_partitions=partitions, user_data=user_data, version=version
        )
    except LocalProtocolError as exc:  # pragma: no cover - every decoded value is in range
        raise DecodeError(str(exc)) from None


def subscription_from(
    sub: ConsumerProtocolSubscription, group_instance_id: str | None = None
) -> Subscription:
    """The partition assignors' view of a decoded subscription (``user_data`` None becomes b"")."""
    return Subscription(
        topics=sub.topics,
        owned_partitions=sub.owned_partitions,
        generation=sub.generation_id,
        rack=sub.rack_id,
        group_instance_id=group_instance_id,
        user_data=sub.user_data or b"",
    )
