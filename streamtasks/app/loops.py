"""The app's three loops, all on one event loop and all mutating tasks under the app lock:

* processing: fetch a batch from the member's consumer, run the processors, send what they
  wrote; start the tasks that finished restoring and fire the wall-clock punctuations that are
  due (:meth:`TaskSet.punctuate`); commit every ``commit_interval_ms``;
* changelog: the :class:`~streamtasks.app.restorer.Restorer` fetches changelog records for
  restoring actives and standbys and applies them; an active task that reached its restore
  target resumes its source partitions;
* lags: the restorer lists changelog end offsets (kept for the leader's lag computation) and
  reads standby and warm-up lags; they go to the :class:`~streamtasks.streams.LagTrigger`, and
  a rebalance is asked for when it fires or when the leader's probing deadline passed.

:class:`Loops` is given each collaborator it uses; it knows nothing of the app that made it.
A failure in any loop stops them all and is re-raised by :meth:`Loops.run`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from streamtasks.app.events import AppEvent, RebalanceTriggered, wall_ms
from streamtasks.app.member import AppConsumer
from streamtasks.app.restorer import Restorer
from streamtasks.app.tasks import TaskSet
from streamtasks.errors import StreamTasksError
from streamtasks.runtime.consumer import CommitFailedError
from streamtasks.streams import LagTrigger
from topology.ids import TaskId

__all__ = ["LoopTimes", "Loops"]

log = logging.getLogger("streamtasks.app")


@dataclass(frozen=True, slots=True, kw_only=True)
class LoopTimes:
    """The loops' intervals, from the app's configuration."""

    commit_interval_ms: int
    lag_check_interval_ms: int
    #: How long :meth:`Loops.stop` waits for a running batch to finish.
    stop_timeout_ms: int


class Loops:
    """Runs and stops the app's loops (see the module docstring)."""

    def __init__(
        self,
        *,
        consumer: AppConsumer,
        tasks: TaskSet,
        restorer: Restorer,
        trigger: LagTrigger,
        send_pending: Callable[[], Awaitable[None]],
        revivals: Callable[[], int],
        lock: asyncio.Lock,
        commit: Callable[[], Awaitable[None]],
        emit: Callable[[AppEvent], None],
        times: LoopTimes,
    ) -> None:
        self._consumer = consumer
        self._tasks = tasks
        self._restorer = restorer
        self._trigger = trigger
        self._send_pending = send_pending
        self._revivals = revivals
        self._lock = lock
        self._commit = commit
        self._emit = emit
        self._times = times
        self._stop = asyncio.Event()
        self._failed: BaseException | None = None
        self._background: list[asyncio.Task[None]] = []
        #: Set while :meth:`run` is not running, so :meth:`stop` can wait for it to return.
        self._idle = asyncio.Event()
        self._idle.set()
        #: The leader's follow-up (probing) deadline of the current assignment, if any.
        self.probe_at_ms: int | None = None

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._background = [
            loop.create_task(self._guard(self._changelog_loop())),
            loop.create_task(self._guard(self._lag_loop())),
        ]

    async def _guard(self, coro: Awaitable[None]) -> None:
        try:
            await coro
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            log.exception("app loop failed")
            self._failed = self._failed or exc
            self._stop.set()

    async def stop(self) -> None:
        """Stop every loop; wait (up to ``stop_timeout_ms``) for a running :meth:`run` to finish
        its batch and return, so nothing commits through a closing consumer."""
        self._stop.set()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._idle.wait(), self._times.stop_timeout_ms / 1000)
        for task in self._background:
            task.cancel()
        for task in self._background:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._background = []

    async def run(self, until: Callable[[], bool] | None) -> None:
        self._idle.clear()
        try:
            await self._run(until)
        finally:
            self._idle.set()

    async def _run(self, until: Callable[[], bool] | None) -> None:
        consumer, tasks = self._consumer, self._tasks
        interval_s = self._times.commit_interval_ms / 1000
        next_commit = time.monotonic() + interval_s
        while not self._stop.is_set() and (until is None or not until()):
            revivals = self._revivals()
            batch = await consumer.getmany(timeout_ms=100)
            if batch:
                async with self._lock:
                    if self._revivals() != revivals:
                        # The tasks were revived while this batch was fetched: their partitions
                        # start again from the committed offsets (this batch may lie beyond).
                        await consumer.reset_to_committed(batch)
                        continue
                    await tasks.process(batch)
                    consumer.rewind(tasks.take_unprocessed())
                    await self._send_pending()
                # Neither a buffered getmany nor a batched send suspends: yield once per batch so
                # heartbeats, the changelog and lag loops run during a long backlog.
                await asyncio.sleep(0)
            due = tasks.next_wall_clock_ms()
            if due is not None and due <= tasks.running.clock():
                async with self._lock:  # tasks to start (init hooks) or wall-clock punctuations
                    if await tasks.punctuate() or tasks.has_unsent():
                        await self._send_pending()
            if time.monotonic() >= next_commit:
                next_commit = time.monotonic() + interval_s
                try:
                    await self._commit()
                except CommitFailedError as exc:
                    log.info("commit skipped (group rebalancing?): %s", exc)
        if self._failed is not None:
            raise self._failed

    # -- changelog -----------------------------------------------------------------------------

    async def _changelog_loop(self) -> None:
        while not self._stop.is_set():
            batch = await self._restorer.fetch()
            async with self._lock:
                await self._restorer.apply(batch, self._consumer)

    # -- lags ----------------------------------------------------------------------------------

    async def _lag_loop(self) -> None:
        interval = self._times.lag_check_interval_ms / 1000
        while not self._stop.is_set():
            await asyncio.sleep(interval)
            try:
                lags = await self._restorer.read_lags()
            except StreamTasksError as exc:
                log.info("lag check skipped: %s", exc)
                continue
            now = wall_ms()
            for task, lag in lags.items():
                self._trigger.observe(task, lag, now)
            trigger = self._trigger.poll(now)
            if trigger is not None:
                self._enforce(trigger.kind, trigger.reason, task=trigger.task, lag=trigger.lag)
            elif self.probe_at_ms is not None and now >= self.probe_at_ms:
                self.probe_at_ms = None
                self._enforce(
                    "probing", "the leader's follow-up (probing) deadline passed", task=None, lag=None
                )

    def _enforce(self, kind: str, reason: str, *, task: TaskId | None, lag: int | None) -> None:
        took = self._consumer.enforce_rebalance(f"{kind}: {reason}")
        log.info("rebalance requested (%s): %s%s", kind, reason, "" if took else " (one is already running)")
        self._emit(RebalanceTriggered(at_ms=wall_ms(), task=task, lag=lag, trigger=kind, reason=reason))
