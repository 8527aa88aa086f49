"""Exactly-once on ``streamtasks coordinator``: TxnOffsetCommit (v0-v5) checked against the
server's own group and forwarded to the backing cluster's group coordinator as a simple commit
(no member id, generation -1), so the offsets join the producer's transaction in
``__consumer_offsets``; and, for a group that has committed transactionally, its OffsetFetch
answered from the cluster (merged with the server's store for partitions the cluster has no
offset for) and its plain OffsetCommits checked and forwarded the same way, so one store holds
its offsets. docs/coordinator.md, "Exactly-once", tells why each step is there.

The check and the cluster's write are one step as far as the group is concerned: from the check
until the cluster's answer the group is *held* (:class:`~streamtasks.coordinator.txn_commits.CommitHolds`):
no write of it is computed and none of its timers fires, so no rebalance step can fence the
sender in between. Every write path of the server awaits :meth:`TxnOffsets.writable` first
(it returns at once, without yielding, when the group is not held, so writes keep their arrival
order)."""

from __future__ import annotations

import asyncio
import datetime
import logging
from collections.abc import Iterable
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.offset_fetch.v8.request import OffsetFetchRequest as FetchRequest
from kio.schema.offset_fetch.v8.request import OffsetFetchRequestGroup as FetchGroup
from kio.schema.offset_fetch.v8.request import OffsetFetchRequestTopics as FetchTopics

from streamtasks.coordinator import GroupCoordinator
from streamtasks.coordinator.streams import StreamsGroupCoordinator
from streamtasks.coordinator.txn_commits import (
    CommitHolds,
    TransactionalGroupRecord,
    TxnCommitter,
    check_streams_txn_commit,
    check_txn_commit,
)
from streamtasks.errors import BrokerError, DecodeError
from streamtasks.protocol.errors import KafkaErrorCode
from streamtasks.server.cluster_groups import ClusterGroups, decode_body
from streamtasks.server.log import CoordinatorLog
from streamtasks.server.offset_api import (
    OFFSET_COMMIT,
    OFFSET_FETCH,
    ClusterOffsets,
    Partition,
    element,
    make,
)
from streamtasks.server.wire import (
    decode_kio_request,
    encode_kio_response,
    kio_request_class,
    kio_response_class,
)

__all__ = ["TXN_OFFSET_COMMIT", "TXN_OFFSET_COMMIT_VERSIONS", "TxnOffsets"]

TXN_OFFSET_COMMIT = 28
#: What the server reads; advertised capped by the backing broker's range.
TXN_OFFSET_COMMIT_VERSIONS = (0, 5)
#: Forwarded at the client's version, v0-v2 (no group metadata, not flexible) as v3.
_FIRST_FLEXIBLE_TXN = 3
_FETCH_VERSION, _COMMIT_VERSION = 8, 8
#: Codes travel as the cluster's ints (the enum knows only some, and the client must see each).
_MOVED = frozenset({int(KafkaErrorCode.NOT_COORDINATOR), int(KafkaErrorCode.COORDINATOR_NOT_AVAILABLE)})
_UNREACHABLE = int(KafkaErrorCode.COORDINATOR_NOT_AVAILABLE)
_ZERO = datetime.timedelta(0)
_log = logging.getLogger("streamtasks.server")


def _errors_of(response: Any) -> dict[Partition, int]:
    return {
        (str(t.name), int(p.partition_index)): int(p.error_code.value)
        for t in response.topics
        for p in t.partitions
    }


def _answer(cls: type[Any], request_topics: Any, errors: dict[Partition, int]) -> Any:
    """A TxnOffsetCommit / OffsetCommit response of class ``cls`` with one error per partition."""
    topic_cls = element(cls, "topics")
    partition_cls = element(topic_cls, "partitions")
    topics = tuple(
        make(
            topic_cls,
            name=t.name,
            partitions=tuple(
                make(
                    partition_cls,
                    partition_index=p.partition_index,
                    error_code=ErrorCode(errors[str(t.name), int(p.partition_index)]),
                )
                for p in t.partitions
            ),
        )
        for t in request_topics
    )
    return make(cls, throttle_time=_ZERO, topics=topics)


class TxnOffsets:
    """The exactly-once part of the server's offsets (see the module docstring)."""

    def __init__(
        self,
        *,
        coordinator: GroupCoordinator,
        streams: StreamsGroupCoordinator,
        log: CoordinatorLog,
        cluster: ClusterGroups | None,
    ) -> None:
        self.coordinator = coordinator
        self.streams = streams
        self.log = log
        self.cluster = cluster
        self.holds = CommitHolds()
        #: Groups that have committed transactionally (replayed from the log).
        self.transactional: set[str] = set()
        self._changed = asyncio.Condition()
        #: Held groups whose timers are due: they keep new commits back as a waiting write does.
        self._timers_waiting: set[str] = set()
        self._notifying: set[asyncio.Task[None]] = set()
        self.txn_commits = 0
        self.txn_refused = 0

    def replay(self, record: TransactionalGroupRecord) -> None:
        self.transactional.add(record.group_id)

    # -- the hold ---------------------------------------------------------------------------------

    async def writable(self, group_id: str) -> None:
        """Return once no forwarded commit of ``group_id`` is in flight (at once, without
        yielding, when none is); meanwhile new commits of the group wait for this write."""
        if self.holds.may_write(group_id):
            return
        async with self._changed:
            self.holds.wait_write(group_id)
            try:
                await self._changed.wait_for(lambda: self.holds.may_write(group_id))
            finally:
                self.holds.wrote(group_id)
                self._changed.notify_all()

    def timers_due(self, due: Iterable[str]) -> frozenset[str]:
        """Before the timers fire: the groups whose timers must wait (a commit in flight). Those
        that had to wait and are not held any more count as written (their timers fire now);
        those held with a timer due keep new commits back until their timers fired."""
        held = self.holds.held()
        done = self._timers_waiting - held
        for group_id in done:
            self.holds.wrote(group_id)
        self._timers_waiting -= done
        for group_id in (set(due) & held) - self._timers_waiting:
            self.holds.wait_write(group_id)
            self._timers_waiting.add(group_id)
        if done:
            task = asyncio.get_running_loop().create_task(self._notify())
            self._notifying.add(task)
            task.add_done_callback(self._notifying.discard)
        return held

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    async def commit_turn(self, group_id: str) -> None:
        """Return once commits of ``group_id`` may begin (no write or due timer of it waits);
        a commit is checked only after this, and held from its check on without yielding."""
        if not self.holds.may_commit(group_id):
            async with self._changed:
                await self._changed.wait_for(lambda: self.holds.may_commit(group_id))

    async def _end(self, group_id: str) -> None:
        async with self._changed:
            self.holds.end(group_id)
            self._changed.notify_all()

    async def _durable_mark(self, group_id: str) -> None:
        """Every earlier write durable, and the group marked transactional (once, before its
        first forward: from then on its offsets are read from the cluster)."""
        if group_id in self.transactional:
            await self.log.append(())
            return
        record = TransactionalGroupRecord(group_id=group_id)
        self.replay(record)
        await self.log.append((record,))

    # -- TxnOffsetCommit -------------------------------------------------------------------------

    def check(self, group_id: str, who: TxnCommitter) -> KafkaErrorCode:
        streams_group = self.streams.group(group_id)
        if streams_group is not None:
            return check_streams_txn_commit(streams_group, who)
        return check_txn_commit(self.coordinator.group(group_id), who)

    async def txn_offset_commit(self, version: int, body: bytes, cid: int) -> bytes:
        request = decode_kio_request(TXN_OFFSET_COMMIT, version, body)
        group_id = str(request.group_id)
        await self.commit_turn(group_id)
        who = TxnCommitter(
            member_id=str(getattr(request, "member_id", "") or ""),
            generation_id=int(getattr(request, "generation_id", -1)),
            group_instance_id=getattr(request, "group_instance_id", None),
        )
        partitions = [(str(t.name), int(p.partition_index)) for t in request.topics for p in t.partitions]
        response_cls = kio_response_class(TXN_OFFSET_COMMIT, version)
        verdict = self.check(group_id, who)
        if verdict is not KafkaErrorCode.NONE or self.cluster is None:
            self.txn_refused += 1
            code = int(verdict) if verdict is not KafkaErrorCode.NONE else _UNREACHABLE
            _log.info(
                "TxnOffsetCommit of %s in %s: %s", who.member_id, group_id, KafkaErrorCode.of(code).name
            )
            return encode_kio_response(
                _answer(response_cls, request.topics, dict.fromkeys(partitions, code)), cid
            )
        self.holds.begin(group_id)  # no await between the check and this
        try:
            await self._durable_mark(group_id)
            errors = await self._forward_txn(request, version, partitions)
        finally:
            await self._end(group_id)
        self.txn_commits += 1
        return encode_kio_response(_answer(response_cls, request.topics, errors), cid)

    async def _forward_txn(
        self, request: Any, version: int, partitions: list[Partition]
    ) -> dict[Partition, int]:
        assert self.cluster is not None
        group_id = str(request.group_id)
        forward_version = max(version, _FIRST_FLEXIBLE_TXN)
        cls = kio_request_class(TXN_OFFSET_COMMIT, forward_version)
        topic_cls = element(cls, "topics")
        partition_cls = element(topic_cls, "partitions")
        simple = make(
            cls,
            transactional_id=request.transactional_id,
            group_id=request.group_id,
            producer_id=request.producer_id,
            producer_epoch=request.producer_epoch,
            generation_id=-1,
            member_id="",
            group_instance_id=None,
            topics=tuple(
                make(
                    topic_cls,
                    name=t.name,
                    partitions=tuple(
                        make(
                            partition_cls,
                            partition_index=p.partition_index,
                            committed_offset=p.committed_offset,
                            committed_leader_epoch=getattr(p, "committed_leader_epoch", -1),
                            committed_metadata=p.committed_metadata,
                        )
                        for p in t.partitions
                    ),
                )
                for t in request.topics
            ),
        )
        answer_cls = kio_response_class(TXN_OFFSET_COMMIT, forward_version)
        return await self._forward_commit(
            group_id,
            api_key=TXN_OFFSET_COMMIT,
            version=forward_version,
            request=simple,
            answer_cls=answer_cls,
            partitions=partitions,
        )

    async def _forward_commit(
        self,
        group_id: str,
        *,
        api_key: int,
        version: int,
        request: Any,
        answer_cls: type[Any],
        partitions: Iterable[Partition],
    ) -> dict[Partition, int]:
        assert self.cluster is not None
        wanted = list(partitions)
        try:
            errors = _errors_of(
                decode_body(answer_cls, await self.cluster.call(group_id, api_key, version, request))
            )
        except (BrokerError, DecodeError) as exc:
            _log.warning("forwarding offsets of group %s to the backing cluster failed: %s", group_id, exc)
            self.cluster.forget(group_id)
            return dict.fromkeys(wanted, _UNREACHABLE)
        if any(code in _MOVED for code in errors.values()):
            self.cluster.forget(group_id)
        return {tp: errors.get(tp, _UNREACHABLE) for tp in wanted}

    # -- a transactional group's plain commits and fetches ---------------------------------------

    async def forward_commit(self, request: Any, version: int, response: Any, accepted: list[Any]) -> Any:
        """A plain OffsetCommit of a transactional group, checked after :meth:`commit_turn` and
        with no await since (``accepted``: the offset records of the partitions the check let
        through, ``response`` the answer so far): those offsets are forwarded as a simple commit,
        the cluster's codes answered."""
        group_id = str(request.group_id)
        if not accepted:
            return response
        if self.cluster is None:
            codes = {(r.topic, r.partition): _UNREACHABLE for r in accepted}
        else:
            self.holds.begin(group_id)  # no await between the caller's check and this
            try:
                await self.log.append(())
                codes = await self._forward_commit(
                    group_id,
                    api_key=OFFSET_COMMIT,
                    version=_COMMIT_VERSION,
                    request=_simple_commit(group_id, accepted),
                    answer_cls=kio_response_class(OFFSET_COMMIT, _COMMIT_VERSION),
                    partitions=[(r.topic, r.partition) for r in accepted],
                )
            finally:
                await self._end(group_id)
        errors = {**_errors_of(response), **codes}
        return _answer(type(response), request.topics, errors)

    async def fetch_request(self, request: Any, version: int) -> dict[str, ClusterOffsets] | None:
        """The cluster's answer for every transactional group an OffsetFetch names (None when
        it names none), asked with the request's ``require_stable`` (v7+)."""
        stable = bool(getattr(request, "require_stable", False))
        if version < 8:
            asked = [(str(request.group_id), request.topics)]
        else:
            asked = [(str(g.group_id), g.topics) for g in request.groups]
        asked = [(g, topics) for g, topics in asked if g in self.transactional]
        if not asked:
            return None
        out = {}
        for group_id, topics in asked:
            wanted = (
                None
                if topics is None
                else [(str(t.name), int(p)) for t in topics for p in t.partition_indexes]
            )
            out[group_id] = await self.fetch(group_id, wanted, stable)
        return out

    async def fetch(
        self, group_id: str, wanted: list[Partition] | None, require_stable: bool
    ) -> ClusterOffsets:
        """The cluster's committed offsets of a transactional group (``wanted`` None: all)."""
        if self.cluster is None:
            return ClusterOffsets(error=_UNREACHABLE)
        topics = None
        if wanted is not None:
            by_topic: dict[str, list[int]] = {}
            for topic, partition in wanted:
                by_topic.setdefault(topic, []).append(partition)
            topics = tuple(FetchTopics(name=t, partition_indexes=tuple(ps)) for t, ps in by_topic.items())  # type: ignore[arg-type]
        request = FetchRequest(
            groups=(FetchGroup(group_id=group_id, topics=topics),),  # type: ignore[arg-type]
            require_stable=require_stable,
        )
        try:
            body = await self.cluster.call(group_id, OFFSET_FETCH, _FETCH_VERSION, request)
            response = decode_body(kio_response_class(OFFSET_FETCH, _FETCH_VERSION), body)
        except (BrokerError, DecodeError) as exc:
            _log.warning("OffsetFetch of group %s from the backing cluster failed: %s", group_id, exc)
            self.cluster.forget(group_id)
            return ClusterOffsets(error=_UNREACHABLE)
        out = ClusterOffsets()
        for g in response.groups:
            out.error = int(g.error_code.value)
            for t in g.topics:
                for p in t.partitions:
                    out.partitions[str(t.name), int(p.partition_index)] = (
                        int(p.committed_offset),
                        int(p.committed_leader_epoch),
                        str(p.metadata or ""),
                        int(p.error_code.value),
                    )
        if out.error in _MOVED or any(e[3] in _MOVED for e in out.partitions.values()):
            self.cluster.forget(group_id)
        return out


def _simple_commit(group_id: str, accepted: list[Any]) -> Any:
    cls = kio_request_class(OFFSET_COMMIT, _COMMIT_VERSION)
    topic_cls = element(cls, "topics")
    partition_cls = element(topic_cls, "partitions")
    by_topic: dict[str, list[Any]] = {}
    for r in accepted:
        by_topic.setdefault(r.topic, []).append(
            make(
                partition_cls,
                partition_index=r.partition,
                committed_offset=r.offset,
                committed_leader_epoch=r.leader_epoch,
                committed_metadata=r.metadata,
            )
        )
    topics = tuple(make(topic_cls, name=t, partitions=tuple(ps)) for t, ps in by_topic.items())
    return make(
        cls,
        group_id=group_id,
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        topics=topics,
    )
