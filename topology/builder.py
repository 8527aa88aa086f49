"""A small fluent API for writing topologies.

    builder = TopologyBuilder("wordcount")
    builder.stream("text-lines").repartition("words").store("counts")
    topology = builder.build()

``stream()`` starts a subtopology from external topics (several topics make a
co-partitioned join); ``repartition()`` ends the current subtopology in an internal topic and
returns the subtopology that reads it; ``store()`` attaches a state store and
``window_store()`` a window store.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from streamtasks.errors import TopologyError
from topology.model import RepartitionTopic, StateStore, Subtopology, Topology

__all__ = ["StreamBuilder", "TopologyBuilder"]


@dataclass(slots=True)
class _Draft:
    id: int
    sources: list[str] = field(default_factory=list)
    repartition_sources: list[str] = field(default_factory=list)
    repartition_sinks: list[str] = field(default_factory=list)
    stores: list[StateStore] = field(default_factory=list)


class StreamBuilder:
    """Handle on one subtopology while it is being written."""

    __slots__ = ("_draft", "_owner")

    def __init__(self, owner: TopologyBuilder, draft: _Draft) -> None:
        self._owner = owner
        self._draft = draft

    @property
    def subtopology_id(self) -> int:
        return self._draft.id

    def store(self, name: str, *, logging: bool = True) -> StreamBuilder:
        """Attach a state store (changelogged unless ``logging=False``); returns ``self``."""
        if not name or "/" in name:
            raise TopologyError(f"invalid store name {name!r}")
        self._draft.stores.append(StateStore(name=name, logging=logging))
        return self

    def window_store(
        self,
        name: str,
        *,
        size_ms: int,
        retention_ms: int,
        retain_duplicates: bool = False,
        logging: bool = True,
    ) -> StreamBuilder:
        """Attach a window store (``streamtasks.state.window``): windows of ``size_ms``, kept
        ``retention_ms`` behind the store's stream time; its changelog is compacted and deleted
        after the retention plus a day, as Kafka Streams configures it. Returns ``self``."""
        if not name or "/" in name:
            raise TopologyError(f"invalid store name {name!r}")
        self._draft.stores.append(
            StateStore(
                name=name,
                logging=logging,
                kind="window",
                window_size_ms=size_ms,
                retention_ms=retention_ms,
                retain_duplicates=retain_duplicates,
            )
        )
        return self

    def repartition(self, name: str, *, partitions: int | None = None) -> StreamBuilder:
        """Write to the internal topic ``<app>-<name>-repartition``; return its reader."""
        self._owner._declare_repartition(RepartitionTopic(name=name, partitions=partitions))
        self._draft.repartition_sinks.append(name)
        reader = self._owner._new_draft()
        reader.repartition_sources.append(name)
        return StreamBuilder(self._owner, reader)

    def through(self, *names: str) -> StreamBuilder:
        """Also read already-declared repartition topics (a join after two repartitions)."""
        self._draft.repartition_sources.extend(names)
        return self


class TopologyBuilder:
    """Collects subtopologies; :meth:`build` returns an immutable, checked :class:`Topology`."""

    __slots__ = ("_application_id", "_drafts", "_repartitions")

    def __init__(self, application_id: str) -> None:
        self._application_id = application_id
        self._drafts: list[_Draft] = []
        self._repartitions: list[RepartitionTopic] = []

    def stream(self, *topics: str) -> StreamBuilder:
        """Start a subtopology reading external ``topics`` (which must be co-partitioned)."""
        if not topics:
            raise TopologyError("stream() needs at least one topic")
        draft = self._new_draft()
        draft.sources.extend(topics)
        return StreamBuilder(self, draft)

    def build(self) -> Topology:
        return Topology(
            application_id=self._application_id,
            subtopologies=tuple(
                Subtopology(
                    id=d.id,
                    sources=tuple(d.sources),
                    repartition_sources=tuple(d.repartition_sources),
                    repartition_sinks=tuple(d.repartition_sinks),
                    stores=tuple(d.stores),
                )
                for d in self._drafts
            ),
            repartition_topics=tuple(self._repartitions),
        )

    def _new_draft(self) -> _Draft:
        draft = _Draft(id=len(self._drafts))
        self._drafts.append(draft)
        return draft

    def _declare_repartition(self, topic: RepartitionTopic) -> None:
        if any(r.name == topic.name for r in self._repartitions):
            raise TopologyError(f"repartition topic {topic.name!r} is declared twice")
        self._repartitions.append(topic)
