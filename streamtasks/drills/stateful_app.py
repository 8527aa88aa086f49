"""The stateful app the drills, tests and benchmarks run: per key, a count and the latest value.

One subtopology reading ``topic``, two changelogged stores:

* ``latest``: key → the last value seen (idempotent: replaying input changes nothing, so after
  any crash it must equal exactly what was produced last for each key);
* ``counts``: key → how many records with that key were processed (at-least-once: a crash
  replays what was processed after the last commit, so counts may exceed the produced count
  by at most the records of one commit interval).

Records are ``key = b"k<number>"``, ``value = b"<sequence number>"``.

With an ``audit_topic`` the processor also writes ``b"<partition>:<offset>"`` of every input
record it processed to that topic. Those writes are flushed before the input offsets are
committed, like the stores' changelogs, so reading the audit topic back tells, per input
offset, whether it was processed (:func:`streamtasks.drills.ledger.offset_id`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from streamtasks.app import App, ProcessorContext, Record
from streamtasks.app.tasks import Processor
from streamtasks.drills.ledger import offset_id
from streamtasks.state.serdes import INT64, JSON, STRING
from topology import TopologyBuilder
from topology.model import Topology

__all__ = [
    "audited",
    "count_and_latest",
    "faust_counts",
    "faust_counts_app",
    "faust_counts_topology",
    "keyed_topology",
    "make_app",
    "record_for",
]


def keyed_topology(application_id: str, topic: str) -> Topology:
    builder = TopologyBuilder(application_id)
    builder.stream(topic).store("counts").store("latest")
    return builder.build()


def count_and_latest(ctx: ProcessorContext, record: Record) -> None:
    key = (record.key or b"").decode()
    counts = ctx.store("counts")
    counts.put(key, (counts.get(key) or 0) + 1)
    ctx.store("latest").put(key, int((record.value or b"0").decode()))


def audited(audit_topic: str) -> Processor:
    """:func:`count_and_latest` that also reports each processed input offset to ``audit_topic``."""

    def process(ctx: ProcessorContext, record: Record) -> None:
        count_and_latest(ctx, record)
        ctx.send(
            audit_topic,
            key=str(record.partition).encode(),
            value=offset_id(record.partition, record.offset).encode(),
        )

    return process


def record_for(seq: int, keys: int) -> tuple[bytes, bytes]:
    """The ``seq``-th record the drills produce over ``keys`` keys."""
    return f"k{seq % keys}".encode(), str(seq).encode()


def make_app(
    application_id: str,
    topic: str,
    settings: Mapping[str, Any],
    *,
    audit_topic: str | None = None,
    **kwargs: Any,
) -> App:
    return App(
        keyed_topology(application_id, topic),
        {0: count_and_latest if audit_topic is None else audited(audit_topic)},
        config=dict(settings),
        stores={"counts": (STRING, INT64), "latest": (STRING, INT64)},
        application_id=application_id,
        **kwargs,
    )


def faust_counts(audit_topic: str | None) -> Processor:
    """The per-key count of :mod:`streamtasks.drills.faust_worker`'s faust app, as a processor."""

    def process(ctx: ProcessorContext, record: Record) -> None:
        key = (record.key or b"").decode()
        counts = ctx.store("counts")
        counts.put(key, (counts.get(key) or 0) + 1)
        if audit_topic is not None:
            ctx.send(
                audit_topic,
                key=str(record.partition).encode(),
                value=offset_id(record.partition, record.offset).encode(),
            )

    return process


def faust_counts_topology(application_id: str, topic: str) -> Topology:
    """The faust drill app's table as a topology: one subtopology reading ``topic``, store
    ``counts``."""
    builder = TopologyBuilder(application_id)
    builder.stream(topic).store("counts")
    return builder.build()


def faust_counts_app(
    application_id: str,
    topic: str,
    settings: Mapping[str, Any],
    *,
    audit_topic: str | None = None,
    **kwargs: Any,
) -> App:
    """The ``streamtasks.App`` that takes over the faust drill app's table: store ``counts`` with
    faust's formats (key: the record key's bytes as UTF-8, value: the count as JSON), so it
    restores the changelog faust wrote and faust standbys read what it writes."""
    return App(
        faust_counts_topology(application_id, topic),
        {0: faust_counts(audit_topic)},
        config=dict(settings),
        stores={"counts": (STRING, JSON)},
        application_id=application_id,
        **kwargs,
    )
