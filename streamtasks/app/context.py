"""What a processor sees: the record, and a context with its task's stores and outputs.

Processors are plain Python functions, sync or async, registered per subtopology::

    async def count(ctx: ProcessorContext, record: Record) -> None:
        counts = ctx.store("counts")
        counts.put(record.key, (counts.get(record.key) or 0) + 1)

    def split(ctx: ProcessorContext, record: Record) -> None:
        for word in record.value.decode().split():
            ctx.forward("words", key=word.encode(), value=b"1")

``ctx.forward(name, ...)`` writes to the repartition topic ``name`` declared in the topology
(partitioned by key, so the downstream task of that key reads it); ``ctx.send(topic, ...)``
writes to any other topic. Every write and every store change is flushed before the input
offset that caused it is committed (at-least-once).

Timestamps and headers follow Kafka Streams: a record written while processing an input record
carries that input's timestamp and headers unless the processor passes ``timestamp=`` (ms) or
``headers=`` (``()`` for none); a store's changelog record carries the timestamp of the input
record whose processing wrote it.

``ctx.schedule(interval_ms, PunctuationType.STREAM_TIME | WALL_CLOCK_TIME, callback)`` runs
``callback(ctx, timestamp_ms)`` periodically for this task (:mod:`streamtasks.app.punctuation`;
register schedules in the subtopology's ``init`` hook, :mod:`streamtasks.app.processor`);
``ctx.stream_time`` is the largest timestamp among the records the task processed (-1 before
any). A record written by a punctuation carries its ``timestamp_ms`` and no headers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from streamtasks.app.events import wall_ms
from streamtasks.app.handlers import Headers
from streamtasks.app.punctuation import Cancellable, PunctuationType, Punctuator, TaskPunctuation
from streamtasks.errors import UndeclaredTopicError, UnknownStoreError
from streamtasks.state import TypedStore
from streamtasks.state.serdes import Serde
from streamtasks.state.window import TypedWindowStore
from topology.ids import TaskId

__all__ = [
    "Output",
    "ProcessorContext",
    "Record",
    "SourceSerdes",
    "UndeclaredTopicError",
    "UnknownStoreError",
]


#: A source serde pair: (key serde, value serde) for the records of one input topic.
SourceSerdes = tuple[Serde[Any], Serde[Any]]


@dataclass(frozen=True, slots=True, kw_only=True)
class Record:
    """One input record: ``key`` and ``value`` are its bytes, or what the App's source serdes
    for its topic read from them; ``timestamp`` in ms; ``headers`` as they arrived."""

    topic: str
    partition: int
    offset: int
    key: Any
    value: Any
    timestamp: int
    headers: Headers = ()

    @classmethod
    def of(cls, r: Any, serdes: SourceSerdes | None = None) -> Record:
        """The record a processor sees for the consumer record ``r`` (an aiokafka
        ``ConsumerRecord``), its key and value read by ``serdes`` when given (a serde's error
        propagates: the deserialization handler's case)."""
        key, value = r.key, r.value
        if serdes is not None:
            key = None if key is None else serdes[0].deserialize(key)
            value = None if value is None else serdes[1].deserialize(value)
        headers = tuple(r.headers) if r.headers else ()
        return cls(
            topic=r.topic,
            partition=r.partition,
            offset=r.offset,
            key=key,
            value=value,
            timestamp=r.timestamp,
            headers=headers,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Output:
    """A record a processor emitted: to ``topic`` (partition chosen by key when None); a None
    ``timestamp`` / ``headers`` is the input record's (see the module docstring)."""

    topic: str
    key: bytes | None
    value: bytes | None
    partition: int | None = None
    timestamp: int | None = None
    headers: Headers | None = None


class ProcessorContext:
    """Handed to a processor for every record of one task (see the module docstring)."""

    __slots__ = ("_emit", "_punctuation", "_repartition", "_stores", "_windows", "task_id")

    def __init__(
        self,
        task_id: TaskId,
        stores: dict[str, TypedStore[Any, Any]],
        repartition_topics: dict[str, str],
        emit: Callable[[Output], None],
        punctuation: TaskPunctuation | None = None,
        *,
        window_stores: dict[str, TypedWindowStore[Any, Any]] | None = None,
    ) -> None:
        self.task_id = task_id
        self._stores = stores
        self._repartition = repartition_topics
        self._emit = emit
        self._windows = {} if window_stores is None else window_stores
        self._punctuation = punctuation if punctuation is not None else TaskPunctuation(wall_ms)

    @property
    def stream_time(self) -> int:
        """The largest timestamp (ms) among the records this task processed (-1 before any)."""
        return self._punctuation.stream_time

    @property
    def punctuation(self) -> TaskPunctuation:
        """This task's stream time and schedules (read by the task set that runs them)."""
        return self._punctuation

    def schedule(self, interval_ms: int, kind: PunctuationType, callback: Punctuator) -> Cancellable:
        """Run ``callback(ctx, timestamp_ms)`` every ``interval_ms`` of ``kind`` time for this
        task, until the returned handle is cancelled or the task stops running here (see
        :mod:`streamtasks.app.punctuation` for when exactly it fires)."""
        return self._punctuation.schedule(interval_ms, kind, callback)

    def store(self, name: str) -> TypedStore[Any, Any]:
        """The key-value store ``name`` of this task (:class:`UnknownStoreError` otherwise)."""
        try:
            return self._stores[name]
        except KeyError:
            raise self._unknown("store", name) from None

    def window_store(self, name: str) -> TypedWindowStore[Any, Any]:
        """The window store ``name`` of this task (:class:`UnknownStoreError` otherwise)."""
        try:
            return self._windows[name]
        except KeyError:
            raise self._unknown("window store", name) from None

    def _unknown(self, kind: str, name: str) -> UnknownStoreError:
        have = ", ".join(
            [f"{n!r}" for n in sorted(self._stores)] + [f"{n!r} (window)" for n in sorted(self._windows)]
        )
        return UnknownStoreError(f"task {self.task_id} has no {kind} {name!r} (its stores: {have or 'none'})")

    def forward(
        self,
        name: str,
        *,
        key: bytes | None,
        value: bytes | None,
        timestamp: int | None = None,
        headers: Headers | None = None,
    ) -> None:
        """Write to the repartition topic ``name`` (declared by this subtopology); ``timestamp``
        and ``headers`` default to the input record's."""
        topic = self._repartition.get(name)
        if topic is None:
            declared = ", ".join(repr(t) for t in sorted(self._repartition)) or "none"
            raise UndeclaredTopicError(
                f"task {self.task_id} forwards to repartition topic {name!r}, which its subtopology "
                f"does not declare (it declares: {declared}); ctx.send(topic, ...) writes to any topic"
            )
        self._emit(Output(topic=topic, key=key, value=value, timestamp=timestamp, headers=headers))

    def send(
        self,
        topic: str,
        *,
        key: bytes | None,
        value: bytes | None,
        partition: int | None = None,
        timestamp: int | None = None,
        headers: Headers | None = None,
    ) -> None:
        """Write to any topic (a sink); ``timestamp`` and ``headers`` default to the input
        record's."""
        out = Output(
            topic=topic, key=key, value=value, partition=partition, timestamp=timestamp, headers=headers
        )
        self._emit(out)
