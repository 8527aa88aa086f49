"""A test driver for an App's processors, after Kafka Streams' ``TopologyTestDriver``: the same
topology, processors, store serdes, source serdes and configuration an
:class:`~streamtasks.App` is built from, run in memory::

    with TopologyTestDriver(topology(), {0: split, 1: count}, stores={"counts": (STRING, INT64)},
                            partitions={"text-lines": 4}) as driver:
        lines = driver.input_topic("text-lines", BYTES, STRING)
        counts = driver.output_topic("word-counts", BYTES, BYTES)
        lines.pipe(None, "a b a", timestamp=1_000)
        assert counts.read_key_values() == [(b"a", b"1"), (b"b", b"1"), (b"a", b"2")]
        assert driver.store("counts")["a"] == 2

What runs is the App's own task set (:class:`streamtasks.app.tasks.TaskSet`): every task of the
topology is active here, with real stores in a temporary state directory, the record cache of
``statestore.cache.max.bytes``, and the exception handlers and dead-letter topic of the
configuration. Topics are in-memory logs (:mod:`streamtasks.testing.topics`) with the partition
counts given for the source topics (1 by default) and derived for the internal ones, as the App
derives them. A piped record goes to the partition of its key (the producer's murmur2
partitioner; records without a key go round-robin) and is processed at once, then every record
it caused on a repartition topic (or a source topic) is processed, one at a time in the order
they were written, by the task of its partition; then the caches are flushed, as a commit does.
Stream time comes from the records' timestamps; wall-clock time starts at ``wall_clock_ms`` and
moves only by :meth:`TopologyTestDriver.advance_wall_clock`, which fires the WALL_CLOCK_TIME
punctuations that are due. No broker, no thread, no event loop, no sleep: the driver steps the
task set's coroutines itself, so a processor or punctuation that awaits real IO (or a sleep
longer than 0) raises :class:`DriverError`; ``asyncio.sleep(0)`` is fine.

A record a processor, a source serde or a punctuation fails on goes to the configured handler:
``log_and_fail`` (the default) raises :class:`~streamtasks.errors.ProcessingError` from the call
that piped it; ``log_and_continue`` skips it (and dead-letters it when a topic is configured).
"""

from __future__ import annotations

import itertools
import shutil
import tempfile
from collections.abc import Callable, Coroutine, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

from aiokafka import ConsumerRecord

from streamtasks.app.config import AppConfig, make_app_config
from streamtasks.app.context import SourceSerdes
from streamtasks.app.events import AppEvent
from streamtasks.app.processor import AnyProcessor
from streamtasks.app.sending import partition_for
from streamtasks.app.task import StreamTask
from streamtasks.app.tasks import TaskSet
from streamtasks.errors import ConfigError, StreamTasksError
from streamtasks.protocol.userdata import AssignmentInfo
from streamtasks.state import StateDirectory
from streamtasks.state.serdes import Serde
from streamtasks.testing.records import TestInputTopic, TestOutputTopic
from streamtasks.testing.stores import StoreView, WindowStoreView
from streamtasks.testing.topics import InMemoryProducer, InMemoryTopics, StoredRecord
from topology.ids import TaskId, TopicPartition
from topology.model import Topology

__all__ = ["DriverError", "TopologyTestDriver"]

T = TypeVar("T")

#: The bootstrap servers the configuration is validated with when none are given (never dialled).
NO_BROKER = "in-memory:0"


class DriverError(StreamTasksError):
    """The test driver was misused, or a processor needs what the driver does not have (an
    event loop for real IO, say)."""


def run_now(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to its end without an event loop: it may yield only bare ``yield``s
    (``asyncio.sleep(0)``); one that waits for a future raises :class:`DriverError`."""
    try:
        while True:
            waited = coro.send(None)
            if waited is not None:
                coro.close()
                raise DriverError(
                    f"a processor awaited {waited!r}: the test driver has no event loop, so processors "
                    "and punctuations must not wait for IO or sleep"
                )
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


class TopologyTestDriver:
    """Runs a topology's processors over in-memory topics (see the module docstring)."""

    def __init__(
        self,
        topology: Topology,
        processors: Mapping[int, AnyProcessor],
        *,
        config: Mapping[str, Any] | AppConfig | None = None,
        stores: Mapping[str, tuple[Serde[Any], Serde[Any]]] | None = None,
        source_serdes: Mapping[str, SourceSerdes] | None = None,
        partitions: Mapping[str, int] | None = None,
        wall_clock_ms: int = 0,
        state_dir: str | Path | None = None,
        **settings: Any,
    ) -> None:
        if isinstance(config, AppConfig):
            cfg = config if not settings else make_app_config(config.model_dump(), **settings)
        else:
            values = {"application_id": topology.application_id, "bootstrap_servers": NO_BROKER}
            cfg = make_app_config({**values, **dict(config or {})}, **settings)
        if cfg.application_id != topology.application_id:
            raise ConfigError(
                f"application_id {cfg.application_id!r} differs from the topology's "
                f"{topology.application_id!r}"
            )
        self.config = cfg
        self.topology = topology
        self._wall = wall_clock_ms
        self._own_dir = state_dir is None
        self._root = (
            Path(tempfile.mkdtemp(prefix="streamtasks-driver-")) if state_dir is None else Path(state_dir)
        )
        unknown = sorted(set(partitions or {}) - topology.source_topics)
        if unknown:
            raise ConfigError(f"partitions given for topics the topology does not read: {unknown}")
        counts = topology.partition_counts({t: (partitions or {}).get(t, 1) for t in topology.source_topics})
        #: Every record written, by topic (sources, repartition, changelog and output topics).
        self.topics = InMemoryTopics(counts)
        self._producer: Any = InMemoryProducer(self.topics, self.clock)
        #: Every event the task set emitted (tasks created and closed, ...).
        self.events: list[AppEvent] = []
        self.tasks = TaskSet(
            topology,
            processors,
            directory=StateDirectory(self._root, cfg.application_id),
            store_serdes=dict(stores or {}),
            emit=self.events.append,
            cache_max_bytes=cfg.cache_max_bytes,
            errors=cfg.error_handling(),
            source_serdes=source_serdes,
            clock=self.clock,
        )
        self.tasks.set_partition_counts(counts)
        subscribed = topology.subscribed_topics()
        #: The next offset to process of every partition the tasks read.
        self._positions = {TopicPartition(topic, p): 0 for topic in subscribed for p in range(counts[topic])}
        self._round_robin: dict[str, Iterator[int]] = {}
        self._closed = False
        try:
            run_now(self.tasks.reconcile(list(self._positions), AssignmentInfo(), _nothing_to_restore))
            for task in self.tasks.restoring():
                task.restore.finish(now_ms=self._wall)
            self._step(self.tasks.punctuate())  # every task starts: the init hooks run
            self._drain()
        except BaseException:
            self.close()
            raise

    # -- time --------------------------------------------------------------------------------

    def clock(self) -> int:
        """The driver's wall-clock time in ms."""
        return self._wall

    def advance_wall_clock(self, ms: int) -> int:
        """Move the wall clock ``ms`` forward and fire the WALL_CLOCK_TIME punctuations that
        are due (each at most once, as after a stall); returns how many fired."""
        if ms < 0:
            raise DriverError(f"the wall clock only moves forward, got {ms} ms")
        self._live()
        self._wall += ms
        fired = self._step(self.tasks.punctuate())
        self._drain()
        return fired

    # -- topics ------------------------------------------------------------------------------

    def input_topic(self, name: str, key_serde: Serde[Any], value_serde: Serde[Any]) -> TestInputTopic:
        """A source topic of the topology to pipe records into."""
        if name not in self.topology.source_topics:
            raise DriverError(
                f"{name!r} is not a source topic of the topology (its sources: "
                f"{sorted(self.topology.source_topics)})"
            )
        return TestInputTopic(self, name, key_serde, value_serde)

    def output_topic(self, name: str, key_serde: Serde[Any], value_serde: Serde[Any]) -> TestOutputTopic:
        """A topic to read what the processors wrote to it, in the order they wrote it."""
        return TestOutputTopic(self.topics, name, key_serde, value_serde)

    def pipe_raw(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        *,
        timestamp: int | None = None,
        headers: tuple[tuple[str, bytes], ...] = (),
        partition: int | None = None,
    ) -> StoredRecord:
        """Write one record (bytes) to ``topic`` and process it and all it causes."""
        self._live()
        count = self.topics.partition_count(topic)
        if partition is None:
            partition = self._partition_for(topic, key, count)
        elif not 0 <= partition < count:
            raise DriverError(f"{topic!r} has {count} partitions; there is no partition {partition}")
        stamp = self._wall if timestamp is None else timestamp
        stored = self.topics.append(TopicPartition(topic, partition), key, value, stamp, tuple(headers))
        self._drain()
        return stored

    def _partition_for(self, topic: str, key: bytes | None, count: int) -> int:
        if key is None:
            cycle = self._round_robin.setdefault(topic, itertools.cycle(range(count)))
            return next(cycle)
        return partition_for(key, list(range(count)))

    # -- stores ------------------------------------------------------------------------------

    def store(self, name: str) -> StoreView:
        """Read the store ``name`` across the tasks that have it (by key: the task holding it)."""
        return StoreView(name, self._per_task(name, "store", lambda task: task.typed))

    def window_store(self, name: str) -> WindowStoreView:
        """Read the window store ``name`` across the tasks that have it (``get``, ``fetch``,
        ``fetch_all``, ``all``, ``by_task``, ``task_of``)."""
        return WindowStoreView(name, self._per_task(name, "window store", lambda task: task.windows))

    def _per_task(self, name: str, kind: str, of: Callable[[StreamTask], Mapping[str, T]]) -> dict[TaskId, T]:
        """The ``kind`` ``name`` of every task that has one (``of``: a task's stores of that kind)."""
        self._live()
        found = {tid: of(task)[name] for tid, task in sorted(self.tasks.tasks.items()) if name in of(task)}
        if not found:
            known = sorted({n for task in self.tasks.tasks.values() for n in of(task)})
            raise DriverError(f"no task has a {kind} {name!r} ({kind}s: {known or 'none'})")
        return found

    def stream_time(self, topic: str, partition: int = 0) -> int:
        """The stream time of the task reading ``topic``'s ``partition`` (-1 before any record)."""
        task = self.topology.task_for(TopicPartition(topic, partition))
        return self.tasks.stream_time(task)

    # -- running -----------------------------------------------------------------------------

    def _drain(self) -> None:
        """Process every unread record of the partitions the tasks read, oldest write first."""
        while True:
            oldest: StoredRecord | None = None
            for tp, position in self._positions.items():
                log = self.topics.partition(tp)
                if position < len(log) and (oldest is None or log[position].seq < oldest.seq):
                    oldest = log[position]
            if oldest is None:
                break
            tp = TopicPartition(oldest.topic, oldest.partition)
            self._positions[tp] = oldest.offset + 1
            self._step(self.tasks.process({tp: [_consumer_record(oldest)]}))
        self._commit()

    def _step(self, coro: Coroutine[Any, Any, int]) -> int:
        """Run a task-set step and send what it wrote (to be processed by :meth:`_drain`)."""
        done = run_now(coro)
        run_now(self.tasks.send_pending(self._producer))
        self.tasks.raise_send_failures()
        return done

    def _commit(self) -> None:
        """What a commit does before the offsets: the caches are written to the stores (their
        changelog records to the changelog topics)."""
        self.tasks.flush_caches()
        run_now(self.tasks.send_pending(self._producer))
        self.tasks.raise_send_failures()

    def _live(self) -> None:
        if self._closed:
            raise DriverError("the test driver is closed")

    # -- closing -----------------------------------------------------------------------------

    def close(self) -> None:
        """Close every task and remove the temporary state directory."""
        if self._closed:
            return
        self._closed = True
        try:
            run_now(self.tasks.close_all(clean=False))
        finally:
            if self._own_dir:
                shutil.rmtree(self._root, ignore_errors=True)

    def __enter__(self) -> TopologyTestDriver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


async def _nothing_to_restore(partitions: Any) -> dict[TopicPartition, int]:
    return {tp: 0 for tp in partitions}


def _consumer_record(r: StoredRecord) -> ConsumerRecord[Any, Any]:
    return ConsumerRecord(
        topic=r.topic,
        partition=r.partition,
        offset=r.offset,
        timestamp=r.timestamp,
        timestamp_type=0,
        key=r.key,
        value=r.value,
        checksum=None,
        serialized_key_size=-1 if r.key is None else len(r.key),
        serialized_value_size=-1 if r.value is None else len(r.value),
        headers=r.headers,
    )
