"""The set of tasks one process runs, and how an assignment changes it.

:meth:`TaskSet.reconcile` turns an assignment (the owned partitions plus the leader's
``AssignmentInfo``) into task changes with :func:`streamtasks.streams.plan_tasks`: only tasks
that change are closed, created or recycled. Active tasks are the tasks of the owned
partitions (the partition list is the source of truth); standby and warm-up tasks come from
the userdata. :meth:`TaskSet.process` runs the processors over a fetched batch and records the
input offsets that become committable once :meth:`send_pending` and a producer flush have
delivered what the batch wrote. A record a source serde cannot read, or one its processor raises
on, goes to the app's exception handlers (:mod:`streamtasks.app.handlers`): CONTINUE skips it
(its offset becomes committable, as if processed), FAIL raises :class:`ProcessingError`. An
output record the broker refused goes to the production handler when its batch fails.

Punctuation (:mod:`streamtasks.app.punctuation`): a task starts running here when it is first
processed or punctuated after its restore: its context is made and its subtopology's ``init``
hook runs (:mod:`streamtasks.app.processor`). Stream-time schedules fire after the record that
advanced the stream time past their due time, wall-clock ones from :meth:`TaskSet.punctuate`
(the app's processing loop); what they write is queued, sent and committed with what processing
writes. A task's schedules end when its context is dropped (revoked, closed, recycled).
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from aiokafka import AIOKafkaProducer, ConsumerRecord

from streamtasks.app.context import Output, Record, SourceSerdes
from streamtasks.app.events import AppEvent, ProcessingStarted, TaskClosed, TaskCreated, TaskRecycled, wall_ms
from streamtasks.app.handlers import ErrorHandling
from streamtasks.app.poison import PoisonRecords
from streamtasks.app.processor import AnyProcessor, Processor, resolve_processor
from streamtasks.app.punctuation import PunctuationType
from streamtasks.app.running import RunningTasks
from streamtasks.app.send_callbacks import changelog_done, group_outputs, output_done
from streamtasks.app.sending import (
    by_partition,
    send_failure,
    send_rows,
)
from streamtasks.app.task import Role, StreamTask
from streamtasks.errors import ProcessingError, TopologyError
from streamtasks.protocol.userdata import RUNNING_OFFSET_SUM, AssignmentInfo
from streamtasks.state import CacheBudget, StateDirectory
from streamtasks.state.serdes import Serde
from streamtasks.streams import TaskKind, plan_tasks
from topology.ids import TaskId, TopicPartition
from topology.model import TaskInfo, Topology
from topology.names import repartition_topic

__all__ = ["ProcessingError", "Processor", "TaskSet"]

log = logging.getLogger("streamtasks.app.tasks")

#: An output waiting to be sent, with the input record being processed when it was written.
Queued = tuple[Output, ConsumerRecord[Any, Any] | None]


class TaskSet:
    """Every task on this process (see the module docstring)."""

    def __init__(
        self,
        topology: Topology,
        processors: Mapping[int, AnyProcessor],
        *,
        directory: StateDirectory,
        store_serdes: Mapping[str, tuple[Serde[Any], Serde[Any]]],
        emit: Callable[[AppEvent], None],
        cache_max_bytes: int = 0,
        exactly_once: bool = False,
        errors: ErrorHandling | None = None,
        source_serdes: Mapping[str, SourceSerdes] | None = None,
        clock: Callable[[], int] = wall_ms,
    ) -> None:
        self._topology = topology
        #: Exactly-once: an active task's checkpoint is removed once read, and written again
        #: only when its stores hold exactly what was committed (clean close, recycling).
        self._exactly_once = exactly_once
        self._poison = PoisonRecords(errors or ErrorHandling(), lambda out: self._outbox.append((out, None)))
        self._source_serdes = dict(source_serdes or {})
        #: The input record being processed (outputs take its timestamp and headers).
        self._current: ConsumerRecord[Any, Any] | None = None
        #: The record cache's byte budget, shared by every task's stores (0: no cache).
        self.cache = CacheBudget(cache_max_bytes)
        resolved = {sid: resolve_processor(sid, spec) for sid, spec in processors.items()}
        self._processors: dict[int, Processor] = {sid: fn for sid, (fn, _) in resolved.items()}
        self._directory = directory
        self._serdes = dict(store_serdes)
        self._emit = emit
        self._infos: dict[TaskId, TaskInfo] = {}
        self._logged = frozenset(
            store.name for sub in topology.subtopologies for store in sub.stores if store.logging
        )
        #: The contexts, init hooks and punctuations of the tasks running here.
        self.running = RunningTasks(
            inits={sid: init for sid, (_, init) in resolved.items()},
            repartition_of={
                sub.id: {n: repartition_topic(topology.application_id, n) for n in sub.repartition_sinks}
                for sub in topology.subtopologies
            },
            queue_output=self._queue_output,
            poison=self._poison,
            clock=clock,
        )
        self.tasks: dict[TaskId, StreamTask] = {}
        self._by_partition: dict[TopicPartition, StreamTask] = {}
        self._processed: dict[TopicPartition, int] = {}
        #: Per partition, the first offset of records :meth:`process` was handed but could not
        #: run (see :meth:`take_unprocessed`).
        self._unprocessed: dict[TopicPartition, int] = {}
        self._outbox: list[Queued] = []
        self._send_errors: list[BaseException] = []
        self.info = AssignmentInfo()
        self.records_processed = 0

    @property
    def records_dropped(self) -> int:
        """Records a handler answered CONTINUE for (skipped inputs, dropped outputs)."""
        return self._poison.dropped

    @property
    def records_dead_lettered(self) -> int:
        """Dead-letter records queued for the DLQ topic."""
        return self._poison.dead_lettered

    # -- topology ----------------------------------------------------------------------------

    def set_partition_counts(self, counts: Mapping[str, int]) -> None:
        self._infos = {t.id: t for t in self._topology.tasks(counts)}

    def all_changelog_partitions(self) -> tuple[TopicPartition, ...]:
        return tuple(sorted(tp for info in self._infos.values() for tp in info.changelog_partitions))

    def info_of(self, task: TaskId) -> TaskInfo | None:
        return self._infos.get(task)

    def partition_count(self, subtopology: int) -> int:
        """How many tasks (partitions) ``subtopology`` has (0 before the app started)."""
        return sum(1 for t in self._infos if t.subtopology == subtopology)

    # -- the subscription --------------------------------------------------------------------

    def offset_sums(self) -> dict[TaskId, int]:
        """What this process reports in its subscription: running actives as RUNNING, open
        standbys and restoring actives by their changelog offsets, closed tasks with local
        state by their checkpoints."""
        changelogs = {
            t: info.changelog_partitions for t, info in self._infos.items() if info.changelog_partitions
        }
        sums = {t: s for t, s in self._directory.offset_sums(changelogs).items() if t not in self.tasks}
        for task in self.tasks.values():
            if task.is_active and not task.restoring:
                sums[task.id] = RUNNING_OFFSET_SUM
            elif task.store_of:
                sums[task.id] = task.offset_sum()
        return dict(sorted(sums.items()))

    # -- reconciling an assignment -----------------------------------------------------------

    async def reconcile(
        self,
        owned: Iterable[TopicPartition],
        info: AssignmentInfo,
        end_offsets: Callable[[Iterable[TopicPartition]], Awaitable[Mapping[TopicPartition, int]]],
        *,
        lost: Iterable[TopicPartition] = (),
        keep_revoked: bool = False,
    ) -> None:
        """Apply an assignment: ``owned`` partitions (their tasks run active), ``info``'s
        standbys and warm-ups; ``lost``: partitions that were lost rather than revoked
        (``AssignmentChanged.lost``), whose tasks close dirty. ``keep_revoked`` (KIP-848): an
        active task whose partitions were revoked while ``info`` still names it active here is
        kept as a standby until an assignment gives its next role."""
        self.info = info
        gone = frozenset(lost)
        for tid in [tid for tid, t in self.tasks.items() if t.lost]:  # fenced: closed first
            self._close(tid, gone, wall_ms())
        active, standby = self._roles(owned, info, gone, keep_revoked=keep_revoked)
        current = {tid: TaskKind.ACTIVE if t.is_active else TaskKind.STANDBY for tid, t in self.tasks.items()}
        plan = plan_tasks(current, active=active, standby=standby)
        now = wall_ms()
        for tid in plan.close:
            self._close(tid, gone, now)
        for tid in plan.recycle_to_standby:
            task = self.tasks[tid]
            task.checkpoint()
            task.role, task.warmup = Role.STANDBY, tid in info.warmup_tasks
            task.restore.stop()
            self.running.forget(tid)
            self._emit(TaskRecycled(at_ms=now, task=tid, from_role="active", to_role=self._role_name(task)))
        opening = (*plan.create_active, *plan.recycle_to_active, *plan.create_standby)
        wanted = [tp for tid in opening for tp in self._infos[tid].changelog_partitions]
        ends = dict(await end_offsets(wanted)) if wanted else {}
        for tid in plan.recycle_to_active:
            task = self.tasks[tid]
            before = self._role_name(task)
            task.role, task.warmup = Role.ACTIVE, False
            self._drop_checkpoint_if_eos(tid)
            self._start_restore(task, ends)
            self._emit(TaskRecycled(at_ms=now, task=tid, from_role=before, to_role="active"))
        for tid in (*plan.create_active, *plan.create_standby):
            self._create(tid, Role.ACTIVE if tid in plan.create_active else Role.STANDBY, ends, now)
        for tid, task in self.tasks.items():
            if not task.is_active:
                task.warmup = tid in info.warmup_tasks
        self._by_partition = {
            tp: t for t in self.tasks.values() if t.is_active for tp in t.info.source_partitions
        }
        for tp in list(self._processed):
            if tp not in self._by_partition:
                del self._processed[tp]

    def _roles(
        self,
        owned: Iterable[TopicPartition],
        info: AssignmentInfo,
        gone: frozenset[TopicPartition],
        *,
        keep_revoked: bool,
    ) -> tuple[set[TaskId], set[TaskId]]:
        """The tasks an assignment makes active here (those of the ``owned`` partitions) and
        standby (standbys, warm-ups, and the KIP-848 tasks kept for their next role); tasks
        this topology does not have are logged and left out."""
        active: set[TaskId] = set()
        for tp in owned:
            try:
                active.add(self._topology.task_for(tp))
            except TopologyError as exc:
                log.error("assigned partition %s belongs to no task: %s", tp, exc)
        unknown = sorted(
            str(t) for t in active | info.standby_tasks | info.warmup_tasks if t not in self._infos
        )
        if unknown:
            log.error("assignment names tasks this topology does not have: %s (ignored)", unknown)
        active = {t for t in active if t in self._infos}
        # KIP-848: the target's AssignmentInfo names a task active here while its partitions are
        # still owned elsewhere (pending their release). A standby or warm-up of it stays until
        # they arrive, then is recycled, instead of being closed now and rebuilt then.
        pending = {t for t in info.active_tasks - active if t in self.tasks and not self.tasks[t].is_active}
        # KIP-848: the metadata an assignment comes with is that of the member's epoch, so the
        # revocation that ends the epoch still names the revoked tasks active here; their next
        # role comes with the next epoch. Such a task is kept, stores open, as a standby until
        # then (as Kafka Streams suspends a revoked task until its next assignment), and that
        # assignment keeps it, recycles it to active, or closes it.
        revoked = {
            t
            for t in info.active_tasks - active
            if keep_revoked
            and t in self.tasks
            and self.tasks[t].is_active
            and not gone.intersection(self.tasks[t].info.source_partitions)
        }
        standby = {
            t
            for t in info.standby_tasks | info.warmup_tasks | pending | revoked
            if t in self._infos and t not in active
        }
        return active, standby

    def _close(self, tid: TaskId, gone: frozenset[TopicPartition], now: int) -> None:
        task = self.tasks.pop(tid)
        # A task whose partitions were lost (not revoked) is closed dirty: nothing more is
        # written to its changelog (another member may own it now). Its stores are kept, with
        # a checkpoint of the acknowledged changelog offsets, when they hold nothing the
        # changelog lacks (every write sent and acknowledged: restored from there, they are
        # what a restore from scratch would give). Otherwise, and always under exactly-once
        # (the open transaction's writes are uncommitted), the checkpoint is dropped and the
        # stores are rebuilt from the changelog if the task comes back here.
        clean = not (task.lost or (task.is_active and gone.intersection(task.info.source_partitions)))
        keep = not clean and not self._exactly_once and task.settled()
        task.close(clean=clean, keep_state=keep)
        if not clean and not keep:
            self._directory.checkpoint_path(tid).unlink(missing_ok=True)
        if not clean:
            log.info("task %s lost: closed dirty, local state %s", tid, "kept" if keep else "dropped")
        self.running.forget(tid)
        if not task.lost:  # a fenced task's TaskClosed went out when it was fenced
            self._emit(TaskClosed(at_ms=now, task=tid, role=self._role_name(task), clean=clean))

    def fence(self, lost: Iterable[TopicPartition]) -> list[TaskId]:
        """Partitions ``lost`` (the member's session rule, a fence): their active tasks stop
        at once, without the app lock, which a send to a hung broker may hold for long: no
        record of theirs is processed, no changelog record sent, no checkpoint written
        (:class:`TaskClosed`, dirty, is emitted now), and the next :meth:`reconcile` closes
        their stores. At-least-once only (exactly-once aborts the transaction instead)."""
        if self._exactly_once:
            return []
        gone, now, fenced = frozenset(lost), wall_ms(), []
        for tid, task in sorted(self.tasks.items()):
            if task.is_active and not task.lost and gone.intersection(task.info.source_partitions):
                task.lost = True
                fenced.append(tid)
                self._emit(TaskClosed(at_ms=now, task=tid, role="active", clean=False))
        return fenced

    def _create(self, tid: TaskId, role: Role, ends: Mapping[TopicPartition, int], now: int) -> None:
        task = StreamTask(
            self._infos[tid],
            role=role,
            application_id=self._topology.application_id,
            directory=self._directory,
            store_serdes=self._serdes,
            logged_stores=self._logged,
            warmup=tid in self.info.warmup_tasks,
            cache=self.cache,
        )
        task.open(ends)
        self.tasks[tid] = task
        if role is Role.ACTIVE:
            self._drop_checkpoint_if_eos(tid)
            self._start_restore(task, ends)
        self._emit(TaskCreated(at_ms=now, task=tid, role=self._role_name(task), offset_sum=task.offset_sum()))

    def _drop_checkpoint_if_eos(self, tid: TaskId) -> None:
        # Exactly-once: the stores of an active task get uncommitted writes from now on; were the
        # process to crash, a checkpoint left on disk would vouch for them. Without one the
        # changelogged stores are wiped and restored (StreamTask.open).
        if self._exactly_once:
            self._directory.checkpoint_path(tid).unlink(missing_ok=True)

    def _start_restore(self, task: StreamTask, ends: Mapping[TopicPartition, int]) -> None:
        target = {tp: ends.get(tp, 0) for tp in task.changelog_partitions}
        task.restore.start(target, now_ms=wall_ms())

    @staticmethod
    def _role_name(task: StreamTask) -> str:
        if task.is_active:
            return "active"
        return "warmup" if task.warmup else "standby"

    # -- views -------------------------------------------------------------------------------

    def restoring(self) -> list[StreamTask]:
        return [t for t in self.tasks.values() if t.restoring]

    def standbys(self) -> list[StreamTask]:
        return [t for t in self.tasks.values() if not t.is_active]

    def changelog_readers(self) -> list[StreamTask]:
        """Tasks whose changelogs must be read now: restoring actives and standbys."""
        return [t for t in self.tasks.values() if t.store_of and (t.restoring or not t.is_active)]

    def paused_partitions(self) -> set[TopicPartition]:
        """Source partitions of active tasks that are still restoring."""
        return {tp for t in self.tasks.values() if t.restoring for tp in t.info.source_partitions}

    def roles(self) -> dict[TaskId, str]:
        return {tid: self._role_name(t) for tid, t in sorted(self.tasks.items())}

    # -- processing --------------------------------------------------------------------------

    async def process(self, batch: Mapping[TopicPartition, list[ConsumerRecord[Any, Any]]]) -> int:
        """Run the processors over ``batch``; returns how many records were processed. Records
        whose task is gone or restoring (the assignment changed after they were fetched) are
        not run; :meth:`take_unprocessed` names where they began."""
        done = 0
        for tp, records in batch.items():
            task = self._by_partition.get(tp)
            if task is None or task.restoring or task.closed or task.lost:
                if records:
                    first = records[0].offset
                    self._unprocessed[tp] = min(first, self._unprocessed.get(tp, first))
                continue
            if records and tp not in self._processed:
                self._emit(
                    ProcessingStarted(
                        at_ms=wall_ms(),
                        task=task.id,
                        topic=tp.topic,
                        partition=tp.partition,
                        offset=records[0].offset,
                    )
                )
            ctx = self.running.get(task.id) or await self.running.start(task)
            self.running.carry_in(task, ctx)
            clock = ctx.punctuation
            fn = self._processors[task.id.subtopology]
            serdes = self._source_serdes.get(tp.topic)
            for r in records:
                self._current = r
                task.record_timestamp = r.timestamp
                try:
                    if serdes is None:  # the common case, inline: no serde, no call
                        headers = tuple(r.headers) if r.headers else ()
                        record = Record(
                            topic=r.topic,
                            partition=r.partition,
                            offset=r.offset,
                            key=r.key,
                            value=r.value,
                            timestamp=r.timestamp,
                            headers=headers,
                        )
                    else:
                        record = Record.of(r, serdes)
                except Exception as exc:
                    self._poison.input_failed("deserialization", task.id, r, exc)
                else:
                    try:
                        result = fn(ctx, record)
                        if inspect.isawaitable(result):
                            await result
                    except Exception as exc:
                        self._poison.input_failed("processing", task.id, r, exc)
                    if clock.observe(r.timestamp):
                        self._current = None
                        await self.running.fire(task, ctx, PunctuationType.STREAM_TIME)
                self._processed[tp] = r.offset + 1
                done += 1
            self._current = None
        self.records_processed += done
        return done

    def take_unprocessed(self) -> dict[TopicPartition, int]:
        """Where the records :meth:`process` could not run begin, per partition (and forget
        them). The consumer must hand them out again (``Consumer.rewind``): its position has
        moved past them, and a partition that is still owned would otherwise continue after a
        gap once its task is running."""
        out, self._unprocessed = self._unprocessed, {}
        return out

    async def punctuate(self) -> int:
        """Start the running active tasks that have not started (their ``init`` hooks run),
        then fire the wall-clock schedules that are due. Returns how many fired."""
        return await self.running.punctuate(self._running_tasks())

    def next_wall_clock_ms(self) -> int | None:
        """When a wall-clock schedule is next due (None: none), or 0 when a running active task
        has not started yet: what tells the app's loop to call :meth:`punctuate`."""
        return self.running.next_wall_clock_ms(self._running_tasks())

    def stream_time(self, tid: TaskId) -> int:
        """The stream time of a task running here (-1 before its first record, or not running)."""
        return self.running.stream_time(tid)

    def _running_tasks(self) -> list[StreamTask]:
        return [t for t in self.tasks.values() if t.is_active and not t.restoring and not t.closed]

    def _queue_output(self, output: Output) -> None:
        # Looked up on every call: send_pending swaps in a new outbox, and a context that held
        # the old list's append would write into a list nobody sends.
        punctuating = self.running.punctuating
        if self._current is None and punctuating is not None and output.timestamp is None:
            output = dataclasses.replace(output, timestamp=punctuating)
        self._outbox.append((output, self._current))

    def has_unsent(self) -> bool:
        """Whether outputs wait for :meth:`send_pending` (a dead-letter record a production
        failure queued while the producer flushed, say)."""
        return bool(self._outbox)

    def flush_caches(self) -> int:
        """Write every task's dirty cached store entries to its stores (their changelog records
        join ``pending``): on commit, before :meth:`send_pending`. Returns how many."""
        return sum(task.flush_caches() for task in self.tasks.values())

    async def send_pending(self, producer: AIOKafkaProducer) -> None:
        """Hand every pending changelog and output record to the producer. A refused send is
        also kept for :meth:`raise_send_failures` (its record is dropped: no later commit).
        Records go out one batch per partition (:mod:`streamtasks.app.sending`), in order."""
        try:
            for task in list(self.tasks.values()):
                if task.lost:  # its writes stay unsent (another member may own it): not settled
                    continue
                pending = task.take_pending()
                if pending:
                    keyed = ((tp, key, value, ts, ()) for tp, key, value, ts in pending)
                    for tp, tp_rows in by_partition(keyed).items():
                        task.unacked += len(tp_rows)
                        await send_rows(producer, tp, tp_rows, changelog_done(task, tp, self._send_errors))
            outbox, self._outbox = self._outbox, []
            groups = await group_outputs(producer, outbox)
            for tp, (tp_rows, origins) in groups.items():
                await send_rows(
                    producer,
                    tp,
                    tp_rows,
                    output_done(tp, origins, self._send_errors, self._poison, self._task_of),
                )
        except Exception as exc:
            self._send_errors.append(exc)
            raise

    def _task_of(self, origin: ConsumerRecord[Any, Any] | None) -> TaskId | None:
        task = (
            None if origin is None else self._by_partition.get(TopicPartition(origin.topic, origin.partition))
        )
        return None if task is None else task.id

    def raise_send_failures(self) -> None:
        """Raise while any changelog or output record was not delivered, on every call: the
        failure is sticky. A record that was not delivered is gone from its task's queue, so no
        commit may ever pass its input offset; had the first flush to see it been the only one to
        raise, another commit racing it (``App.stop`` while the loop's commit waited on the
        producer) would commit past the lost records (a loss of 34 input offsets on Tansu, whose
        produce answered NOT_LEADER_OR_FOLLOWER until the batch timed out). The app stops; a
        restart reprocesses from the last commit. Only retriable failures: a
        :class:`TaskCorruptedError` (or :class:`TaskMigratedError`), which the app answers by
        reviving the active tasks (:meth:`close_actives_dirty` forgets the failures)."""
        if self._send_errors:
            raise send_failure(self._send_errors) from self._send_errors[0]

    def committable(self, owned: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """Input offsets whose effects are flushed (call after :meth:`send_pending` + flush)."""
        owned_set = set(owned)
        return {tp: off for tp, off in sorted(self._processed.items()) if tp in owned_set}

    def checkpoint_all(self) -> None:
        """Checkpoint every task (exactly-once: standbys only, see :meth:`_drop_checkpoint_if_eos`)."""
        for task in self.tasks.values():
            if not (self._exactly_once and task.is_active) and not task.lost:
                task.checkpoint()

    def close_actives_dirty(self) -> None:
        """After an abort or a retriable send failure: close every active task without a
        checkpoint and forget what it processed, queued and failed to send; its stores are
        restored from the changelog when the task runs again."""
        now = wall_ms()
        for tid, task in sorted(self.tasks.items()):
            if task.is_active:
                task.close(clean=False)
                self._directory.checkpoint_path(tid).unlink(missing_ok=True)
                del self.tasks[tid]
                self.running.forget(tid)
                if not task.lost:  # a fenced task's TaskClosed went out when it was fenced
                    self._emit(TaskClosed(at_ms=now, task=tid, role="active", clean=False))
        self._by_partition = {}
        self._processed.clear()
        self._unprocessed.clear()
        self._outbox = []
        self._send_errors.clear()

    async def close_all(self, *, clean: bool) -> None:
        now = wall_ms()
        for tid, task in sorted(self.tasks.items()):
            if task.lost:  # fenced: reported then, and never checkpointed
                task.close(clean=False)
                self._directory.checkpoint_path(tid).unlink(missing_ok=True)
                continue
            task.close(clean=clean)
            self._emit(TaskClosed(at_ms=now, task=tid, role=self._role_name(task), clean=clean))
        self.tasks.clear()
        self._by_partition.clear()
        self.running.forget_all()

    def metrics(self) -> dict[str, float]:
        return {
            "records-processed-total": float(self.records_processed),
            "dropped-records-total": float(self.records_dropped),
            "active-tasks": float(sum(1 for t in self.tasks.values() if t.is_active)),
            "standby-tasks": float(sum(1 for t in self.tasks.values() if not t.is_active)),
            "restoring-tasks": float(len(self.restoring())),
        }
