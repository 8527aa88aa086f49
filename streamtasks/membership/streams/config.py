"""What a streams member is configured with (pure record; the runtime builds it from its
pydantic settings)."""

from __future__ import annotations

from dataclasses import dataclass

from streamtasks.protocol.streams_group import Endpoint, KeyValue, TopicInfo, Topology

__all__ = ["StreamsMemberConfig"]


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamsMemberConfig:
    """``member_id`` is chosen by the client and kept for the member's lifetime (rejoins
    included); ``process_id`` names the process (several members may share it).
    ``instance_id`` makes the member static (it leaves with epoch -2)."""

    group_id: str
    member_id: str
    process_id: str
    topology: Topology
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = 300_000
    user_endpoint: Endpoint | None = None
    client_tags: tuple[KeyValue, ...] = ()
    #: Before the first response tells the interval.
    heartbeat_interval_ms: int = 5_000
    retry_backoff_ms: int = 100
    request_timeout_ms: int = 30_000

    @property
    def topics(self) -> tuple[str, ...]:
        """Every topic the topology's tasks read (source and repartition source topics), sorted."""
        return tuple(
            sorted(
                {t for s in self.topology.subtopologies for t in s.source_topics}
                | {t.name for s in self.topology.subtopologies for t in s.repartition_source_topics}
            )
        )

    @property
    def internal_topics(self) -> tuple[TopicInfo, ...]:
        """The topology's changelog and repartition topics, in topology order."""
        found: dict[str, TopicInfo] = {}
        for sub in self.topology.subtopologies:
            for topic in (*sub.state_changelog_topics, *sub.repartition_source_topics):
                found.setdefault(topic.name, topic)
        return tuple(found.values())
