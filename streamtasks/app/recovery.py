"""Reviving the active tasks in place after a corruption or an abort, as Kafka Streams'
``TaskManager`` does (``handleCorruption``, ``handleLostAll``), without leaving the group.

What goes wrong, and what follows:

* a changelog, output or repartition record was not delivered for a retriable reason (a leader
  moved, too few in-sync replicas, the request timed out: :class:`TaskCorruptedError`), or an
  exactly-once transaction was aborted (a produce, AddOffsetsToTxn, TxnOffsetCommit or EndTxn
  error, a transaction timeout: :class:`TransactionAbortedError`): the transaction is aborted,
  the active tasks are closed dirty (no checkpoint: their changelogged stores are wiped and
  restored from the changelog, ``read_committed`` under exactly-once, so no aborted write comes
  back), created again for the partitions still owned, and the consumer hands those partitions
  out from their committed offsets;
* this process was fenced (:class:`TaskMigratedError`: ProducerFenced, INVALID_PRODUCER_EPOCH,
  ILLEGAL_GENERATION / FENCED_MEMBER_EPOCH on TxnOffsetCommit): the same, and the producer is
  replaced (a fenced one cannot go on) and the member rejoins (Kafka Streams' TaskMigrated path);
* the same trouble again ``task_timeout_ms`` after the first without a commit in between
  (KIP-572), or a producer that cannot go on for another reason: fatal, ``run()`` raises.

Each revival emits :class:`~streamtasks.app.events.TasksRevived`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

from streamtasks.app.events import AppEvent, TasksRevived, wall_ms
from streamtasks.app.member import AppConsumer
from streamtasks.app.restorer import Restorer
from streamtasks.app.tasks import TaskSet
from streamtasks.app.transactions import ExactlyOnce
from streamtasks.errors import (
    ProcessingError,
    StreamTasksError,
    TaskCorruptedError,
    TaskMigratedError,
    TransactionAbortedError,
)
from topology.ids import TopicPartition

__all__ = ["Recovery", "RecoveryHooks", "is_recoverable"]

log = logging.getLogger("streamtasks.app")


def is_recoverable(exc: BaseException) -> bool:
    """Whether the tasks may be revived after ``exc`` (else it ends ``run()``)."""
    return isinstance(exc, TaskCorruptedError | TransactionAbortedError)


@dataclass(frozen=True, slots=True, kw_only=True)
class RecoveryHooks:
    """What :class:`Recovery` asks of the app."""

    #: The exactly-once transactions now (None at-least-once; replaced after fencing).
    eos: Callable[[], ExactlyOnce | None]
    #: Replace the fenced transactional producer (exactly-once).
    renew_producer: Callable[[], Awaitable[None]]
    #: The owned partitions the tasks read (faust: without changelog / leader topics).
    owned: Callable[[], tuple[TopicPartition, ...]]
    #: KIP-848: keep revoked active tasks as standbys (``TaskSet.reconcile``'s flag).
    keep_revoked: Callable[[], bool]
    emit: Callable[[AppEvent], None]


class Recovery:
    """Revives the active tasks in place (see the module docstring); call under the app lock."""

    def __init__(
        self,
        *,
        tasks: TaskSet,
        consumer: AppConsumer,
        restorer: Restorer,
        hooks: RecoveryHooks,
        task_timeout_ms: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._tasks = tasks
        self._consumer = consumer
        self._restorer = restorer
        self._hooks = hooks
        self._timeout_s = task_timeout_ms / 1000
        self._clock = clock
        #: When the trouble began that no commit has ended yet (KIP-572's task timeout).
        self._since: float | None = None
        #: Bumped on every revival: a batch fetched before one must not be processed.
        self.revivals = 0
        self.migrations = 0

    def committed(self) -> None:
        """A commit went through: the task timeout starts afresh next time."""
        self._since = None

    async def recover(self, exc: ProcessingError) -> None:
        """Abort, close the active tasks dirty, and revive them (or raise when fatal)."""
        eos = self._hooks.eos()
        migrated = isinstance(exc, TaskMigratedError)
        if eos is not None:
            await eos.abort()
            migrated = migrated or eos.fenced  # fenced meanwhile (the abort was refused, say)
            if eos.fatal:
                self._tasks.close_actives_dirty()
                raise TransactionAbortedError(f"the transactional producer cannot go on: {exc}") from exc
        now = self._clock()
        if not migrated:
            if self._since is None:
                self._since = now
            if now - self._since >= self._timeout_s:
                self._tasks.close_actives_dirty()
                waited = now - self._since
                raise TaskCorruptedError(
                    f"{exc} (still failing {waited:.1f} s after the first failure without a commit "
                    f"in between; task.timeout.ms is {self._timeout_s * 1000:.0f})"
                ) from exc
        revived = sorted(str(t.id) for t in self._tasks.tasks.values() if t.is_active)
        log.warning("%s; closing %d active tasks dirty and reviving them", exc, len(revived))
        self._tasks.close_actives_dirty()
        self.revivals += 1
        if migrated:
            self.migrations += 1
            if eos is not None:
                await self._hooks.renew_producer()
            self._rejoin(str(exc))
        await self.revive()
        self._hooks.emit(
            TasksRevived(at_ms=wall_ms(), tasks=tuple(revived), migrated=migrated, error=str(exc))
        )

    async def revive(self) -> None:
        """Create the active tasks of the owned partitions again (restoring from the changelog)
        and hand those partitions out from their committed offsets."""
        owned = self._hooks.owned()
        await self._tasks.reconcile(
            owned, self._tasks.info, self._restorer.end_offsets, keep_revoked=self._hooks.keep_revoked()
        )
        await self.reset(owned)
        self._restorer.sync(self._consumer)
        self._restorer.finish_restores(self._consumer)

    async def lose(self, lost: Iterable[TopicPartition]) -> None:
        """Exactly-once, partitions ``lost``: the open transaction holds writes of their tasks,
        which run elsewhere now, so it must not commit, and the other active tasks' writes go
        with it: abort, and close every active task dirty (the reconcile of the new assignment
        creates the remaining ones again; then :meth:`revived_after_loss`)."""
        eos = self._hooks.eos()
        if eos is not None:
            await eos.abort()
        log.warning("partitions lost: %s; closing the active tasks dirty", sorted(map(str, lost)))
        self._tasks.close_actives_dirty()

    async def revived_after_loss(
        self, owned: Iterable[TopicPartition], lost: Iterable[TopicPartition]
    ) -> None:
        """After :meth:`lose` and the reconcile: the active tasks created again process their
        partitions from the committed offsets."""
        await self.reset(owned)
        self.revivals += 1
        self.migrations += 1
        self._hooks.emit(
            TasksRevived(
                at_ms=wall_ms(),
                tasks=tuple(sorted(str(t.id) for t in self._tasks.tasks.values() if t.is_active)),
                migrated=True,
                error=f"partitions lost: {', '.join(sorted(map(str, lost)))}",
            )
        )

    async def reset(self, partitions: Iterable[TopicPartition]) -> None:
        """Hand ``partitions`` out from their committed offsets."""
        await self._consumer.reset_to_committed(partitions)

    def _rejoin(self, why: str) -> None:
        try:
            self._consumer.enforce_rebalance(f"tasks migrated: {why}")
        except StreamTasksError as exc:  # the member is leaving or closed: nothing to rejoin
            log.info("not rejoining after the tasks migrated: %s", exc)

    def metrics(self) -> dict[str, float]:
        return {"task-revivals-total": float(self.revivals), "task-migrations-total": float(self.migrations)}
