"""ExactlyOnce's commit with an error injected at each step of a transaction: a record send,
AddOffsetsToTxn, TxnOffsetCommit (our v3 step) and EndTxn. What it raises decides what the app
does: :class:`TransactionAbortedError` revives the tasks in place, :class:`TaskMigratedError`
(fenced) also replaces the producer and rejoins, :attr:`ExactlyOnce.fatal` ends ``run()``.

The producer is a stand-in around aiokafka's real ``TransactionManager``, playing its sender's
steps in line, as aiokafka's handlers would on each answer.
"""

from __future__ import annotations

import asyncio
import contextlib
from types import SimpleNamespace
from typing import Any

import pytest
from aiokafka.errors import (
    CoordinatorNotAvailableError,
    IllegalOperation,
    NotEnoughReplicasError,
    ProducerFenced,
    TransactionalIdAuthorizationFailed,
)
from aiokafka.producer.transaction_manager import TransactionManager
from aiokafka.structs import TopicPartition as AioTopicPartition
from aiokafka.util import commit_structure_validate

from streamtasks.app.transactions import ExactlyOnce
from streamtasks.errors import TaskMigratedError, TransactionAbortedError
from streamtasks.protocol.errors import KafkaErrorCode
from streamtasks.protocol.txn_offsets import TxnOffsetCommitResponse
from topology import TopicPartition

TP = TopicPartition("in", 0)


class TxnProducer:
    """A transactional producer whose broker answers are chosen by the test."""

    def __init__(self, *, fail_at: str | None = None, error: BaseException | None = None) -> None:
        self._txn_manager = TransactionManager("app-1", 10_000)
        self._txn_manager.set_pid_and_epoch(7, 3)
        self._sender = SimpleNamespace(_do_txn_offset_commit=None)
        self.fail_at, self.error = fail_at, error
        self.ended: list[str] = []

    async def begin_transaction(self) -> None:
        self._txn_manager.begin_transaction()
        if self.fail_at == "produce":  # a batch of the transaction failed (Sender: abortable)
            self._txn_manager.error_transaction(self.error)

    async def send_offsets_to_transaction(self, offsets: Any, group_id: str) -> None:
        txn = self._txn_manager
        fut = txn.add_offsets_to_txn(commit_structure_validate(offsets), group_id)
        if self.fail_at == "add_offsets":
            txn.error_transaction(self.error)  # AddOffsetsToTxnHandler on a non-retriable answer
        else:
            txn.consumer_group_added(group_id)
            pending, gid = txn.offsets_to_commit()
            await self._sender._do_txn_offset_commit(pending, gid)
        await asyncio.shield(fut)

    async def commit_transaction(self) -> None:
        txn = self._txn_manager
        txn.committing_transaction()
        if self.fail_at == "end_txn_fenced":
            txn.fatal_error(ProducerFenced())  # INVALID_PRODUCER_EPOCH ends aiokafka's sender
        elif self.fail_at == "end_txn_fatal":
            txn.fatal_error(self.error)
        elif self.fail_at == "end_txn":
            txn.error_transaction(self.error)
        else:
            txn.complete_transaction()
            self.ended.append("commit")
        await txn.wait_for_transaction_end()

    async def abort_transaction(self) -> None:
        self._txn_manager.aborting_transaction()
        self._txn_manager.complete_transaction()
        self.ended.append("abort")


class Member:
    """The member's TxnOffsetCommit v3: answers ``code`` for every partition."""

    def __init__(self, code: KafkaErrorCode = KafkaErrorCode.NONE) -> None:
        self.code = code
        self.sent: list[dict[str, Any]] = []

    async def commit_in_transaction(self, offsets: Any, **kwargs: Any) -> TxnOffsetCommitResponse:
        self.sent.append(kwargs)
        return TxnOffsetCommitResponse(errors=tuple((tp, self.code) for tp in offsets))


def commit(
    *,
    fail_at: str | None = None,
    error: BaseException | None = None,
    code: KafkaErrorCode = KafkaErrorCode.NONE,
) -> tuple[TxnProducer, Member, ExactlyOnce, BaseException | None]:
    """Begin a transaction and commit it with an offset; the error the commit raised, if any."""

    async def go() -> tuple[TxnProducer, Member, ExactlyOnce, BaseException | None]:
        producer, member = TxnProducer(fail_at=fail_at, error=error), Member(code)
        eos = ExactlyOnce(producer, member, group_id="app", request_timeout_ms=1_000)  # type: ignore[arg-type]
        try:
            await eos.begin()
            await eos.commit({TP: 42})
        except Exception as exc:
            return producer, member, eos, exc
        return producer, member, eos, None

    return asyncio.run(go())


def test_a_clean_commit_sends_the_offsets_with_the_producer_epoch() -> None:
    producer, member, eos, raised = commit()
    assert raised is None
    assert producer.ended == ["commit"]
    assert eos.commits == 1
    assert member.sent == [
        {"transactional_id": "app-1", "producer_id": 7, "producer_epoch": 3, "metadata": {}}
    ]


@pytest.mark.parametrize(
    ("fail_at", "error"),
    [
        ("produce", NotEnoughReplicasError()),
        ("add_offsets", CoordinatorNotAvailableError()),
        ("end_txn", CoordinatorNotAvailableError()),
    ],
)
def test_an_abortable_error_at_each_step_aborts_and_is_not_a_migration(
    fail_at: str, error: Exception
) -> None:
    producer, _, eos, raised = commit(fail_at=fail_at, error=error)
    assert isinstance(raised, TransactionAbortedError)
    assert not isinstance(raised, TaskMigratedError)
    assert producer.ended == ["abort"]
    assert not eos.fatal


@pytest.mark.parametrize(
    "code",
    [KafkaErrorCode.ILLEGAL_GENERATION, KafkaErrorCode.FENCED_MEMBER_EPOCH, KafkaErrorCode.UNKNOWN_MEMBER_ID],
)
def test_a_fenced_member_on_txn_offset_commit_is_a_migration(code: KafkaErrorCode) -> None:
    producer, _, eos, raised = commit(code=code)
    assert isinstance(raised, TaskMigratedError)
    assert code.name in str(raised)
    assert producer.ended == ["abort"]
    assert not eos.fatal


def test_a_fenced_producer_on_end_txn_is_a_migration_not_a_fatal_error() -> None:
    producer, _, eos, raised = commit(fail_at="end_txn_fenced")
    assert isinstance(raised, TaskMigratedError)
    assert producer._txn_manager.is_fatal_error()
    assert eos.fenced
    assert not eos.fatal  # replaced, not the end of the app


def test_any_other_fatal_producer_error_is_fatal() -> None:
    _, _, eos, raised = commit(fail_at="end_txn_fatal", error=TransactionalIdAuthorizationFailed())
    assert isinstance(raised, TransactionAbortedError)
    assert not isinstance(raised, TaskMigratedError)
    assert eos.fatal


def refused_send(state: str) -> BaseException | None:
    """A send refused (aiokafka's ``IllegalOperation``) with the transaction in ``state``: what
    :meth:`ExactlyOnce.raise_if_failed` makes of it (None: it returned)."""

    async def go() -> BaseException | None:
        producer = TxnProducer()
        eos = ExactlyOnce(producer, Member(), group_id="app", request_timeout_ms=1_000)  # type: ignore[arg-type]
        await eos.begin()
        txn = producer._txn_manager
        if state == "fenced":  # AddPartitionsToTxn answered INVALID_PRODUCER_EPOCH: the sender ended
            txn.fatal_error(ProducerFenced())
        elif state == "abortable":
            txn.error_transaction(CoordinatorNotAvailableError())
            txn.wait_for_transaction_end().exception()  # raised to the app's commit, not here
        elif state == "fatal":
            txn.fatal_error(TransactionalIdAuthorizationFailed())
        try:
            eos.raise_if_failed(IllegalOperation("Can't send messages while not in transaction"))
        except Exception as exc:
            return exc
        return None

    return asyncio.run(go())


def test_a_send_refused_because_the_producer_was_fenced_meanwhile_is_a_migration() -> None:
    raised = refused_send("fenced")
    assert isinstance(raised, TaskMigratedError)
    assert isinstance(raised.__cause__, IllegalOperation)


def test_a_send_refused_in_an_aborted_transaction_is_an_abort_not_a_migration() -> None:
    raised = refused_send("abortable")
    assert isinstance(raised, TransactionAbortedError)
    assert not isinstance(raised, TaskMigratedError)


@pytest.mark.parametrize("state", ["in_transaction", "fatal"])
def test_a_send_refused_for_its_own_reason_is_left_to_the_send_failure_rules(state: str) -> None:
    assert refused_send(state) is None


def test_an_aborted_transaction_keeps_what_it_added_so_its_abort_reaches_the_broker() -> None:
    """aiokafka forgets the partitions and group of a transaction that failed with an abortable
    error; its abort then sent no EndTxn(ABORT) and the broker kept the transaction open until
    its timeout. The ExactlyOnce keeps them: the transaction is not "empty"."""

    async def go() -> tuple[bool, bool]:
        producer = TxnProducer()
        ExactlyOnce(producer, Member(), group_id="app", request_timeout_ms=1_000)  # type: ignore[arg-type]
        txn = producer._txn_manager
        await producer.begin_transaction()
        tp = AioTopicPartition("out", 0)
        txn.maybe_add_partition_to_txn(tp)
        txn.partition_added(tp)  # AddPartitionsToTxn answered
        txn.error_transaction(CoordinatorNotAvailableError())
        with contextlib.suppress(CoordinatorNotAvailableError):
            txn.wait_for_transaction_end().result()
        empty = txn.is_empty_transaction()
        txn.aborting_transaction()
        return empty, txn.needs_transaction_commit() is not None

    empty, abort_pending = asyncio.run(go())
    assert not empty  # the sender sends EndTxn(ABORT) instead of completing it locally
    assert abort_pending
