"""The tasks that run on this process: their processor contexts, ``init`` hooks and punctuations.

A task *starts running* here the first time it is processed or punctuated after its restore
(created active or recycled to active): :meth:`RunningTasks.start` makes its
:class:`~streamtasks.app.context.ProcessorContext` (with its
:class:`~streamtasks.app.punctuation.TaskPunctuation`) and runs its subtopology's ``init`` hook
(:mod:`streamtasks.app.processor`). It stops running when the task set drops it
(:meth:`RunningTasks.forget`: revoked, lost, closed, recycled to standby), which cancels its
schedules. Its stream time starts at the one its previous owner committed with its input
offsets (:attr:`RunningTasks.carried`, :mod:`streamtasks.app.stream_time`); what this process
commits carries the task's stream time on (:meth:`RunningTasks.commit_metadata`).
:meth:`RunningTasks.fire` runs the due schedules of one time type; while it runs,
:attr:`RunningTasks.punctuating` is the punctuation time, the default timestamp of what the
callbacks write.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping

from streamtasks.app.context import Output, ProcessorContext
from streamtasks.app.poison import PoisonRecords
from streamtasks.app.processor import Init
from streamtasks.app.punctuation import PunctuationType, TaskPunctuation
from streamtasks.app.stream_time import decode_stream_time, encode_stream_time
from streamtasks.app.task import StreamTask
from streamtasks.errors import ProcessingError
from topology.ids import TaskId, TopicPartition

__all__ = ["RunningTasks"]


class RunningTasks:
    """The contexts of the tasks running here (see the module docstring)."""

    def __init__(
        self,
        *,
        inits: Mapping[int, Init | None],
        repartition_of: Mapping[int, dict[str, str]],
        queue_output: Callable[[Output], None],
        poison: PoisonRecords,
        clock: Callable[[], int],
    ) -> None:
        self._inits = dict(inits)
        self._repartition_of = dict(repartition_of)
        self._queue_output = queue_output
        self._poison = poison
        #: The wall clock of WALL_CLOCK_TIME punctuations (ms).
        self.clock = clock
        self._contexts: dict[TaskId, ProcessorContext] = {}
        #: The running task of each source partition (whose stream time its commits carry).
        self._by_partition: dict[TopicPartition, ProcessorContext] = {}
        #: The committed offsets' metadata strings of the source partitions (the consumer's
        #: ``committed_metadata``): a task starts at the largest stream time they carry.
        self.carried: Mapping[TopicPartition, str] = {}
        #: The time of the punctuation running now (its outputs' default timestamp), if any.
        self.punctuating: int | None = None

    def get(self, tid: TaskId) -> ProcessorContext | None:
        return self._contexts.get(tid)

    async def start(self, task: StreamTask) -> ProcessorContext:
        """The task starts running here: make its context and run its ``init`` hook."""
        punctuation = TaskPunctuation(self.clock)
        sources = task.info.source_partitions
        punctuation.stream_time = self._carried_time(task)
        ctx = ProcessorContext(
            task.id,
            task.typed,
            self._repartition_of.get(task.id.subtopology, {}),
            self._queue_output,
            punctuation,
            window_stores=task.windows,
        )
        self._contexts[task.id] = ctx
        self._by_partition.update(dict.fromkeys(sources, ctx))
        init = self._inits.get(task.id.subtopology)
        if init is not None:
            try:
                result = init(ctx)
                if inspect.isawaitable(result):
                    await result
            except Exception as exc:
                self.forget(task.id)
                raise ProcessingError(f"the init hook of task {task.id} failed: {exc!r}") from exc
        return ctx

    def _carried_time(self, task: StreamTask) -> int:
        carried = (decode_stream_time(self.carried.get(tp)) for tp in task.info.source_partitions)
        return max(carried, default=-1)

    def carry_in(self, task: StreamTask, ctx: ProcessorContext) -> None:
        """Before a task's first record: take the stream time its partitions' committed offsets
        carry now. A task may start (a wall-clock pass starts every running task) before its
        committed offsets could be read (held by a pending transaction, KIP-447), so with none;
        its first record is handed out only once they are, with their metadata."""
        if ctx.punctuation.stream_time < 0:
            ctx.punctuation.stream_time = self._carried_time(task)

    def forget(self, tid: TaskId) -> None:
        """The task stops running here: drop its context; its schedules end."""
        ctx = self._contexts.pop(tid, None)
        if ctx is not None:
            ctx.punctuation.cancel_all()
            self._by_partition = {tp: c for tp, c in self._by_partition.items() if c is not ctx}

    def forget_all(self) -> None:
        for tid in list(self._contexts):
            self.forget(tid)

    def stream_time(self, tid: TaskId) -> int:
        """The stream time of a task running here (-1 before its first record, or not running)."""
        ctx = self._contexts.get(tid)
        return -1 if ctx is None else ctx.stream_time

    def commit_metadata(self, offsets: Iterable[TopicPartition]) -> dict[TopicPartition, str]:
        """The metadata strings to commit with the offsets of ``offsets``' partitions: the
        stream time of the task running each (Kafka Streams commits each partition's own time;
        a task here keeps one, the largest of its partitions'). Partitions of no running task,
        or of one that has seen no record yet, get none."""
        out: dict[TopicPartition, str] = {}
        for tp in offsets:
            ctx = self._by_partition.get(tp)
            if ctx is not None and ctx.stream_time >= 0:
                out[tp] = encode_stream_time(ctx.stream_time)
        return out

    async def punctuate(self, tasks: Iterable[StreamTask]) -> int:
        """Start those of the running ``tasks`` that have not started, then fire the wall-clock
        schedules that are due. Returns how many fired."""
        fired = 0
        for task in list(tasks):
            ctx = self._contexts.get(task.id) or await self.start(task)
            due = ctx.punctuation.next_wall_clock_ms()
            if due is not None and due <= self.clock():
                fired += await self.fire(task, ctx, PunctuationType.WALL_CLOCK_TIME)
        return fired

    def next_wall_clock_ms(self, tasks: Iterable[StreamTask]) -> int | None:
        """When a wall-clock schedule of the running ``tasks`` is next due (None: none), or 0
        when one of them has not started yet."""
        times: list[int] = []
        for task in tasks:
            ctx = self._contexts.get(task.id)
            due = 0 if ctx is None else ctx.punctuation.next_wall_clock_ms()
            if due is not None:
                times.append(due)
        return min(times, default=None)

    async def fire(self, task: StreamTask, ctx: ProcessorContext, kind: PunctuationType) -> int:
        """Fire ``kind``'s due schedules of ``task`` (Kafka's ``PunctuationQueue.maybePunctuate``:
        each due one once, at the current time). A callback's failure goes to the processing
        handler (KIP-1033), which has no input record to dead-letter."""
        clock = ctx.punctuation
        queue = clock.queue(kind)
        now = clock.now(kind)
        fired = 0
        before = task.record_timestamp
        self.punctuating = task.record_timestamp = now
        try:
            while (schedule := queue.pop_due(now)) is not None:
                fired += 1
                try:
                    result = schedule.callback(ctx, now)
                    if inspect.isawaitable(result):
                        await result
                except Exception as exc:
                    self._poison.punctuation_failed(task.id, kind.value, now, exc)
                finally:
                    queue.done(schedule, now)
        finally:
            self.punctuating = None
            task.record_timestamp = before
        return fired
