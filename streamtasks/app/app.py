"""``streamtasks.App``: a stateful stream application made of tasks.

::

    app = App(topology, {0: split, 1: count}, application_id="wordcount",
              bootstrap_servers="127.0.0.1:9092", num_standby_replicas=1,
              stores={"counts": (STRING, INT64)})
    async with app:
        await app.run()

The process joins the consumer group ``application_id`` with the streamtasks partition
assignor (the task assignor named by ``task_assignor`` places active, standby and warm-up
tasks), runs one :class:`~streamtasks.app.task.StreamTask` per assigned task, and:

* restores an active task from its checkpoint to the changelog end before processing it
  (its source partitions stay paused meanwhile); keeps standby tasks reading their changelog;
* on a cooperative rebalance only closes, creates or recycles the tasks that change;
* commits input offsets only after the stores and every changelog / output record are flushed
  (at-least-once), on ``commit_interval_ms``, before a revocation, and on close; under
  ``processing_guarantee="exactly_once_v2"`` the records and the offsets are committed in one
  transaction of the process's transactional producer (:mod:`streamtasks.app.transactions`);
* revives its active tasks in place after an aborted transaction, a fencing or a record not
  delivered for a retriable reason, within ``task_timeout_ms`` (:mod:`streamtasks.app.recovery`);
* measures standby and warm-up lags every ``lag_check_interval_ms`` and asks for a rebalance
  (KIP-568 ``enforce_rebalance``) when a warm-up is caught up or a standby keeps falling
  behind (:class:`streamtasks.streams.LagTrigger`), and when the leader's probing deadline
  passes;
* runs the member side of version probing (classic protocol): when an assignment says the
  group speaks another userdata version than this process sent (an older leader or member
  joined, or the last old one left), it subscribes with that version from then on and asks for
  a rebalance at once to send it (:meth:`StreamsPartitionAssignor.read_assignment`).

The moving parts live in :mod:`streamtasks.app.tasks` (the task set),
:mod:`streamtasks.app.restorer` (changelog reading, restore progress, end offsets and lags),
:mod:`streamtasks.app.member` (the group member) and :mod:`streamtasks.app.loops`
(processing, changelog and lag loops); this module wires them, handing each its collaborators.
A rebalance travels down once: the member's ``AssignmentChanged`` (with the partitions it lost)
reaches :meth:`App.on_assignment`, which reconciles the tasks and tells the restorer.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from aiokafka import AIOKafkaProducer

from assignors.partition.hooks import MemberAssignment
from streamtasks.app.app_setup import check_app, faust_assignor, resolve_config
from streamtasks.app.changelog import ChangelogReader
from streamtasks.app.clients import (
    create_internal_topics,
    partition_count,
    require_transactional_commits,
    start_producer,
)
from streamtasks.app.config import AppConfig
from streamtasks.app.context import SourceSerdes
from streamtasks.app.events import AppEvent, OffsetsCommitted, SubscriptionVersionChanged, wall_ms
from streamtasks.app.loops import Loops, LoopTimes
from streamtasks.app.member import AppConsumer
from streamtasks.app.processor import AnyProcessor
from streamtasks.app.queries import QueryResult, ReadOnlyStore
from streamtasks.app.recovery import Recovery, RecoveryHooks, is_recoverable
from streamtasks.app.serving import changelog_restorer, metrics_exporter, query_router, streams_assignor
from streamtasks.app.streams_group import streams_wiring
from streamtasks.app.tasks import TaskSet
from streamtasks.app.transactions import ExactlyOnce
from streamtasks.errors import (
    CommitFailedError,
    ProcessingError,
    StreamTasksError,
    TransactionAbortedError,
)
from streamtasks.membership.classic import AssignmentChanged
from streamtasks.protocol.userdata import AssignmentInfo
from streamtasks.runtime.http_server import HttpServers
from streamtasks.state import StateDirectory
from streamtasks.state.serdes import Serde
from streamtasks.streams import AssignmentRead, LagTrigger
from streamtasks.streams.assignment_reader import AssignmentReaders
from streamtasks.streams.faust_protocol import faust_topics
from streamtasks.streams.wiring import streams_wire
from topology.ids import TopicPartition
from topology.model import Topology

__all__ = ["App"]

log = logging.getLogger("streamtasks.app")

#: How many of its latest events an app keeps in :attr:`App.events`.
EVENT_HISTORY = 10_000


class App:
    """A stateful stream application (see the module docstring)."""

    def __init__(
        self,
        topology: Topology,
        processors: Mapping[int, AnyProcessor],
        *,
        config: Mapping[str, Any] | AppConfig | None = None,
        stores: Mapping[str, tuple[Serde[Any], Serde[Any]]] | None = None,
        source_serdes: Mapping[str, SourceSerdes] | None = None,
        on_event: Callable[[AppEvent], None] | None = None,
        **settings: Any,
    ) -> None:
        self.config = cfg = resolve_config(config, settings)
        check_app(cfg, topology, processors)
        self.topology = topology
        wire = streams_wire(cfg.upgrade_from, cfg.emulate_release)
        #: ``upgrade_from="faust"``: faust's protocol, offered first while faust members remain.
        self.faust = faust_assignor(topology, cfg) if wire.advertise_faust else None
        self.directory = StateDirectory(cfg.state_dir, cfg.application_id)
        #: This process's id, kept in the state directory across restarts (read once locked).
        self.process_id: uuid.UUID | None = None
        self.tasks = TaskSet(
            topology,
            processors,
            directory=self.directory,
            store_serdes=dict(stores or {}),
            emit=self.emit,
            cache_max_bytes=cfg.cache_max_bytes,
            exactly_once=cfg.exactly_once,
            errors=cfg.error_handling(),
            source_serdes=source_serdes,
        )
        #: Changelog reading, restore progress, end offsets (the leader's lags) and lag reads.
        self.restorer = changelog_restorer(cfg, topology, self.tasks, self.emit)
        self.assignor = streams_assignor(
            cfg, topology, wire, restorer=self.restorer, tasks=self.tasks, process_id=lambda: self.process_id
        )
        self._on_event = on_event
        self.listeners: list[Callable[[AppEvent], None]] = []  # each event, after on_event
        self.http = HttpServers(cfg.http_security)  # /metrics, interactive queries: one server per address
        #: The most recent events (an interval commit adds one every ``commit_interval_ms``, so
        #: the history is bounded); ``on_event`` sees every one.
        self.events: deque[AppEvent] = deque(maxlen=EVENT_HISTORY)
        self.trigger = LagTrigger(
            acceptable_recovery_lag=cfg.acceptable_recovery_lag,
            growth_window_ms=cfg.standby_lag_growth_ms,
            min_interval_ms=cfg.lag_trigger_min_interval_ms,
        )
        self.consumer = self._app_consumer()
        self.tasks.running.carried = self.consumer.committed_metadata  # stream times carried in
        #: Who reads an assignment: the assignor of the protocol it came under (KIP-848: ours).
        self.readers = AssignmentReaders(self._partition_assignors(), client_side=self.assignor)
        self.producer: AIOKafkaProducer | None = None
        #: Exactly-once: the process's transactions (None under at-least-once).
        self.eos: ExactlyOnce | None = None
        #: A fatal failure that closed the active tasks; no commit happens after it.
        self._aborted: ProcessingError | None = None
        #: Reviving the active tasks in place after a corruption or an abort.
        self.recovery = self._recovery()
        #: Interactive queries (:mod:`streamtasks.app.queries`); ``queries.stores.hosts`` is the
        #: assignment metadata they route by (classic / KIP-848: the AssignmentInfo's).
        self.queries = query_router(self, stores or {})
        self.metrics_exporter = metrics_exporter(self)
        self.lock = asyncio.Lock()
        self._loops: Loops | None = None
        self._started = False
        self._closed = False

    def _partition_assignors(self) -> tuple[Any, ...]:
        """The assignors the member offers, in preference order (faust's first while migrating)."""
        return (self.assignor,) if self.faust is None else (self.faust, self.assignor)

    def _app_consumer(self) -> AppConsumer:
        cfg, topology = self.config, self.topology
        return AppConsumer(
            topology.subscribed_topics() if self.faust is None else faust_topics(topology),
            flushed_offsets=self._flushed_offsets,
            on_assignment=self.on_assignment,
            metadata_of=self.tasks.running.commit_metadata,
            partition_assignors=self._partition_assignors(),
            streams=streams_wiring(
                cfg,
                topology,
                tasks=self.tasks,
                restorer=self.restorer,
                process_id=lambda: self.process_id,
                create_topics=self._create_internal_topics,
            ),
            **cfg.consumer_settings(),
        )

    async def _create_internal_topics(self) -> None:
        await create_internal_topics(self.config, self.topology, await self._source_partition_counts())

    def _recovery(self) -> Recovery:
        return Recovery(
            tasks=self.tasks,
            consumer=self.consumer,
            restorer=self.restorer,
            hooks=RecoveryHooks(
                eos=lambda: self.eos,
                renew_producer=self._renew_producer,
                owned=lambda: self._owned(self.consumer.assignment()),
                keep_revoked=lambda: self.config.group_protocol == "consumer" and not self._closed,
                emit=self.emit,
            ),
            task_timeout_ms=self.config.task_timeout_ms,
        )

    def store(self, name: str, *, allow_standby: bool = False) -> ReadOnlyStore:
        """A read-only view of this process's copy of store ``name`` (:mod:`streamtasks.app.queries`)."""
        return self.queries.stores.store(name, allow_standby=allow_standby)

    async def query(self, store: str, key: Any, *, allow_standby: bool = False) -> QueryResult:
        """``key``'s value in ``store`` from the process hosting it (:mod:`streamtasks.app.queries`)."""
        return await self.queries.query(store, key, allow_standby=allow_standby)

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        """Lock the state directory, create internal topics, join the group."""
        if self._started:
            return
        cfg = self.config
        self.directory.lock()
        self.process_id = self.directory.process_id()
        try:
            if cfg.exactly_once:  # before any transaction: a coordinator without them fails here
                await require_transactional_commits(cfg)
            await self._start_producer()
            await self.restorer.start()
            counts = await self._source_partition_counts()
            if cfg.dead_letter_queue_topic is not None:  # as Kafka Streams, the app does not create it
                assert self.producer is not None
                await partition_count(self.producer, cfg.dead_letter_queue_topic, "dead-letter")
            await create_internal_topics(cfg, self.topology, counts)
            self.tasks.set_partition_counts(self.topology.partition_counts(counts))
            await self.restorer.refresh_end_offsets()
            await self.http.start()  # queries answer "rebalancing" until the member is stable
            await self.consumer.start()
        except BaseException:
            await self._shutdown_clients()
            self.directory.unlock()
            raise
        self._loops = Loops(
            consumer=self.consumer,
            tasks=self.tasks,
            restorer=self.restorer,
            trigger=self.trigger,
            send_pending=self._send_or_revive,
            revivals=lambda: self.recovery.revivals,
            lock=self.lock,
            commit=self.commit,
            emit=self.emit,
            times=LoopTimes(
                commit_interval_ms=cfg.commit_interval_ms,
                lag_check_interval_ms=cfg.lag_check_interval_ms,
                stop_timeout_ms=cfg.request_timeout_ms,
            ),
        )
        self._loops.start()
        self._started = True

    async def _start_producer(self) -> None:
        self.producer, self.eos = await start_producer(self.config, self.process_id, self.consumer)

    async def _renew_producer(self) -> None:
        """Exactly-once, fenced: replace the producer (a fenced one cannot go on)."""
        if self.eos is not None:
            await self.eos.stop()
        self.eos = None
        await self._start_producer()

    async def run(self, *, until: Callable[[], bool] | None = None) -> None:
        """Process until ``stop()`` is called or ``until()`` is true; re-raises a processing
        failure (at-least-once: the offsets of the failed batch are not committed; exactly-once:
        nothing since the last commit is, the open transaction is aborted by ``stop()``)."""
        if not self._started or self._loops is None:
            raise StreamTasksError("call start() (or use `async with app`) before run()")
        try:
            await self._loops.run(until)
        except ProcessingError as exc:
            if self.eos is not None and self._aborted is None:
                # Exactly-once: the open transaction holds the failed batch's writes; stop()
                # aborts it, and nothing past the last commit becomes visible.
                self._aborted = exc
            raise

    async def stop(self) -> None:
        """Commit, leave the group (dynamic members), close every task cleanly."""
        if self._closed or not self._started:
            return
        self._closed = True
        if self._loops is not None:
            await self._loops.stop()
        committed = True
        try:
            await self.commit()
        except CommitFailedError:
            pass  # exactly-once, rebalancing: the member's leave commits (below)
        except StreamTasksError:
            committed = False
        await self.consumer.stop()
        async with self.lock:
            eos = self.eos
            if eos is not None and (not committed or self._aborted is not None or eos.in_transaction):
                # Exactly-once: the stores may hold writes no transaction committed.
                await eos.abort()
                self.tasks.close_actives_dirty()
            await self.tasks.close_all(clean=True)
        await self._shutdown_clients()
        self.directory.unlock()

    async def __aenter__(self) -> App:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def _stop_http(self) -> None:
        await self.queries.close()
        await self.http.stop()

    async def _shutdown_clients(self) -> None:
        await self._stop_http()
        await self.restorer.stop()
        if self.eos is not None:
            await self.eos.stop()
        elif self.producer is not None:
            await self.producer.stop()

    # -- commits -----------------------------------------------------------------------------

    async def send_pending(self) -> None:
        """Hand every pending changelog and output record to the producer (exactly-once: in
        the open transaction, begun first if none is)."""
        assert self.producer is not None
        if self._aborted is not None:
            raise self._aborted
        if self.eos is not None:
            try:
                await self.eos.begin()
            except Exception as exc:
                raise TransactionAbortedError(f"no transaction could begin: {exc!r}") from exc
        try:
            await self.tasks.send_pending(self.producer)
        except Exception as exc:
            if self.eos is not None:  # fenced or aborted meanwhile: the producer refused the send
                self.eos.raise_if_failed(exc)
            self.tasks.raise_send_failures()  # the failure, classified (retriable, fenced, fatal)
            raise

    async def _send_or_revive(self) -> None:
        """The processing loop's :meth:`send_pending` (under the lock): a retriable failure
        revives the active tasks instead of ending ``run()``."""
        try:
            await self.send_pending()
        except ProcessingError as exc:
            await self._recover(exc)

    async def _recover(self, exc: ProcessingError) -> None:
        """Under the lock: revive the active tasks after ``exc`` if it allows (re-raise it
        otherwise). When the app is closing, the tasks are only closed dirty (exactly-once:
        the open transaction aborted) and the stop goes on: nothing past the last commit is
        committed, which is what a stop may leave behind (a commit answered ILLEGAL_GENERATION
        because the group rebalances while the app stops used to end ``run()`` with
        :class:`TaskMigratedError`)."""
        if self._aborted is not None:
            raise self._aborted  # a fatal failure came first
        if not is_recoverable(exc):
            raise exc
        if self._closed:
            if self.eos is not None:
                await self.eos.abort()
            self.tasks.close_actives_dirty()
            log.info("stopping: %s; the active tasks closed dirty, not revived", exc)
            return
        try:
            await self.recovery.recover(exc)
        except ProcessingError as fatal:
            self._aborted = fatal
            raise

    async def flush(self, *, within_ms: int | None = None) -> None:
        """Flush the record caches, deliver every pending changelog and output record, then
        checkpoint every task (exactly-once: standbys only). ``within_ms``: give up waiting
        for the acknowledgements after that long with :class:`CommitFailedError`, nothing
        checkpointed (the sends go on)."""
        assert self.producer is not None
        self.tasks.flush_caches()
        await self.send_pending()
        if within_ms is None:
            await self.producer.flush()
        else:
            try:
                await asyncio.wait_for(asyncio.shield(self.producer.flush()), within_ms / 1000)
            except TimeoutError:
                raise CommitFailedError(
                    f"commit skipped: records not acknowledged within {within_ms} ms (a broker hangs?)"
                ) from None
        if self.tasks.has_unsent():  # dead-letter records of outputs the broker refused
            await self.send_pending()
            await self.producer.flush()
        self.tasks.raise_send_failures()
        self.tasks.checkpoint_all()

    async def commit(self) -> None:
        """Flush, then commit the processed input offsets of owned partitions (exactly-once:
        in the transaction that holds the records, under the lock)."""
        if self.eos is not None and not self.consumer.stable:
            # The offsets would carry a generation the group is leaving; the revocation commit
            # (or the next interval) commits them.
            raise CommitFailedError("exactly-once commit deferred: the group is rebalancing")
        async with self.lock:
            try:
                # A partition leader that hangs holds its acknowledgements for up to the
                # producer's request timeout, and the app lock with them: the rebalance that
                # gives up the partitions when the group coordinator hangs too (the member's
                # session rule) would wait behind it, its member loop blocked. So the periodic
                # commit waits half a session timeout at most, then is skipped (at-least-once:
                # the next one commits; nothing is checkpointed meanwhile).
                await self.flush(within_ms=None if self.eos is not None else self._flush_bound_ms)
                offsets = self.tasks.committable(self.consumer.assignment())
                if self.eos is not None:
                    await self._commit_transaction(offsets)
                    return
            except ProcessingError as exc:
                await self._recover(exc)
                return
            metadata = self.tasks.running.commit_metadata(offsets)  # as processed up to offsets
        if offsets:
            await self.consumer.commit(offsets, metadata)
            self._committed(offsets, confirmed=True)

    @property
    def _flush_bound_ms(self) -> int:
        """How long the periodic commit waits for acknowledgements under the app lock."""
        return min(self.config.request_timeout_ms, self.config.session_timeout_ms // 2)

    async def _commit_transaction(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Exactly-once, under the lock: commit the open transaction with ``offsets`` (an abort
        raises :class:`TransactionAbortedError`; the caller revives the tasks)."""
        assert self.eos is not None
        await self.eos.commit(offsets, self.tasks.running.commit_metadata(offsets))
        if offsets:
            self._committed(offsets, confirmed=True)

    async def _flushed_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """Before the member commits ``partitions`` (a revocation): flush under the app lock
        (no batch is half-processed), then their processed input offsets. Exactly-once: every
        owned partition's offsets are committed in the transaction now, and the member commits
        nothing more."""
        async with self.lock:
            if self._aborted is not None:
                return {}  # a fatal failure closed the active tasks: nothing to commit
            try:
                await self.flush()
                if self.eos is not None:
                    await self._commit_transaction(self.tasks.committable(self.consumer.assignment()))
                    return {}
            except ProcessingError as exc:
                await self._recover(exc)
                return {}
            offsets = self.tasks.committable(partitions)
        if offsets:
            self._committed(offsets, confirmed=False)
        return offsets

    def _committed(self, offsets: Mapping[TopicPartition, int], *, confirmed: bool) -> None:
        self.recovery.committed()
        rows = tuple((tp.topic, tp.partition, off) for tp, off in sorted(offsets.items()))
        self.emit(OffsetsCommitted(at_ms=wall_ms(), offsets=rows, confirmed=confirmed))

    # -- what the group protocol asks of us ---------------------------------------------------

    async def _source_partition_counts(self) -> dict[str, int]:
        assert self.producer is not None
        topics = sorted(self.topology.source_topics)
        return {topic: await partition_count(self.producer, topic, "source") for topic in topics}

    async def on_assignment(self, change: AssignmentChanged) -> None:
        """The member applied an assignment: reconcile the tasks (under the app lock), closing
        the tasks of lost partitions dirty, then restore and resume through the restorer."""
        # Lost partitions: their tasks stop now, not once the lock is free (a send to a hung
        # broker can hold it): another member may be processing them already.
        self.tasks.fence(change.lost)
        async with self.lock:
            revive = self.eos is not None and bool(change.lost) and self._aborted is None
            if revive:  # the transaction holds the lost tasks' writes: abort, close the actives
                await self.recovery.lose(change.lost)
            read = self.readers.read(
                self.consumer.protocol_name,
                MemberAssignment(
                    partitions=change.owned, user_data=change.user_data, generation=change.generation
                ),
                # KIP-848 versions assignor metadata itself (MetadataVersion in the heartbeat).
                follow_version=self.config.group_protocol == "classic",
            )
            info = AssignmentInfo() if read is None else read.info
            owned = self._owned(change.owned)
            await self.tasks.reconcile(
                owned,
                info,
                self.restorer.end_offsets,
                lost=change.lost,
                # KIP-848 revokes under the ending epoch's metadata (not when the app stops)
                keep_revoked=self.config.group_protocol == "consumer" and not self._closed,
            )
            if revive:  # the reconcile above created them again
                await self.recovery.revived_after_loss(owned, change.lost)
            self.restorer.sync(self.consumer)
            self.restorer.finish_restores(self.consumer)
            self.trigger.reset(
                (t.id for t in self.tasks.standbys() if t.warmup),
                (t.id for t in self.tasks.standbys() if not t.warmup),
                wall_ms(),
            )
            if self._loops is not None:
                self._loops.probe_at_ms = info.next_rebalance_ms
            if read is not None and read.rejoin:
                self._rejoin_for_version(read)

    def _owned(self, owned: Iterable[TopicPartition]) -> tuple[TopicPartition, ...]:
        """The owned partitions the tasks read (a faust assignment also holds changelog and
        leader-topic partitions)."""
        if self.faust is None:
            return tuple(owned)
        subscribed = set(self.topology.subscribed_topics())
        return tuple(tp for tp in owned if tp.topic in subscribed)

    def _rejoin_for_version(self, read: AssignmentRead) -> None:
        """Version probing: ask for a rebalance now, so the group sees the new version."""
        assert read.version is not None
        info, to_version = read.info, read.version.new_used_version
        reason = (
            f"version probing: sent userdata v{read.sent_version}, got a v{info.version} assignment, "
            f"the group speaks v{info.latest_supported_version}; rejoining with v{to_version}"
        )
        try:
            took = self.consumer.enforce_rebalance(reason)
            note = "" if took else " (a rebalance is already under way)"
        except StreamTasksError as exc:  # the member is leaving or closed: nothing to rejoin
            took, note = False, f" (not rejoining: {exc})"
        log.info("%s%s", reason, note)
        self.emit(
            SubscriptionVersionChanged(
                at_ms=wall_ms(),
                from_version=read.sent_version,
                to_version=to_version,
                assignment_version=info.version,
                group_version=info.latest_supported_version,
                rebalance_requested=took,
            )
        )

    @property
    def reader(self) -> ChangelogReader:
        """The changelog reader (owned by :attr:`restorer`)."""
        return self.restorer.reader

    def refresh_task_io(self) -> None:
        """Pause the source partitions of restoring tasks, resume the others, and point the
        changelog reader at the tasks that read changelogs now (:meth:`Restorer.sync`)."""
        self.restorer.sync(self.consumer)

    def emit(self, event: AppEvent) -> None:
        self.events.append(event)
        if self._on_event is not None:
            try:
                self._on_event(event)
            except Exception:
                log.exception("on_event callback failed for %s", type(event).__name__)
        for listener in self.listeners:
            listener(event)

    def set_end_offsets(self, ends: Mapping[TopicPartition, int]) -> None:
        self.restorer.remember_end_offsets(ends)

    @property
    def started(self) -> bool:
        return self._started

    @property
    def closed(self) -> bool:
        return self._closed

    def metrics(self) -> dict[str, float]:
        out = dict(self.consumer.metrics()) if self._started else {}
        out.update(self.tasks.metrics())
        out.update(self.recovery.metrics())
        return out
