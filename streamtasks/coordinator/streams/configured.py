"""A streams group's topology against the cluster's topics (Kafka's ``ConfiguredTopology``):
how many tasks each subtopology has, which are stateful, and the statuses that keep the group
from being assigned (MISSING_SOURCE_TOPICS, MISSING_INTERNAL_TOPICS,
INCORRECTLY_PARTITIONED_TOPICS). Pure: the metadata image is handed in."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from streamtasks.coordinator.types import MetadataImage
from streamtasks.membership.streams.records import Task
from streamtasks.protocol.streams_group import StreamsGroupStatus, StreamsStatus, TopicInfo, Topology

__all__ = ["ConfiguredTopology", "configure", "topic_fingerprint", "validate_topology"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfiguredTopology:
    """``partitions``: subtopology id -> its number of tasks (empty when not ready);
    ``stateful``: subtopologies with a state changelog; ``statuses``: why it is not ready;
    ``missing_internal``: the internal topics to create for MISSING_INTERNAL_TOPICS, each with
    the partition count it needs."""

    partitions: Mapping[str, int] = field(default_factory=dict)
    stateful: frozenset[str] = frozenset()
    statuses: tuple[StreamsStatus, ...] = ()
    missing_internal: tuple[tuple[TopicInfo, int], ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "partitions", MappingProxyType(dict(self.partitions)))

    @property
    def ready(self) -> bool:
        return not self.statuses

    def tasks(self) -> frozenset[Task]:
        return frozenset((s, p) for s, n in self.partitions.items() for p in range(n))


NOT_CONFIGURED = ConfiguredTopology()


def validate_topology(topology: Topology) -> str | None:
    """Why a declared topology is invalid (STREAMS_INVALID_TOPOLOGY), or None."""
    seen: set[str] = set()
    for sub in topology.subtopologies:
        if not sub.subtopology_id or sub.subtopology_id in seen:
            return f"subtopology id {sub.subtopology_id!r} is empty or declared twice"
        seen.add(sub.subtopology_id)
        if not sub.source_topics and not sub.repartition_source_topics:
            if sub.source_topic_regex:
                return f"subtopology {sub.subtopology_id}: source topic patterns are not supported"
            return f"subtopology {sub.subtopology_id} has no source topic"
        n_src, n_rep = len(sub.source_topics), len(sub.repartition_source_topics)
        for group in sub.copartition_groups:
            if any(not 0 <= i < n_src for i in group.source_topics) or any(
                not 0 <= i < n_rep for i in group.repartition_source_topics
            ):
                return f"subtopology {sub.subtopology_id}: a copartition group indexes no topic"
        for info in (*sub.state_changelog_topics, *sub.repartition_source_topics):
            if not info.name or info.partitions < 0:
                return f"subtopology {sub.subtopology_id}: internal topic {info.name!r} is invalid"
    return None


def _referenced(topology: Topology) -> list[str]:
    names: set[str] = set()
    for sub in topology.subtopologies:
        names.update(sub.source_topics)
        names.update(t.name for t in sub.repartition_source_topics)
        names.update(t.name for t in sub.state_changelog_topics)
    return sorted(names)


def topic_fingerprint(topology: Topology | None, image: MetadataImage) -> tuple[tuple[str, int], ...]:
    """The topics the topology reads or writes as the image has them (-1: absent)."""
    if topology is None:
        return ()
    out = []
    for name in _referenced(topology):
        topic = image.by_name.get(name)
        out.append((name, -1 if topic is None else topic.num_partitions))
    return tuple(out)


def _status(code: StreamsGroupStatus, what: str, names: list[str]) -> StreamsStatus:
    return StreamsStatus(status_code=int(code), status_detail=f"{what}: {', '.join(sorted(set(names)))}")


def configure(topology: Topology | None, image: MetadataImage) -> ConfiguredTopology:
    """The tasks of ``topology`` on the topics of ``image``, or the statuses saying why none."""
    if topology is None:
        return NOT_CONFIGURED
    count = {t.name: t.num_partitions for t in image.topics}
    missing_source: list[str] = []
    missing_internal: list[tuple[TopicInfo, int]] = []
    bad: list[str] = []
    partitions: dict[str, int] = {}
    for sub in topology.subtopologies:
        sizes: list[int] = []
        for name in sub.source_topics:
            if name in count:
                sizes.append(count[name])
            else:
                missing_source.append(name)
        for info in sub.repartition_source_topics:
            if info.partitions > 0:
                sizes.append(info.partitions)
        n = max(sizes, default=0)
        partitions[sub.subtopology_id] = n
        for group in sub.copartition_groups:
            members = [sub.source_topics[i] for i in group.source_topics]
            members += [sub.repartition_source_topics[i].name for i in group.repartition_source_topics]
            declared = {i.name: i.partitions for i in sub.repartition_source_topics if i.partitions > 0}
            counts = {count.get(m, declared.get(m, -1)) for m in members} - {-1}
            if len(counts) > 1:
                bad.extend(members)
    # repartition topics without a declared count take the count of the subtopologies writing them
    for sub in topology.subtopologies:
        for info in sub.repartition_source_topics:
            if info.partitions <= 0:
                writers = [
                    partitions[w.subtopology_id]
                    for w in topology.subtopologies
                    if info.name in w.repartition_sink_topics
                ]
                partitions[sub.subtopology_id] = max(partitions[sub.subtopology_id], *writers, 0)
    for sub in topology.subtopologies:
        n = partitions[sub.subtopology_id]
        internal = [(i, n) for i in sub.state_changelog_topics]
        internal += [(i, i.partitions if i.partitions > 0 else n) for i in sub.repartition_source_topics]
        for info, want in internal:
            if info.name not in count:
                missing_internal.append((info, want))
            elif want > 0 and count[info.name] != want and not missing_source:
                bad.append(info.name)
    statuses: list[StreamsStatus] = []
    if missing_source:
        statuses.append(
            _status(StreamsGroupStatus.MISSING_SOURCE_TOPICS, "Source topics missing", missing_source)
        )
    if missing_internal and not missing_source:
        statuses.append(
            _status(
                StreamsGroupStatus.MISSING_INTERNAL_TOPICS,
                "Internal topics missing",
                [i.name for i, _ in missing_internal],
            )
        )
    if bad:
        statuses.append(
            _status(StreamsGroupStatus.INCORRECTLY_PARTITIONED_TOPICS, "Topics partitioned wrongly", bad)
        )
    if statuses:
        owed = () if missing_source else tuple(missing_internal)
        return ConfiguredTopology(statuses=tuple(statuses), missing_internal=owed)
    stateful = frozenset(s.subtopology_id for s in topology.subtopologies if s.state_changelog_topics)
    return ConfiguredTopology(partitions=partitions, stateful=stateful)
