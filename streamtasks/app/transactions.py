"""Exactly-once v2 (KIP-447): one transactional producer per App process.

Every changelog and output record the process writes between two commits goes out in one
transaction, and the input offsets those records came from join the same transaction, so the
three become visible together or not at all::

    begin  → records (changelogs, outputs, repartition topics) → AddOffsetsToTxn →
    TxnOffsetCommit (with the group's metadata) → EndTxn(commit)

(the order of Kafka Streams' ``StreamsProducer.commitTransaction`` and Kafka's
``TransactionManager``). The ``transactional_id`` is ``<application id>-<process id>``: the
process id lives in the state directory, so a restarted process bumps the producer epoch of
its predecessor (which aborts whatever transaction the predecessor left open).

What aiokafka lacks: its ``send_offsets_to_transaction`` sends TxnOffsetCommit v0, with the group
id only. With one producer per process (not per task) a member that lost its partitions is not
fenced by its ``transactional_id`` any more; the group coordinator must see the member's
generation, member id and group instance id (TxnOffsetCommit v3) to reject its offsets. Here
aiokafka keeps the transaction coordinator's part (InitProducerId, AddPartitionsToTxn,
AddOffsetsToTxn, EndTxn) and the TxnOffsetCommit step of its sender is replaced by
:meth:`ExactlyOnce._txn_offset_commit`, which sends v3 through the member's own coordinator
connection (:meth:`streamtasks.Consumer.commit_in_transaction`) with the member's metadata.

A failed commit aborts the transaction and raises what Kafka Streams would: a fenced producer
(ProducerFenced, INVALID_PRODUCER_EPOCH) or member (ILLEGAL_GENERATION, FENCED_MEMBER_EPOCH, ...
on TxnOffsetCommit) :class:`~streamtasks.errors.TaskMigratedError` (the tasks are lost, the
producer is recreated with :meth:`ExactlyOnce.renew`'s caller, the member rejoins); anything
else :class:`~streamtasks.errors.TransactionAbortedError` (the active tasks are closed dirty and
revived in place). :attr:`ExactlyOnce.fatal` says when the producer cannot go on at all.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Mapping
from typing import Any

from aiokafka import AIOKafkaProducer
from aiokafka.errors import InvalidProducerEpoch, ProducerFenced

from streamtasks.errors import StreamTasksError, TaskMigratedError, TransactionAbortedError
from streamtasks.protocol.txn_offsets import TxnCommitVerdict, txn_commit_verdict
from streamtasks.runtime.aio import from_aio, to_aio
from streamtasks.runtime.consumer import Consumer
from topology.ids import TopicPartition

__all__ = ["ExactlyOnce", "is_fenced", "transactional_id"]

log = logging.getLogger("streamtasks.app.transactions")


def transactional_id(application_id: str, process_id: str) -> str:
    """The process's ``transactional_id`` (Kafka Streams' eos-v2 naming, one producer per
    process)."""
    return f"{application_id}-{process_id}"


def is_fenced(exc: BaseException | None) -> bool:
    """Whether ``exc`` (or an exception it was raised from) says this process was fenced."""
    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, TaskMigratedError | ProducerFenced | InvalidProducerEpoch):
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False


def _keep_transaction_on_error(txn: Any) -> None:
    """Make aiokafka send the abort of a transaction that failed with an abortable error.

    aiokafka's ``TransactionManager.error_transaction`` forgets the partitions and the group
    already added to the transaction, so the abort that follows finds an "empty" transaction
    and completes it locally without an EndTxn(ABORT): the broker keeps the transaction open
    (read_committed readers of its partitions stall, the offsets stay pending) until
    ``transaction_timeout_ms``, then aborts it and bumps the producer epoch, which fences the
    app's producer once more (seen: every ``abort`` run of ``tests/integration/test_app_revive.py``
    revived twice, the second time fenced about 15 s later). Java's ``TransactionManager``
    keeps them and sends the abort; so does this wrapper."""
    forget = txn.error_transaction

    def error_transaction(exc: BaseException) -> None:
        partitions, group = set(txn._txn_partitions), txn._txn_consumer_group
        forget(exc)
        txn._txn_partitions.update(partitions)
        txn._txn_consumer_group = group

    txn.error_transaction = error_transaction


class ExactlyOnce:
    """The transactions of one App process (see the module docstring)."""

    def __init__(
        self,
        producer: AIOKafkaProducer,
        consumer: Consumer,
        *,
        group_id: str,
        request_timeout_ms: int,
        retry_backoff_ms: int = 100,
    ) -> None:
        self._producer = producer
        self._consumer = consumer
        self._group_id = group_id
        self._timeout_s = request_timeout_ms / 1000
        self._backoff_s = retry_backoff_ms / 1000
        self._deadline = 0.0
        self.commits = 0
        self.aborts = 0
        sender: Any = getattr(producer, "_sender", None)
        if not hasattr(sender, "_do_txn_offset_commit") or not hasattr(producer, "_txn_manager"):
            raise StreamTasksError(
                "this aiokafka has no transactional sender step to extend (exactly_once_v2 needs "
                "aiokafka 0.11 to 0.14's Sender._do_txn_offset_commit)"
            )
        sender._do_txn_offset_commit = self._txn_offset_commit
        _keep_transaction_on_error(producer._txn_manager)

    @property
    def _txn(self) -> Any:
        return self._producer._txn_manager

    @property
    def in_transaction(self) -> bool:
        return bool(self._txn.is_in_transaction())

    async def begin(self) -> None:
        """Open a transaction unless one is open (before any record is handed to the producer)."""
        if not self.in_transaction:
            await self._producer.begin_transaction()

    async def commit(
        self, offsets: Mapping[TopicPartition, int], metadata: Mapping[TopicPartition, str] | None = None
    ) -> None:
        """Commit the open transaction with ``offsets`` (and their ``metadata`` strings) in it
        (every record the producer was handed since :meth:`begin` is flushed first). Raises
        ``TransactionAbortedError`` after aborting when any step fails."""
        if not offsets and not self.in_transaction:
            return
        try:
            await self.begin()
            self._deadline = time.monotonic() + self._timeout_s
            if offsets:
                meta = metadata or {}
                aio = {to_aio(tp): (off, meta.get(tp, "")) for tp, off in sorted(offsets.items())}
                await self._producer.send_offsets_to_transaction(aio, self._group_id)
            await self._producer.commit_transaction()
        except Exception as exc:
            await self.abort()
            if is_fenced(exc) or is_fenced(self.fatal_cause):
                raise TaskMigratedError(f"transaction aborted, this process was fenced: {exc!r}") from exc
            raise TransactionAbortedError(f"transaction aborted: {exc!r}") from exc
        self.commits += 1

    @property
    def fatal_cause(self) -> BaseException | None:
        """What put the producer in its fatal state (None while it is not in one)."""
        txn = self._txn
        waiter = getattr(txn, "_transaction_waiter", None)
        if not txn.is_fatal_error() or waiter is None or not waiter.done() or waiter.cancelled():
            return None
        cause: BaseException | None = waiter.exception()
        return cause

    @property
    def fenced(self) -> bool:
        """The producer was fenced (it must be replaced; the tasks migrated)."""
        return bool(self._txn.is_fatal_error()) and is_fenced(self.fatal_cause)

    @property
    def fatal(self) -> bool:
        """The producer cannot go on, for a reason other than being fenced (a fenced one is
        replaced: :class:`TaskMigratedError`)."""
        return bool(self._txn.is_fatal_error()) and not is_fenced(self.fatal_cause)

    def raise_if_failed(self, refused: BaseException) -> None:
        """A send the producer refused (``refused``) while the transaction failed under it is
        that failure, not a failed send: aiokafka refuses every record outside a transaction
        (``IllegalOperation``), and its transaction leaves IN_TRANSACTION when the transaction
        coordinator fences the producer (an AddPartitionsToTxn answered INVALID_PRODUCER_EPOCH
        ends its sender) or a step fails. Raises :class:`TaskMigratedError` when fenced,
        :class:`TransactionAbortedError` when the transaction can only be aborted; returns
        otherwise (the send failed for its own reason)."""
        if self.fenced:
            raise TaskMigratedError(f"this process was fenced while sending: {refused!r}") from refused
        if self._txn.state.name == "ABORTABLE_ERROR":
            raise TransactionAbortedError(f"the transaction failed while sending: {refused!r}") from refused

    async def abort(self) -> None:
        """Abort the open transaction, if the producer can still say so (a fenced producer
        cannot: the broker aborts its transaction when the next epoch starts or on timeout)."""
        txn = self._txn
        if txn.is_fatal_error() or not (self.in_transaction or txn.state.name == "ABORTABLE_ERROR"):
            return
        self.aborts += 1
        waiter = getattr(txn, "_transaction_waiter", None)  # its error was raised to commit()
        if waiter is not None and waiter.done() and not waiter.cancelled():
            waiter.exception()
        try:
            await asyncio.wait_for(self._producer.abort_transaction(), self._timeout_s)
        except Exception as exc:
            log.warning("aborting the transaction failed (the broker aborts it on timeout): %r", exc)

    async def _txn_offset_commit(self, offsets: dict[Any, Any], group_id: str) -> None:
        """aiokafka's sender step for the offsets it was handed (``{aiokafka tp: OffsetAndMetadata}``),
        sent as TxnOffsetCommit v3. It must not raise (that would end aiokafka's sender): every
        outcome is told to the transaction manager; a retriable answer returns and the sender
        calls again with the partitions still pending."""
        txn = self._txn
        if not offsets:
            return
        wanted = {from_aio(atp): (atp, meta.offset) for atp, meta in offsets.items()}
        try:
            response = await self._consumer.commit_in_transaction(
                {tp: off for tp, (_, off) in wanted.items()},
                transactional_id=txn.transactional_id,
                producer_id=txn.producer_id,
                producer_epoch=txn.producer_epoch,
                metadata={from_aio(atp): meta.metadata for atp, meta in offsets.items() if meta.metadata},
            )
        except Exception as exc:  # the connection: retried until the commit's deadline
            self._retry_or_fail(f"TxnOffsetCommit could not be sent: {exc!r}")
            if txn.is_in_transaction():
                await asyncio.sleep(self._backoff_s)
            return
        verdict = txn_commit_verdict(response)
        for tp, code in response.errors:
            if code.name == "NONE" and tp in wanted:
                atp, off = wanted[tp]
                txn.offset_committed(atp, off, group_id)
        if verdict is TxnCommitVerdict.DONE:
            return
        detail = ", ".join(f"{tp}: {code.name}" for tp, code in response.errors if code.name != "NONE")
        if verdict is TxnCommitVerdict.RETRY:
            self._retry_or_fail(f"TxnOffsetCommit answered {detail}")
            if txn.is_in_transaction():
                await asyncio.sleep(self._backoff_s)
            return
        fenced = verdict is TxnCommitVerdict.FENCED
        what = "fenced" if fenced else "rejected"
        log.warning("offsets %s by the group coordinator: %s", what, detail)
        error = TaskMigratedError if fenced else TransactionAbortedError
        txn.error_transaction(error(f"offsets {what} by the group coordinator ({detail})"))

    def _retry_or_fail(self, why: str) -> None:
        if time.monotonic() >= self._deadline:
            self._txn.error_transaction(
                TransactionAbortedError(f"{why}; gave up after {self._timeout_s:.0f} s")
            )
        else:
            log.info("%s; retrying", why)

    async def stop(self) -> None:
        """Stop the producer; a fenced producer's sender ended with an error, which is not news."""
        with contextlib.suppress(Exception):
            await self._producer.stop()
