"""The app model: subtopologies, stores, internal topics, and the tasks they yield."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal

from streamtasks.errors import CopartitionError, TopologyError
from topology.ids import TaskId, TopicPartition
from topology.names import changelog_topic, repartition_topic

__all__ = [
    "WINDOW_CHANGELOG_ADDITIONAL_RETENTION_MS",
    "RepartitionTopic",
    "StateStore",
    "StoreKind",
    "Subtopology",
    "TaskInfo",
    "Topology",
]


#: Kafka Streams' ``windowstore.changelog.additional.retention.ms``: a windowed changelog keeps
#: records this much longer than the store's retention (clock drift between brokers and apps).
WINDOW_CHANGELOG_ADDITIONAL_RETENTION_MS: Final = 24 * 60 * 60 * 1000

StoreKind = Literal["key_value", "window"]


@dataclass(frozen=True, slots=True, kw_only=True)
class StateStore:
    """A named store; when ``logging`` is on, every write also goes to a changelog.

    ``kind="window"`` is a window store (``streamtasks.state.window``): windows of
    ``window_size_ms``, kept ``retention_ms`` (``>= window_size_ms``) behind the store's stream
    time, with duplicates kept apart when ``retain_duplicates``.
    """

    name: str
    logging: bool = True
    kind: StoreKind = "key_value"
    window_size_ms: int | None = None
    retention_ms: int | None = None
    retain_duplicates: bool = False

    def __post_init__(self) -> None:
        if self.kind == "key_value":
            if self.window_size_ms is not None or self.retention_ms is not None or self.retain_duplicates:
                why = "takes no window size, retention or retain_duplicates"
                raise TopologyError(f"key-value store {self.name!r} {why}")
            return
        if self.kind != "window":
            raise TopologyError(f"store {self.name!r}: unknown kind {self.kind!r}")
        size, retention = self.window_size_ms, self.retention_ms
        if size is None or size <= 0:
            raise TopologyError(f"window store {self.name!r} needs a positive window size, got {size}")
        if retention is None or retention < size:
            raise TopologyError(
                f"window store {self.name!r}: retention_ms ({retention}) must be at least "
                f"the window size ({size})"
            )

    @property
    def is_window(self) -> bool:
        return self.kind == "window"

    def changelog_topic(self, application_id: str) -> str:
        return changelog_topic(application_id, self.name)

    def changelog_configs(
        self, additional_retention_ms: int = WINDOW_CHANGELOG_ADDITIONAL_RETENTION_MS
    ) -> dict[str, str]:
        """The topic configs of the changelog (Kafka Streams' ``InternalTopicConfig``s): compacted
        for a key-value store; compacted and deleted after ``retention_ms`` plus
        ``additional_retention_ms`` for a window store, whose every window is a distinct key."""
        if self.retention_ms is None:
            return {"cleanup.policy": "compact"}
        return {
            "cleanup.policy": "compact,delete",
            "retention.ms": str(self.retention_ms + additional_retention_ms),
        }

    def describe(self) -> dict[str, object]:
        """JSON-ready; a key-value store's is what it was before window stores existed (so the
        fingerprints of existing topologies do not change)."""
        out: dict[str, object] = {"name": self.name, "logging": self.logging}
        if self.is_window:
            out.update(
                kind=self.kind,
                window_size_ms=self.window_size_ms,
                retention_ms=self.retention_ms,
                retain_duplicates=self.retain_duplicates,
            )
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class RepartitionTopic:
    """An internal topic one subtopology writes and another reads.

    ``partitions`` fixes its partition count; ``None`` derives it from the largest partition
    count among the source topics of the subtopologies that write to it (as Kafka Streams does).
    """

    name: str
    partitions: int | None = None

    def topic(self, application_id: str) -> str:
        return repartition_topic(application_id, self.name)


@dataclass(frozen=True, slots=True, kw_only=True)
class Subtopology:
    """A connected piece of the topology; it runs as one task per partition of its sources.

    ``sources`` are external topic names, ``repartition_sources`` and ``repartition_sinks``
    are names of :class:`RepartitionTopic` declared on the topology.
    """

    id: int
    sources: tuple[str, ...] = ()
    repartition_sources: tuple[str, ...] = ()
    repartition_sinks: tuple[str, ...] = ()
    stores: tuple[StateStore, ...] = ()

    @property
    def is_stateful(self) -> bool:
        return bool(self.stores)


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskInfo:
    """One task with the partitions it reads and the changelog partitions its stores write."""

    id: TaskId
    source_partitions: tuple[TopicPartition, ...]
    changelog_partitions: tuple[TopicPartition, ...]
    store_names: tuple[str, ...]
    #: The stores themselves (kinds, window sizes, retentions), by name.
    stores: tuple[StateStore, ...] = ()

    @property
    def is_stateful(self) -> bool:
        return bool(self.store_names)


@dataclass(frozen=True, slots=True, kw_only=True)
class Topology:
    """An application's processing graph, reduced to what task assignment needs.

    Build one with :class:`topology.TopologyBuilder`; the constructor checks consistency.
    """

    application_id: str
    subtopologies: tuple[Subtopology, ...]
    repartition_topics: tuple[RepartitionTopic, ...] = ()

    def __post_init__(self) -> None:
        _check(self)

    # -- topics ---------------------------------------------------------------------------

    @property
    def source_topics(self) -> frozenset[str]:
        """External topics the application reads (the ones whose partition counts it needs)."""
        return frozenset(t for s in self.subtopologies for t in s.sources)

    def internal_topics(self) -> tuple[str, ...]:
        """Repartition and changelog topic names, sorted."""
        names = [r.topic(self.application_id) for r in self.repartition_topics]
        names += [
            store.changelog_topic(self.application_id)
            for s in self.subtopologies
            for store in s.stores
            if store.logging
        ]
        return tuple(sorted(names))

    def subscribed_topics(self) -> tuple[str, ...]:
        """Every topic a member subscribes to: external sources and repartition topics."""
        topics = set(self.source_topics)
        topics.update(r.topic(self.application_id) for r in self.repartition_topics)
        return tuple(sorted(topics))

    def partition_counts(self, source_counts: Mapping[str, int]) -> dict[str, int]:
        """Partition count of every topic the topology touches.

        ``source_counts`` gives the external source topics; repartition and changelog topics
        are derived. Raises :class:`TopologyError` for a missing or non-positive count and
        :class:`CopartitionError` when sources of one subtopology differ in partition count.
        """
        counts: dict[str, int] = {}
        for topic in sorted(self.source_topics):
            if topic not in source_counts:
                raise TopologyError(
                    f"no partition count for source topic {topic!r} "
                    f"(known: {sorted(source_counts) or 'none'})"
                )
            n = source_counts[topic]
            if n < 1:
                raise TopologyError(f"source topic {topic!r} has {n} partitions; need at least 1")
            counts[topic] = n
        repartition = self._repartition_counts(counts)
        counts.update({r.topic(self.application_id): repartition[r.name] for r in self.repartition_topics})
        for sub in self.subtopologies:
            n = self._subtopology_partitions(sub, counts)
            for store in sub.stores:
                if store.logging:
                    counts[store.changelog_topic(self.application_id)] = n
        return counts

    def _repartition_counts(self, counts: Mapping[str, int]) -> dict[str, int]:
        resolved = {r.name: r.partitions for r in self.repartition_topics if r.partitions is not None}
        pending = [r.name for r in self.repartition_topics if r.partitions is None]
        writers = {name: [s for s in self.subtopologies if name in s.repartition_sinks] for name in pending}
        while pending:
            progressed = False
            for name in list(pending):
                inputs: list[int] = []
                ready = True
                for sub in writers[name]:
                    inputs += [counts[t] for t in sub.sources]
                    for upstream in sub.repartition_sources:
                        if upstream in resolved:
                            inputs.append(resolved[upstream])
                        else:
                            ready = False
                if ready:
                    if not inputs:
                        raise TopologyError(
                            f"cannot derive the partition count of repartition topic {name!r}: "
                            "give it one explicitly"
                        )
                    resolved[name] = max(inputs)
                    pending.remove(name)
                    progressed = True
            if not progressed:
                raise TopologyError(
                    f"repartition topics {sorted(pending)} form a cycle; give one an explicit partition count"
                )
        return {k: v for k, v in resolved.items() if v is not None}

    def _subtopology_partitions(self, sub: Subtopology, counts: Mapping[str, int]) -> int:
        topics = list(sub.sources) + [self._repartition_topic(r) for r in sub.repartition_sources]
        by_topic = {t: counts[t] for t in sorted(topics)}
        distinct = set(by_topic.values())
        if len(distinct) != 1:
            detail = ", ".join(f"{t}={n}" for t, n in by_topic.items())
            raise CopartitionError(
                f"subtopology {sub.id} reads topics that are not co-partitioned ({detail}); "
                "every source of one subtopology must have the same number of partitions"
            )
        return distinct.pop()

    def _repartition_topic(self, name: str) -> str:
        return repartition_topic(self.application_id, name)

    # -- tasks ----------------------------------------------------------------------------

    def tasks(self, source_counts: Mapping[str, int]) -> tuple[TaskInfo, ...]:
        """Every task of the topology, ordered by task id."""
        counts = self.partition_counts(source_counts)
        out: list[TaskInfo] = []
        for sub in sorted(self.subtopologies, key=lambda s: s.id):
            topics = sorted(list(sub.sources) + [self._repartition_topic(r) for r in sub.repartition_sources])
            logged = sorted(s.changelog_topic(self.application_id) for s in sub.stores if s.logging)
            names = tuple(sorted(s.name for s in sub.stores))
            for p in range(self._subtopology_partitions(sub, counts)):
                out.append(
                    TaskInfo(
                        id=TaskId(sub.id, p),
                        source_partitions=tuple(TopicPartition(t, p) for t in topics),
                        changelog_partitions=tuple(TopicPartition(t, p) for t in logged),
                        store_names=names,
                        stores=tuple(sorted(sub.stores, key=lambda st: st.name)),
                    )
                )
        return tuple(out)

    def task_for(self, tp: TopicPartition) -> TaskId:
        """The task that reads a subscribed topic partition."""
        for sub in self.subtopologies:
            if tp.topic in sub.sources or tp.topic in {
                self._repartition_topic(r) for r in sub.repartition_sources
            }:
                return TaskId(sub.id, tp.partition)
        raise TopologyError(f"topic {tp.topic!r} is not a source of any subtopology")

    # -- identity -------------------------------------------------------------------------

    def describe(self) -> dict[str, object]:
        """A canonical, JSON-ready description (the input of :meth:`fingerprint`)."""
        return {
            "application_id": self.application_id,
            "repartition_topics": [
                {"name": r.name, "partitions": r.partitions}
                for r in sorted(self.repartition_topics, key=lambda r: r.name)
            ],
            "subtopologies": [
                {
                    "id": s.id,
                    "sources": sorted(s.sources),
                    "repartition_sources": sorted(s.repartition_sources),
                    "repartition_sinks": sorted(s.repartition_sinks),
                    "stores": [st.describe() for st in sorted(s.stores, key=lambda st: st.name)],
                }
                for s in sorted(self.subtopologies, key=lambda s: s.id)
            ],
        }

    def fingerprint(self) -> bytes:
        """16 bytes that are equal on every machine exactly when the topologies are equal."""
        canonical = json.dumps(self.describe(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode("utf-8")).digest()[:16]


def _check(t: Topology) -> None:
    if not t.application_id or any(c.isspace() for c in t.application_id):
        raise TopologyError(f"application_id must be non-empty without spaces, got {t.application_id!r}")
    ids = [s.id for s in t.subtopologies]
    if len(set(ids)) != len(ids):
        raise TopologyError(f"duplicate subtopology ids: {sorted(ids)}")
    declared = {r.name for r in t.repartition_topics}
    if len(declared) != len(t.repartition_topics):
        raise TopologyError("duplicate repartition topic names")
    for r in t.repartition_topics:
        if r.partitions is not None and r.partitions < 1:
            raise TopologyError(f"repartition topic {r.name!r} needs at least 1 partition")
    seen_sources: dict[str, int] = {}
    stores: dict[str, int] = {}
    for s in t.subtopologies:
        if not s.sources and not s.repartition_sources:
            raise TopologyError(f"subtopology {s.id} has no source topic")
        for topic in s.sources:
            if topic in seen_sources:
                raise TopologyError(
                    f"topic {topic!r} is a source of subtopologies {seen_sources[topic]} and {s.id}; "
                    "a topic may feed one subtopology only"
                )
            seen_sources[topic] = s.id
        for name in (*s.repartition_sources, *s.repartition_sinks):
            if name not in declared:
                raise TopologyError(f"subtopology {s.id} names undeclared repartition topic {name!r}")
        for store in s.stores:
            if store.name in stores:
                raise TopologyError(
                    f"state store {store.name!r} is declared in subtopologies {stores[store.name]} and {s.id}"
                )
            stores[store.name] = s.id
    for name in declared:
        readers = [s.id for s in t.subtopologies if name in s.repartition_sources]
        if len(readers) != 1:
            raise TopologyError(
                f"repartition topic {name!r} must be read by exactly one subtopology, got {readers}"
            )
