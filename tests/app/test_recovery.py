"""Reviving the active tasks in place (:class:`streamtasks.app.recovery.Recovery`) on a real task
set and state directory: what a send failure amounts to, what a revival closes, wipes and
creates, the consumer told to go back to the committed offsets, fencing, and KIP-572's task
timeout.

The changelog reader and the consumer are stand-ins (tests/app/test_restorer.py's reader); the
transactions are :class:`ExactlyOnce` stand-ins that record what they were asked.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from aiokafka.errors import KafkaTimeoutError, NotEnoughReplicasError, ProducerFenced, RecordTooLargeError

from streamtasks.app import TaskClosed, TaskCreated, TasksRevived
from streamtasks.app.handlers import ErrorHandling, log_and_continue
from streamtasks.app.recovery import Recovery, RecoveryHooks
from streamtasks.app.restorer import Restorer
from streamtasks.app.tasks import TaskSet
from streamtasks.errors import (
    ProcessingError,
    TaskCorruptedError,
    TaskMigratedError,
    TransactionAbortedError,
)
from streamtasks.state import INT64, STRING, StateDirectory
from tests.app.test_restorer import _Reader, _Source
from tests.app.test_tasks import (
    APP,
    CHANGELOG,
    TEXT,
    Fixture,
    _Producer,
    consumer_record,
    count,
    running,
    split,
)
from tests.app.test_tasks import words as wtp
from tests.ids import task as t
from topology import TopicPartition

OUT = "out"


class FailingProducer(_Producer):
    """Fails every batch for ``topic`` with ``error`` (on flush, as the broker would)."""

    def __init__(self, topic: str, error: BaseException) -> None:
        super().__init__()
        self._topic, self._error = topic, error

    async def send_batch(self, batch: Any, topic: str, *, partition: int) -> Any:
        future = await super().send_batch(batch, topic, partition=partition)
        if topic == self._topic:
            self.futures[-1] = (future, self._error)
        return future


class Consumer(_Source):
    """The member's consumer, as the recovery and the restorer use it."""

    def __init__(self, owned: Iterable[TopicPartition]) -> None:
        super().__init__(owned)
        self.resets: list[tuple[TopicPartition, ...]] = []
        self.rejoins: list[str] = []

    async def reset_to_committed(self, partitions: Iterable[TopicPartition]) -> None:
        self.resets.append(tuple(sorted(partitions)))

    def enforce_rebalance(self, reason: str) -> bool:
        self.rejoins.append(reason)
        return True


class Eos:
    """The transactions: counts aborts; ``fatal`` as the producer would say."""

    def __init__(self, *, fatal: bool = False) -> None:
        self.aborts = 0
        self.fatal = fatal
        self.fenced = False

    async def abort(self) -> None:
        self.aborts += 1


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


class RecoveryFixture(Fixture):
    def __init__(self, tmp_path: Path, *, eos: Eos | None = None, task_timeout_ms: int = 300_000) -> None:
        super().__init__(tmp_path)
        self.tasks = TaskSet(
            self.topology,
            {0: split, 1: count},
            directory=StateDirectory(tmp_path, APP),
            store_serdes={"counts": (STRING, INT64)},
            emit=self.events.append,
            exactly_once=eos is not None,
            errors=ErrorHandling(production=log_and_continue, dead_letter_topic="dlq"),
        )
        self.tasks.set_partition_counts(self.topology.partition_counts({TEXT: 4}))
        self.consumer = Consumer([wtp(0), wtp(1)])
        self.reader = _Reader()
        self.restorer = Restorer(
            self.reader,  # type: ignore[arg-type]
            self.tasks,
            topics=self.topology.subscribed_topics(),
            emit=self.events.append,
        )
        self.eos = eos
        self.renewed = 0
        self.clock = Clock()
        self.recovery = Recovery(
            tasks=self.tasks,
            consumer=self.consumer,  # type: ignore[arg-type]
            restorer=self.restorer,
            hooks=RecoveryHooks(
                eos=lambda: self.eos,  # type: ignore[arg-type,return-value]
                renew_producer=self._renew,
                owned=lambda: tuple(sorted(self.consumer.owned)),
                keep_revoked=lambda: False,
                emit=self.events.append,
            ),
            task_timeout_ms=task_timeout_ms,
            clock=self.clock,
        )
        running(self, [wtp(0), wtp(1)])

    async def _renew(self) -> None:
        self.renewed += 1

    def process_and_send(self, producer: _Producer) -> None:
        async def go() -> None:
            await self.tasks.process({wtp(0): [consumer_record(wtp(0), 5, b"a", b"1")]})
            self.tasks.flush_caches()
            await self.tasks.send_pending(producer)
            await producer.flush()

        asyncio.run(go())

    def recover(self, exc: ProcessingError) -> list[Any]:
        before = len(self.events)
        asyncio.run(self.recovery.recover(exc))
        return self.events[before:]


@pytest.fixture
def rf(tmp_path: Path) -> Iterable[RecoveryFixture]:
    fixture = RecoveryFixture(tmp_path)
    yield fixture
    fixture.close()


# -- what a send failure amounts to -------------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "raised"),
    [
        (NotEnoughReplicasError(), TaskCorruptedError),
        (KafkaTimeoutError(), TaskCorruptedError),
        (ProducerFenced(), TaskMigratedError),
        (RecordTooLargeError(), ProcessingError),
    ],
)
def test_a_changelog_send_failure_revives_when_retriable_and_is_fatal_otherwise(
    rf: RecoveryFixture, error: BaseException, raised: type[ProcessingError]
) -> None:
    rf.process_and_send(FailingProducer(CHANGELOG, error))
    with pytest.raises(ProcessingError) as info:
        rf.tasks.raise_send_failures()
    assert type(info.value) is raised
    rf.tasks.close_actives_dirty()
    rf.tasks.raise_send_failures()  # the revived tasks start without the old failures


def test_a_retriable_output_failure_skips_the_production_handler(rf: RecoveryFixture) -> None:
    def to_out(ctx: Any, rec: Any) -> None:
        ctx.send(OUT, key=rec.key, value=rec.value)

    rf.tasks._processors[1] = to_out
    producer = FailingProducer(OUT, NotEnoughReplicasError())
    rf.process_and_send(producer)
    with pytest.raises(TaskCorruptedError):
        rf.tasks.raise_send_failures()
    assert rf.tasks.records_dropped == 0  # CONTINUE was configured: not asked
    assert not rf.tasks.has_unsent()  # and no dead letter queued


# -- a revival --------------------------------------------------------------------------------


def test_a_revival_closes_the_actives_dirty_wipes_them_and_goes_back_to_the_committed_offsets(
    rf: RecoveryFixture,
) -> None:
    rf.process_and_send(_Producer())
    assert rf.tasks.tasks[t("1_0")].typed["counts"].get("a") == 1
    assert rf.tasks.committable([wtp(0)]) == {wtp(0): 6}
    rf.reader.ends = {TopicPartition(CHANGELOG, 0): 100, TopicPartition(CHANGELOG, 1): 100}
    events = rf.recover(TaskCorruptedError("a changelog record was not delivered"))
    closed = [(str(e.task), e.clean) for e in events if isinstance(e, TaskClosed)]
    assert closed == [("1_0", False), ("1_1", False)]
    assert sorted(str(e.task) for e in events if isinstance(e, TaskCreated)) == ["1_0", "1_1"]
    revived = [e for e in events if isinstance(e, TasksRevived)]
    assert [(e.tasks, e.migrated) for e in revived] == [(("1_0", "1_1"), False)]
    back = rf.tasks.tasks[t("1_0")]
    assert back.is_active
    assert back.restoring
    assert back.typed["counts"].get("a") is None  # the write that was not delivered is gone
    assert rf.tasks.committable([wtp(0)]) == {}
    assert rf.consumer.resets == [(wtp(0), wtp(1))]
    assert {wtp(0), wtp(1)} <= rf.consumer.paused  # held until restored
    assert rf.recovery.metrics() == {"task-revivals-total": 1.0, "task-migrations-total": 0.0}
    assert rf.consumer.rejoins == []


def test_fencing_replaces_the_producer_and_rejoins(tmp_path: Path) -> None:
    rf = RecoveryFixture(tmp_path, eos=Eos())
    try:
        events = rf.recover(TaskMigratedError("offsets fenced by the group coordinator (ILLEGAL_GENERATION)"))
        assert rf.eos is not None
        assert rf.eos.aborts == 1
        assert rf.renewed == 1
        assert len(rf.consumer.rejoins) == 1
        assert [e.migrated for e in events if isinstance(e, TasksRevived)] == [True]
        assert rf.recovery.metrics()["task-migrations-total"] == 1.0
    finally:
        rf.close()


def test_an_abort_revives_under_exactly_once_and_a_producer_that_cannot_go_on_is_fatal(
    tmp_path: Path,
) -> None:
    rf = RecoveryFixture(tmp_path, eos=Eos())
    try:
        rf.recover(TransactionAbortedError("transaction aborted: EndTxn timed out"))
        assert rf.eos is not None
        assert rf.eos.aborts == 1
        assert rf.renewed == 0
        assert set(rf.tasks.tasks) == {t("1_0"), t("1_1")}
        rf.eos.fatal = True
        with pytest.raises(TransactionAbortedError, match="cannot go on"):
            rf.recover(TransactionAbortedError("transaction aborted: not authorized"))
        assert rf.tasks.tasks == {}  # closed dirty, not revived
    finally:
        rf.close()


# -- KIP-572: task.timeout.ms --------------------------------------------------------------------


def test_failing_again_task_timeout_after_the_first_without_a_commit_is_fatal(tmp_path: Path) -> None:
    rf = RecoveryFixture(tmp_path, task_timeout_ms=60_000)
    try:
        rf.recover(TaskCorruptedError("NOT_ENOUGH_REPLICAS"))
        rf.clock.now += 59
        rf.recover(TaskCorruptedError("NOT_ENOUGH_REPLICAS"))  # within the timeout: revived again
        rf.clock.now += 2
        with pytest.raises(TaskCorruptedError, match=r"still failing 61\.0 s .* task.timeout.ms is 60000"):
            rf.recover(TaskCorruptedError("NOT_ENOUGH_REPLICAS"))
        assert rf.tasks.tasks == {}
        assert rf.recovery.revivals == 2
    finally:
        rf.close()


def test_a_commit_restarts_the_task_timeout(tmp_path: Path) -> None:
    rf = RecoveryFixture(tmp_path, task_timeout_ms=60_000)
    try:
        rf.recover(TaskCorruptedError("leader moved"))
        rf.clock.now += 50
        rf.recovery.committed()
        rf.clock.now += 50
        rf.recover(TaskCorruptedError("leader moved"))  # 100 s after the first, 50 s after a commit
        assert rf.recovery.revivals == 2
    finally:
        rf.close()


def test_task_timeout_zero_fails_on_the_first_failure(tmp_path: Path) -> None:
    rf = RecoveryFixture(tmp_path, task_timeout_ms=0)
    try:
        with pytest.raises(TaskCorruptedError, match=r"task\.timeout\.ms is 0"):
            rf.recover(TaskCorruptedError("leader moved"))
    finally:
        rf.close()


def test_fencing_is_not_bound_by_the_task_timeout(tmp_path: Path) -> None:
    rf = RecoveryFixture(tmp_path, eos=Eos(), task_timeout_ms=0)
    try:
        rf.recover(TaskMigratedError("producer fenced"))
        assert rf.recovery.migrations == 1
    finally:
        rf.close()


def test_a_producer_fenced_meanwhile_is_replaced_whatever_the_error_said(tmp_path: Path) -> None:
    """A send failure revives, but the abort found the producer fenced (its abort refused):
    the tasks migrated; the producer is replaced and the member rejoins."""
    rf = RecoveryFixture(tmp_path, eos=Eos())
    try:
        assert rf.eos is not None
        rf.eos.fenced = True
        rf.recover(TaskCorruptedError("NOT_LEADER_OR_FOLLOWER"))
        assert rf.renewed == 1
        assert len(rf.consumer.rejoins) == 1
        assert rf.recovery.migrations == 1
    finally:
        rf.close()
