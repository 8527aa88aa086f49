"""``streamtasks.Consumer``: an asyncio consumer with cooperative rebalancing and pluggable
partition assignors.

Group membership runs on streamtasks' own members: the classic protocol by default (KIP-429
cooperative or eager, static membership, KIP-568 ``enforce_rebalance``), or KIP-848's consumer
group protocol with ``group_protocol="consumer"`` (ConsumerGroupHeartbeat; the coordinator's
assignor, ``group_remote_assignor``). An aiokafka consumer with manual assignment fetches the
records under both; commits carry the member id and generation (classic) or epoch (KIP-848)::

    async with Consumer(["orders"], bootstrap_servers="127.0.0.1:9092", group_id="billing") as c:
        async for record in c:
            handle(record)
            await c.commit()
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from typing import Any

from aiokafka import AIOKafkaConsumer, ConsumerRecord

from assignors.partition.types import PartitionAssignor
from streamtasks.errors import (
    CommitFailedError,
    ConfigError,
    ConnectionSecurityError,
    ConsumerFailedError,
    StreamTasksError,
)
from streamtasks.membership.classic import (
    AssignmentChanged,
    ClassicMember,
    ErrorReported,
    InvokeListener,
    ListenerKind,
)
from streamtasks.membership.consumer import ConsumerMember
from streamtasks.protocol.errors import KafkaErrorCode
from streamtasks.protocol.txn_offsets import TxnOffsetCommitResponse
from streamtasks.runtime.aio import AioTopicPartition
from streamtasks.runtime.aio import to_aio as _tp
from streamtasks.runtime.aiokafka_security import start_aiokafka
from streamtasks.runtime.committed import CommittedOffsets
from streamtasks.runtime.config import ConsumerConfig, make_config
from streamtasks.runtime.connection import AsyncConnection, ConnectionLost, GroupCoordinatorClient, open_any
from streamtasks.runtime.consumer_driver import ConsumerGroupDriver, TopicMetadata
from streamtasks.runtime.driver_task import log_driver_end, task_failure
from streamtasks.runtime.fetch_gaps import FetchGaps
from streamtasks.runtime.group_member import (
    USER_DATA_PROVIDER_REMOVED,
    AnyDriver,
    GroupMember,
    make_driver,
    make_member,
    member_epoch,
    member_metrics,
    open_bootstrap,
    read_topic_metadata,
    send_offset_commit_retrying,
    send_txn_offset_commit,
    wait_for_new_epoch,
)
from streamtasks.runtime.group_session import coordinator_session_timeout
from streamtasks.runtime.take_back import TAKEN_BACK_METRIC, TakeBack, listener_callback
from topology.ids import TopicPartition

__all__ = ["TAKEN_BACK_METRIC", "CommitFailedError", "Consumer", "ConsumerFailedError"]

log = logging.getLogger("streamtasks.consumer")


class Consumer:
    """Async consumer of ``topics`` in group ``group_id`` (see the module docstring)."""

    def __init__(
        self,
        topics: Iterable[str] | str,
        *,
        listener: Any = None,
        config: Mapping[str, Any] | None = None,
        partition_assignors: Sequence[PartitionAssignor] | None = None,
        member: GroupMember | None = None,
        **settings: Any,
    ) -> None:
        if "user_data_provider" in settings:
            raise ConfigError(USER_DATA_PROVIDER_REMOVED)
        topic_list = (topics,) if isinstance(topics, str) else tuple(topics)
        if not topic_list:
            raise ConfigError("a Consumer needs at least one topic")
        self.config: ConsumerConfig = make_config(dict(config or {}), **settings)
        self._topics = tuple(sorted(set(topic_list)))
        self._listener = listener
        #: ``member``: one built by the caller (the App's streams-group member).
        self._member: GroupMember = member or make_member(self.config, self._topics, partition_assignors)
        self._fetcher: AIOKafkaConsumer | None = None
        self._client: GroupCoordinatorClient | None = None
        #: A connection to any bootstrap broker, for Metadata requests.
        self._metadata_conn: AsyncConnection | None = None
        self._driver: AnyDriver | None = None
        self._driver_task: asyncio.Task[None] | None = None
        self._commit_task: asyncio.Task[None] | None = None
        self._owned: frozenset[TopicPartition] = frozenset()
        #: Partitions being revoked (their offsets are being committed).
        self._paused: set[TopicPartition] = set()
        #: Partitions the application paused (:meth:`pause`).
        self._user_paused: set[TopicPartition] = set()
        #: aiokafka partition → ours, for the owned partitions that are not paused.
        self._fetchable: dict[AioTopicPartition, TopicPartition] = {}
        #: Per owned partition, the offset after the last record handed out (or the committed offset).
        self._positions: dict[TopicPartition, int] = {}
        #: Committed offsets and metadata read for owned partitions; those a transaction holds.
        self._committed = CommittedOffsets(
            self.config,
            self._positions,
            owned=lambda: self._owned,
            closed=lambda: self._closed,
            ready=self._stable_again,
        )
        #: The metadata strings of the committed offsets read for owned partitions (not empty).
        self.committed_metadata = self._committed.metadata
        #: The gap probes under way and the fetch counters.
        self._gaps = FetchGaps()
        #: Lapsed assignments taken back (:mod:`streamtasks.runtime.take_back`).
        self._take_back = TakeBack()
        self._fatal: ErrorReported | None = None
        self._closed = False

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        """Start fetching and join the group. Under ``group_protocol="consumer"`` a bootstrap
        server that does not advertise ConsumerGroupHeartbeat raises :class:`BrokerError` first.

        The runtime's own connection to a bootstrap server comes first: a TLS or SASL failure
        raises :class:`~streamtasks.errors.TlsError` / :class:`~streamtasks.errors.AuthenticationError`
        naming the broker and the cause, within ``request_timeout_ms``, and is not retried."""
        cfg = self.config
        settings = cfg.client_settings()
        try:
            self._metadata_conn = await open_bootstrap(
                self._member, settings, cfg.client_id, cfg.request_timeout_ms / 1000
            )
            self._fetcher = AIOKafkaConsumer(
                **settings.aiokafka_kwargs(),
                group_id=None,
                client_id=cfg.client_id,
                enable_auto_commit=False,
                auto_offset_reset=cfg.auto_offset_reset,
                max_poll_records=cfg.max_poll_records,
                metadata_max_age_ms=cfg.metadata_max_age_ms,
                request_timeout_ms=cfg.request_timeout_ms,
                isolation_level=cfg.isolation_level,
            )
            await start_aiokafka(self._fetcher, settings, "the consumer's fetcher")
        except BaseException:
            await self._abort_start()
            raise
        self._client = GroupCoordinatorClient(
            settings, cfg.group_id, client_id=cfg.client_id, timeout_s=cfg.request_timeout_ms / 1000
        )
        self._driver = make_driver(self._member, self._client, self, cfg.metadata_max_age_ms)
        if isinstance(self._member, ConsumerMember):  # fence at the coordinator's session timeout
            self._driver.post(
                await coordinator_session_timeout(
                    self._metadata_conn,
                    cfg.group_id,
                    configured_ms=cfg.session_timeout_ms,
                    where=settings.bootstrap_servers,
                    timeout_s=cfg.request_timeout_ms / 1000,
                )
            )
        await self._driver.refresh_metadata()
        if self._driver.security_failure is not None:
            await self._abort_start()
            raise self._driver.security_failure
        self._driver_task = asyncio.get_running_loop().create_task(self._driver.run())
        self._driver_task.add_done_callback(log_driver_end)
        if cfg.enable_auto_commit:
            self._commit_task = asyncio.get_running_loop().create_task(self._auto_commit())

    async def _abort_start(self) -> None:
        """Close what a failed :meth:`start` opened (the caller's ``async with`` never exits)."""
        self._closed = True
        if self._client is not None:
            await self._client.close()
        if self._metadata_conn is not None:
            await self._metadata_conn.close()
        if self._fetcher is not None:
            with contextlib.suppress(Exception):
                await self._fetcher.stop()

    async def stop(self) -> None:
        """Commit, revoke (listener called), leave the group (dynamic members), close."""
        if self._closed:
            return
        self._closed = True
        if self._commit_task is not None:
            self._commit_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._commit_task
        await self._committed.close()
        if self._driver is not None and self._driver_task is not None:
            await self._driver.leave("consumer closed", timeout_s=self.config.request_timeout_ms / 1000)
            self._driver_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._driver_task
        if self._client is not None:
            await self._client.close()
        if self._metadata_conn is not None:
            await self._metadata_conn.close()
        if self._fetcher is not None:
            await self._fetcher.stop()
        self._owned = frozenset()
        self._fetchable = {}

    async def __aenter__(self) -> Consumer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- the user's API --------------------------------------------------------------------

    def assignment(self) -> frozenset[TopicPartition]:
        return self._owned

    @property
    def member_id(self) -> str:
        return self._member.member_id

    @property
    def generation(self) -> int:
        """The classic generation, or the KIP-848 member epoch."""
        return member_epoch(self._member)

    @property
    def stable(self) -> bool:
        """Whether the member holds the assignment of its current generation (epoch) and no
        rebalance of its own is under way: what a transactional commit needs, since its offsets
        carry that generation."""
        return bool(self._member.state.value == "stable")

    def enforce_rebalance(self, reason: str = "") -> bool:
        """Ask for a new assignment, keeping owned partitions. Returns whether it took effect.

        Classic (KIP-568): rejoin on the next poll (False while a rebalance is already in
        flight). KIP-848: the client-side assignors' ``Reason`` changes with the next heartbeat;
        under a coordinator-side assignor there is nothing to ask (Apache Kafka's consumer
        makes it a no-op too) and it returns False."""
        if isinstance(self._driver, ConsumerGroupDriver):
            return self._driver.enforce_rebalance(reason)
        if not isinstance(self._member, ClassicMember):
            return False  # not started, or a streams group (the broker's assignor decides)
        took = self._member.enforce_rebalance(reason)
        if took and self._driver is not None:
            self._driver.wake()
        return took

    def metrics(self) -> dict[str, float]:
        out = member_metrics(self._member)
        if self._driver is not None and not isinstance(self._member, ClassicMember):
            out.update(self._driver.rebalance_metrics())  # KIP-848 / streams: from its states
        for name, n in self._gaps.stats.items():
            out[f"fetch-{name.replace('_', '-')}-total"] = float(n)
        out[TAKEN_BACK_METRIC] = float(self._take_back.total)
        return out

    def pause(self, partitions: Iterable[TopicPartition]) -> None:
        """Stop handing out records of ``partitions`` (owned ones stay owned) until :meth:`resume`."""
        self._user_paused.update(partitions)
        self._refresh_fetchable()

    def resume(self, partitions: Iterable[TopicPartition]) -> None:
        self._user_paused.difference_update(partitions)
        self._refresh_fetchable()

    def paused(self) -> frozenset[TopicPartition]:
        return frozenset(self._user_paused & self._owned)

    def seek(self, partition: TopicPartition, offset: int) -> None:
        """Hand out ``partition``'s records from ``offset`` on (it must be owned)."""
        if partition not in self._owned or self._fetcher is None:
            raise StreamTasksError(f"cannot seek {partition}: it is not assigned to this consumer")
        if offset < 0:
            raise ConfigError(f"cannot seek {partition} to a negative offset ({offset})")
        self._positions[partition] = offset
        self._gaps.probes.pop(partition, None)
        self._fetcher.seek(_tp(partition), offset)

    def rewind(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Hand out records again from ``offsets``: for records that were handed out but could
        not be used (e.g. their task started restoring before they were processed). Only owned
        partitions whose position is beyond the given offset move; a partition that changed
        hands since, or was already moved back further, is left alone."""
        for tp, offset in sorted(offsets.items()):
            position = self._positions.get(tp)
            if tp in self._owned and position is not None and offset < position:
                log.info("%s goes back from %d to %d (records not processed)", tp, position, offset)
                self.seek(tp, offset)
                self._gaps.stats["rewinds"] += 1

    async def reset_to_committed(self, partitions: Iterable[TopicPartition]) -> None:
        """Hand out the owned ``partitions`` again from their committed offsets (from
        ``auto_offset_reset`` where none is committed; not before a pending transaction that holds
        one ends, under ``read_committed``): after the app closed their tasks dirty and revived
        them (an aborted transaction). Records already fetched past there are dropped."""
        assert self._fetcher is not None
        wanted = [tp for tp in sorted(set(partitions)) if tp in self._owned]
        if not wanted:
            return
        before = {tp: self._positions.pop(tp, None) for tp in wanted}
        for tp in wanted:
            self._gaps.probes.pop(tp, None)
        assert self._client is not None
        try:
            unstable = await self._committed.read(self._client, wanted)
        except StreamTasksError:
            self._positions.update({tp: off for tp, off in before.items() if off is not None})
            raise
        missing = [_tp(tp) for tp in wanted if tp not in self._positions and tp not in unstable]
        for tp in wanted:
            if tp in self._positions:
                self._fetcher.seek(_tp(tp), self._positions[tp])
        if missing:
            if self.config.auto_offset_reset == "latest":
                await self._fetcher.seek_to_end(*missing)
            else:
                await self._fetcher.seek_to_beginning(*missing)
        self._committed.hold(self._client, unstable)
        self._refresh_fetchable()
        log.info("%d partitions go back to their committed offsets: %s", len(wanted), self._positions)

    def _raise_pending_errors(self) -> None:
        if self._closed:
            raise StreamTasksError("consumer is closed")
        if self._fatal is not None:
            raise ConsumerFailedError(f"group membership failed: {self._fatal.reason}")
        crash = task_failure(self._driver_task)
        if isinstance(crash, ConnectionSecurityError):  # TLS or SASL: the cause, as it is
            raise type(crash)(str(crash))
        if crash is not None:  # no more heartbeats or commits: say so instead of fetching on
            raise ConsumerFailedError(
                f"group membership stopped: its driver failed with {crash!r}"
            ) from crash
        if self._driver is not None:
            error = self._driver.take_listener_error()
            if error is not None:
                raise error

    async def getmany(
        self, timeout_ms: int = 1000, max_records: int | None = None
    ) -> dict[TopicPartition, list[ConsumerRecord[Any, Any]]]:
        """Records from owned partitions, at most ``max_records``; waits up to ``timeout_ms``.

        Paused partitions are paused in the fetcher too, so their records are neither fetched
        nor consumed (see docs/app.md, "What is guaranteed"). A batch that does not continue
        where the partition's last handed-out record ended is checked before it is handed out
        (:meth:`FetchGaps.continues`).
        """
        self._raise_pending_errors()
        if self._fetcher is None:
            raise StreamTasksError("consumer is not started")
        if isinstance(self._driver, ConsumerGroupDriver):
            self._driver.note_poll()
        if not self._fetchable:
            await asyncio.sleep(min(timeout_ms, 100) / 1000)
            return {}
        batch = await self._fetcher.getmany(timeout_ms=timeout_ms, max_records=max_records)
        out: dict[TopicPartition, list[ConsumerRecord[Any, Any]]] = {}
        fetchable, positions, gaps = self._fetchable, self._positions, self._gaps
        probes = gaps.probes
        for atp, fetched in batch.items():
            if not fetched:
                continue
            tp = fetchable.get(atp)
            if tp is None:
                gaps.not_handed_out(atp, fetched[0].offset, self._owned, positions, self._fetcher)
                continue
            # The common case, checked inline: the batch continues where the partition's last
            # handed-out record ended and no gap check is pending for it. Anything else (the
            # first batch after an assignment, one fetched before a seek, a gap, a gap probe's
            # answer) goes through FetchGaps.checked.
            if fetched[0].offset == positions.get(tp) and not (probes and tp in probes):
                records = fetched
            else:
                checked = gaps.checked(tp, atp, fetched, positions, self._fetcher)
                if checked is None:
                    continue
                records = checked
            positions[tp] = records[-1].offset + 1
            out[tp] = records
        return out

    def __aiter__(self) -> AsyncIterator[ConsumerRecord[Any, Any]]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[ConsumerRecord[Any, Any]]:
        while True:
            batch = await self.getmany(timeout_ms=1000)
            for records in batch.values():
                for record in records:
                    yield record

    async def commit(
        self,
        offsets: Mapping[TopicPartition, int] | None = None,
        metadata: Mapping[TopicPartition, str] | None = None,
    ) -> None:
        """Commit ``offsets`` (default: the position after the last record returned, for every
        owned partition) with this member's id and generation (KIP-848: member epoch), each
        with its ``metadata`` string if it has one.

        KIP-848: a commit answered STALE_MEMBER_EPOCH was sent with an epoch the coordinator
        has moved past (the heartbeat that tells this member is on its way). It is sent again,
        with the new epoch, for the partitions this member still owns once that epoch arrived
        (within the commit's request timeout); otherwise it fails like any rejected commit."""
        if self._closed:
            raise StreamTasksError("consumer is closed")
        if self._client is None:
            raise StreamTasksError("consumer is not started")
        chosen = (
            dict(offsets)
            if offsets is not None
            else {tp: self._positions[tp] for tp in self._owned if tp in self._positions}
        )
        while chosen:
            epoch = self.generation
            response = await send_offset_commit_retrying(
                self._client, self._member, self.config, chosen, epoch, metadata=metadata
            )
            failed = [(tp, err) for tp, err in response.errors if err is not KafkaErrorCode.NONE]
            stale = {tp for tp, err in failed if err is KafkaErrorCode.STALE_MEMBER_EPOCH}
            if not failed:
                return
            if len(stale) < len(failed) or not await wait_for_new_epoch(
                self._member, epoch, self.config.request_timeout_ms, lambda: self._closed
            ):
                detail = ", ".join(f"{tp}: {err.name}" for tp, err in failed)
                raise CommitFailedError(f"offset commit rejected ({detail})")
            gone = sorted(tp for tp in stale if tp not in self._owned)
            if gone:
                raise CommitFailedError(
                    f"offset commit rejected: {gone} no longer owned at epoch {self.generation}"
                )
            chosen = {tp: chosen[tp] for tp in stale}

    async def commit_in_transaction(
        self,
        offsets: Mapping[TopicPartition, int],
        *,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        metadata: Mapping[TopicPartition, str] | None = None,
    ) -> TxnOffsetCommitResponse:
        """Send ``offsets`` to the transaction of ``producer_id``/``producer_epoch`` with this
        member's group metadata (TxnOffsetCommit v3, KIP-447); they become the committed offsets
        when that transaction commits. The caller reads the answer
        (:func:`~streamtasks.protocol.txn_offsets.txn_commit_verdict`). It is also what a
        closing member commits with before it leaves (so it does not refuse after :meth:`stop`
        began)."""
        if self._client is None:
            raise StreamTasksError("consumer is not started")
        return await send_txn_offset_commit(
            self._client,
            self._member,
            self.config,
            offsets,
            transactional_id=transactional_id,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            metadata=metadata,
        )

    async def _auto_commit(self) -> None:
        while True:
            await asyncio.sleep(self.config.auto_commit_interval_ms / 1000)
            try:
                await self.commit()
            except StreamTasksError as exc:
                log.info("auto-commit skipped: %s", exc)

    # -- DriverHost --------------------------------------------------------------------------

    def positions(self) -> Mapping[TopicPartition, int]:
        return self._positions

    def commit_metadata(self) -> Mapping[TopicPartition, str]:
        """The metadata strings a revocation commits with :meth:`positions` (none here)."""
        return {}

    async def before_commit(self, partitions: tuple[TopicPartition, ...]) -> None:
        """Stop handing out records of partitions about to be revoked (their offsets are being
        committed now)."""
        self._paused.update(partitions)
        self._refresh_fetchable()

    def _refresh_fetchable(self) -> None:
        """Recompute the partitions records are handed out for, and pause the others in the
        fetcher as well: a paused partition is not fetched, and records the fetcher already
        holds for it are dropped without moving its position (they are fetched again after
        ``resume``)."""
        self._fetchable = {
            _tp(tp): tp
            for tp in sorted(self._owned)
            if tp not in self._paused and tp not in self._user_paused and tp not in self._committed.unstable
        }
        if self._fetcher is None or not self._owned:
            return
        held = [_tp(tp) for tp in sorted(self._owned) if _tp(tp) not in self._fetchable]
        self._fetcher.pause(*held)
        self._fetcher.resume(*self._fetchable)

    async def assignment_changed(self, change: AssignmentChanged) -> None:
        assert self._fetcher is not None
        assert self._client is not None
        owned = frozenset(change.owned)
        keep = self._take_back.keeps(self.config.take_back_positions, self._listener)
        kept = self._take_back.apply(change, self._positions, keep=keep)
        for tp in change.removed:
            self._positions.pop(tp, None)
            self._gaps.probes.pop(tp, None)
        self._positions.update(kept)
        self._committed.forget(change.removed)
        self._paused.intersection_update(owned)
        self._paused.difference_update(change.added)
        self._committed.unstable.intersection_update(owned)
        new = [tp for tp in sorted(owned) if tp not in self._positions and tp not in self._committed.unstable]
        if new:
            try:
                self._committed.hold(self._client, await self._committed.read(self._client, new))
            except StreamTasksError as exc:
                log.warning("committed offsets unavailable, using auto.offset.reset: %s", exc)
        # Positions keyed by the very objects the fetchable partitions are (both from ``owned``):
        # getmany looks a partition up in both for every batch, and a lookup by an equal but
        # distinct key (one decoded from the OffsetFetch response, one kept from an earlier
        # assignment) costs a dataclass __eq__ call each time.
        for tp in owned:
            if tp in self._positions:
                self._positions[tp] = self._positions.pop(tp)
        self._fetcher.assign([_tp(tp) for tp in sorted(owned)])
        for tp in sorted(owned):
            if tp in self._positions:
                self._fetcher.seek(_tp(tp), self._positions[tp])
        self._owned = owned
        self._refresh_fetchable()

    def _stable_again(self, ready: list[TopicPartition]) -> None:
        """The committed offsets of ``ready`` are readable now: hand them out from there."""
        assert self._fetcher is not None
        for tp in ready:
            if tp in self._positions:
                self._fetcher.seek(_tp(tp), self._positions[tp])
        self._refresh_fetchable()

    async def invoke_listener(self, call: InvokeListener) -> None:
        if call.kind is ListenerKind.LOST:
            self._take_back.lost_called(call.generation)
        callback = listener_callback(self._listener, call.kind)
        if callback is None:
            return
        result = callback(call.partitions)
        if inspect.isawaitable(result):
            await result

    def error_reported(self, error: ErrorReported) -> None:
        if error.fatal:
            self._fatal = error
            log.error("fatal group error: %s", error.reason)
        else:
            log.info("group error handled: %s", error.reason)

    async def partition_counts(self, topics: tuple[str, ...]) -> Mapping[str, int]:
        """Partition counts of ``topics`` (:meth:`topic_metadata`)."""
        return (await self.topic_metadata(topics)).partitions

    async def topic_metadata(self, topics: tuple[str, ...]) -> TopicMetadata:
        """Partition counts and topic ids of ``topics`` from a Metadata request of their own
        (aiokafka's cluster view only follows the topics its fetcher is assigned)."""
        if self._metadata_conn is None or self._metadata_conn.closed:
            self._metadata_conn = await open_any(self.config.client_settings(), self.config.client_id)
        try:
            return await read_topic_metadata(self._metadata_conn, topics)
        except ConnectionLost:
            await self._metadata_conn.close()
            self._metadata_conn = None
            raise
