"""The app's three loops, all on one event loop and all mutating tasks under ``app.lock``:

* processing: fetch a batch from the member's consumer, run the processors, send what they
  wrote; commit every ``commit_interval_ms``;
* changelog: fetch changelog records for restoring actives and standbys and apply them; an
  active task that reached its restore target resumes its source partitions;
* lags: list changelog end offsets (kept for the leader's lag computation), feed standby and
  warm-up lags to the :class:`~streamtasks.streams.LagTrigger`, and ask for a rebalance when it
  fires or when the leader's probing deadline passed.

A failure in any loop stops them all and is re-raised by :meth:`Loops.run`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from streamtasks.app.events import RebalanceTriggered, RestoreCompleted, wall_ms
from streamtasks.app.task import StreamTask
from streamtasks.errors import StreamTasksError
from streamtasks.runtime.consumer import CommitFailedError
from topology.ids import TaskId

if TYPE_CHECKING:
    from streamtasks.app.app import App

__all__ = ["Loops"]

log = logging.getLogger("streamtasks.app")


class Loops:
    """Runs and stops the app's loops (see the module docstring)."""

    def __init__(self, app: App) -> None:
        self._app = app
        self._stop = asyncio.Event()
        self._failed: BaseException | None = None
        self._background: list[asyncio.Task[None]] = []
        #: Set while :meth:`run` is not running, so :meth:`stop` can wait for it to return.
        self._idle = asyncio.Event()
        self._idle.set()
        self.probe_at_ms: int | None = None

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._background = [
            loop.create_task(self._guard(self._changelog_loop())),
            loop.create_task(self._guard(self._lag_loop())),
        ]

    async def _guard(self, coro: object) -> None:
        try:
            await coro  # type: ignore[misc]
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            log.exception("app loop failed")
            self._failed = self._failed or exc
            self._stop.set()

    async def stop(self) -> None:
        """Stop every loop; wait (up to the request timeout) for a running :meth:`run` to finish
        its batch and return, so nothing commits through a closing consumer."""
        self._stop.set()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._idle.wait(), self._app.config.request_timeout_ms / 1000)
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
        app = self._app
        next_commit = time.monotonic() + app.config.commit_interval_ms / 1000
        while not self._stop.is_set() and (until is None or not until()):
            batch = await app.consumer.getmany(timeout_ms=100)
            if batch:
                async with app.lock:
                    await app.tasks.process(batch)
                    app.consumer.rewind(app.tasks.take_unprocessed())
                    assert app.producer is not None
                    await app.tasks.send_pending(app.producer)
            if time.monotonic() >= next_commit:
                next_commit = time.monotonic() + app.config.commit_interval_ms / 1000
                try:
                    await app.commit()
                except CommitFailedError as exc:
                    log.info("commit skipped (group rebalancing?): %s", exc)
        if self._failed is not None:
            raise self._failed

    # -- changelog -----------------------------------------------------------------------------

    async def _changelog_loop(self) -> None:
        app = self._app
        while not self._stop.is_set():
            if app.reader.tracked:
                batch = await app.reader.fetch(timeout_ms=100)
            else:
                batch = {}
                await asyncio.sleep(0.05)
            async with app.lock:
                app.reader.apply(batch)
                if not batch and app.reader.tracked:
                    for tp, pos in (await app.reader.positions()).items():
                        owner = app.reader.tracked.get(tp)
                        if owner is not None and owner.restoring:
                            owner.changelog_offsets[tp] = max(owner.changelog_offsets.get(tp, 0), pos)
                self.finish_restores()

    def finish_restores(self) -> None:
        """Active tasks that reached their restore target start processing (call under the lock)."""
        finished = [t for t in self._app.tasks.restoring() if t.restore_done()]
        for task in finished:
            self._restored(task)
        if finished:
            self._app.refresh_task_io()

    def _restored(self, task: StreamTask) -> None:
        now = wall_ms()
        started = task.restore_started_ms or now
        task.restore_target = None
        self._app.emit(
            RestoreCompleted(
                at_ms=now, task=task.id, records=task.restored_records, duration_ms=now - started
            )
        )

    # -- lags ----------------------------------------------------------------------------------

    async def _lag_loop(self) -> None:
        app = self._app
        interval = app.config.lag_check_interval_ms / 1000
        while not self._stop.is_set():
            await asyncio.sleep(interval)
            try:
                ends = await app.reader.end_offsets(app.tasks.all_changelog_partitions())
            except StreamTasksError as exc:
                log.info("lag check skipped: %s", exc)
                continue
            app.set_end_offsets(ends)
            now = wall_ms()
            for task in app.tasks.standbys():
                lag = task.lag(ends)
                if lag is not None:
                    app.trigger.observe(task.id, lag, now)
            trigger = app.trigger.poll(now)
            if trigger is not None:
                self._enforce(trigger.kind, trigger.reason, task=trigger.task, lag=trigger.lag)
            elif self.probe_at_ms is not None and now >= self.probe_at_ms:
                self.probe_at_ms = None
                self._enforce(
                    "probing", "the leader's follow-up (probing) deadline passed", task=None, lag=None
                )

    def _enforce(self, kind: str, reason: str, *, task: TaskId | None, lag: int | None) -> None:
        app = self._app
        took = app.consumer.enforce_rebalance(f"{kind}: {reason}")
        log.info("rebalance requested (%s): %s%s", kind, reason, "" if took else " (one is already running)")
        app.emit(RebalanceTriggered(at_ms=wall_ms(), task=task, lag=lag, trigger=kind, reason=reason))
