"""Values the coordinator works with: partition sets by topic id, the cluster's topic metadata,
member and group states, and the configuration. All immutable."""

from __future__ import annotations

import enum
import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from streamtasks.errors import ConfigError
from streamtasks.protocol.consumer_group import TopicIdPartitions

__all__ = [
    "EMPTY_PARTITIONS",
    "CoordinatorConfig",
    "GroupState",
    "MemberState",
    "MetadataImage",
    "TopicMetadata",
    "TopicPartitionSet",
]


class TopicPartitionSet:
    """An immutable set of partitions keyed by topic id (Kafka's ``Map<Uuid, Set<Integer>>``).

    Equal content compares and hashes equal whatever the construction order; no topic maps to
    an empty set."""

    __slots__ = ("_hash", "_topics")

    _topics: Mapping[uuid.UUID, frozenset[int]]
    _hash: int | None

    def __init__(self, topics: Mapping[uuid.UUID, Iterable[int]] | None = None) -> None:
        clean: dict[uuid.UUID, frozenset[int]] = {}
        for topic_id, partitions in (topics or {}).items():
            frozen = frozenset(partitions)
            if frozen:
                clean[topic_id] = frozen
        self._topics = MappingProxyType(clean)
        self._hash = None

    @classmethod
    def from_wire(cls, items: Iterable[TopicIdPartitions]) -> TopicPartitionSet:
        """From a message's topic-partition list; a topic listed twice contributes both lists."""
        merged: dict[uuid.UUID, set[int]] = {}
        for item in items:
            merged.setdefault(item.topic_id, set()).update(item.partitions)
        return cls(merged)

    @classmethod
    def from_pairs(cls, pairs: Iterable[tuple[uuid.UUID, int]]) -> TopicPartitionSet:
        merged: dict[uuid.UUID, set[int]] = {}
        for topic_id, partition in pairs:
            merged.setdefault(topic_id, set()).add(partition)
        return cls(merged)

    def to_wire(self) -> tuple[TopicIdPartitions, ...]:
        """Sorted by topic id, partitions ascending: the canonical message form."""
        return tuple(
            TopicIdPartitions(topic_id=t, partitions=tuple(sorted(self._topics[t])))
            for t in sorted(self._topics)
        )

    def topics(self) -> frozenset[uuid.UUID]:
        return frozenset(self._topics)

    def get(self, topic_id: uuid.UUID) -> frozenset[int]:
        return self._topics.get(topic_id, frozenset())

    def items(self) -> Iterable[tuple[uuid.UUID, frozenset[int]]]:
        return self._topics.items()

    def pairs(self) -> Iterator[tuple[uuid.UUID, int]]:
        for topic_id, partitions in self._topics.items():
            for partition in partitions:
                yield topic_id, partition

    def __contains__(self, pair: object) -> bool:
        if not isinstance(pair, tuple) or len(pair) != 2:
            return False
        return pair[1] in self._topics.get(pair[0], ())

    def __len__(self) -> int:
        return sum(len(p) for p in self._topics.values())

    def __bool__(self) -> bool:
        return bool(self._topics)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TopicPartitionSet):
            return NotImplemented
        return self is other or self._topics == other._topics

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(frozenset(self._topics.items()))
        return self._hash

    def __repr__(self) -> str:
        inner = ", ".join(f"{str(t)[:8]}:{sorted(p)}" for t, p in sorted(self._topics.items()))
        return f"TopicPartitionSet({{{inner}}})"

    def union(self, other: TopicPartitionSet) -> TopicPartitionSet:
        if not other:
            return self
        if not self:
            return other
        merged = {t: set(p) for t, p in self._topics.items()}
        for topic_id, partitions in other._topics.items():
            merged.setdefault(topic_id, set()).update(partitions)
        return TopicPartitionSet(merged)

    def difference(self, other: TopicPartitionSet) -> TopicPartitionSet:
        if not other or not self:
            return self
        return TopicPartitionSet({t: p - other.get(t) for t, p in self._topics.items()})

    def intersection(self, other: TopicPartitionSet) -> TopicPartitionSet:
        return TopicPartitionSet({t: p & other.get(t) for t, p in self._topics.items()})

    def issubset(self, other: TopicPartitionSet) -> bool:
        return all(p <= other.get(t) for t, p in self._topics.items())

    def only_topics(self, topic_ids: frozenset[uuid.UUID] | set[uuid.UUID]) -> TopicPartitionSet:
        if all(t in topic_ids for t in self._topics):
            return self
        return TopicPartitionSet({t: p for t, p in self._topics.items() if t in topic_ids})


EMPTY_PARTITIONS = TopicPartitionSet()


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicMetadata:
    topic_id: uuid.UUID
    name: str
    num_partitions: int


@dataclass(frozen=True, slots=True)
class MetadataImage:
    """The cluster's topics as the coordinator knows them (an input, like the clock)."""

    topics: tuple[TopicMetadata, ...] = ()
    by_name: Mapping[str, TopicMetadata] = field(init=False, compare=False, repr=False)
    by_id: Mapping[uuid.UUID, TopicMetadata] = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        ordered = tuple(sorted(self.topics, key=lambda t: t.name))
        names = {t.name: t for t in ordered}
        ids = {t.topic_id: t for t in ordered}
        if len(names) != len(ordered) or len(ids) != len(ordered):
            raise ConfigError("metadata image: topic names and topic ids must be unique")
        object.__setattr__(self, "topics", ordered)
        object.__setattr__(self, "by_name", MappingProxyType(names))
        object.__setattr__(self, "by_id", MappingProxyType(ids))

    def with_topic(self, topic: TopicMetadata) -> MetadataImage:
        """This image with ``topic`` added or replacing the topic of the same name."""
        return MetadataImage((*(t for t in self.topics if t.name != topic.name), topic))


class MemberState(enum.Enum):
    """Kafka's coordinator-side member states (``modern/MemberState.java``)."""

    #: Reconciled to its current epoch: owns what it was given, waits for nothing.
    STABLE = "stable"
    #: Stays in its epoch until it acknowledges the revocation of ``pending_revocation``.
    UNREVOKED_PARTITIONS = "unrevoked_partitions"
    #: In the target epoch, waiting for partitions other members have not released yet.
    UNRELEASED_PARTITIONS = "unreleased_partitions"


class GroupState(enum.Enum):
    """Consumer group states as ConsumerGroupDescribe names them."""

    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True, slots=True, kw_only=True)
class CoordinatorConfig:
    """Broker-side settings (``group.consumer.*``). ``server_assignors``: names of the
    server-side assignors offered, the first being the default for members that name none."""

    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 5_000
    max_group_size: int | None = None
    server_assignors: tuple[str, ...] = ("uniform", "range")
    #: ``group.consumer.assignment.interval.ms`` (KIP-1263; Apache Kafka's default is 1,000):
    #: after a server-side target is computed, the next one waits this long, so that every
    #: epoch bump in between is served by one assignor run. 0 computes at every bump.
    assignment_interval_ms: int = 0
    #: Classic members' session timeouts must lie in this range (Kafka's
    #: ``group.min.session.timeout.ms`` / ``group.max.session.timeout.ms``), else
    #: INVALID_SESSION_TIMEOUT.
    classic_min_session_timeout_ms: int = 6_000
    classic_max_session_timeout_ms: int = 1_800_000

    def __post_init__(self) -> None:
        if self.heartbeat_interval_ms <= 0 or self.session_timeout_ms <= self.heartbeat_interval_ms:
            raise ConfigError("coordinator: need 0 < heartbeat_interval_ms < session_timeout_ms")
        if not self.server_assignors:
            raise ConfigError("coordinator: at least one server-side assignor is needed")
        if self.max_group_size is not None and self.max_group_size < 1:
            raise ConfigError("coordinator: max_group_size must be >= 1")
        if self.assignment_interval_ms < 0:
            raise ConfigError("coordinator: assignment_interval_ms must be >= 0")
        if not 0 < self.classic_min_session_timeout_ms <= self.classic_max_session_timeout_ms:
            raise ConfigError("coordinator: need 0 < classic_min_session_timeout_ms <= classic_max_...")
