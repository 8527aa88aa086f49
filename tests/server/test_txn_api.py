"""TxnOffsetCommit on the server, without a cluster: the check against the server's group, the
forward as a simple commit, the group marked transactional once, and the hold — a member's leave
that arrives while its commit is being forwarded waits until the cluster answered, so the member
cannot be fenced between the check and the cluster's write. The backing cluster is a stand-in
whose answer the test releases (the live path: tests/server/test_exactly_once_live.py)."""

from __future__ import annotations

import asyncio
import datetime
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.offset_commit.v9.request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from kio.schema.offset_commit.v9.response import OffsetCommitResponse
from kio.schema.txn_offset_commit.v3.request import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)
from kio.schema.txn_offset_commit.v3.response import (
    TxnOffsetCommitResponse,
    TxnOffsetCommitResponsePartition,
    TxnOffsetCommitResponseTopic,
)
from kio.static.primitive import i16, i32, i64

from streamtasks.coordinator import CoordinatorConfig, GroupCoordinator
from streamtasks.coordinator.streams import StreamsGroupCoordinator
from streamtasks.coordinator.txn_commits import TransactionalGroupRecord
from streamtasks.protocol import consumer_group_codec as codec
from streamtasks.protocol.consumer_group import (
    CONSUMER_GROUP_HEARTBEAT_API_KEY,
    ConsumerGroupHeartbeatRequest,
)
from streamtasks.server.cluster_groups import decode_body, encode_body
from streamtasks.server.handlers import Handlers
from streamtasks.server.offset_api import OFFSET_COMMIT
from streamtasks.server.offsets import OffsetStore
from streamtasks.server.txn_api import TXN_OFFSET_COMMIT
from streamtasks.server.wire import RequestHeader
from tests.coordinator.support import image
from tests.server.test_streams_api import Clock, MemoryLog

GROUP = "eos"


class HeldCluster:
    """The backing cluster's group coordinator, answering NONE once the test releases it."""

    def __init__(self) -> None:
        self.sent: list[Any] = []
        self.called = asyncio.Event()
        self.release = asyncio.Event()

    async def call(self, group_id: str, api_key: int, api_version: int, request: Any) -> bytes:
        self.sent.append(request)
        assert (api_key, api_version) == (TXN_OFFSET_COMMIT, 3)
        self.called.set()
        await self.release.wait()
        answer = TxnOffsetCommitResponse(
            throttle_time=datetime.timedelta(0),  # type: ignore[arg-type]
            topics=tuple(
                TxnOffsetCommitResponseTopic(
                    name=t.name,
                    partitions=tuple(
                        TxnOffsetCommitResponsePartition(
                            partition_index=p.partition_index, error_code=ErrorCode(0)
                        )
                        for p in t.partitions
                    ),
                )
                for t in request.topics
            ),
        )
        return encode_body(answer)

    def forget(self, group_id: str) -> None:
        pass


def _handlers(log: MemoryLog, cluster: HeldCluster) -> Handlers:
    topics = image({"in": 2})
    return Handlers(
        coordinator=GroupCoordinator(CoordinatorConfig(), image=topics),
        offsets=OffsetStore(),
        log=log,  # type: ignore[arg-type]
        clock=Clock(),
        node_id=7,
        advertised=("127.0.0.1", 9092),
        max_groups=10,
        on_unknown_topics=lambda: None,
        streams=StreamsGroupCoordinator(image=topics),
        cluster=cluster,  # type: ignore[arg-type]
    )


async def _heartbeat(h: Handlers, member_id: str, epoch: int) -> Any:
    request = ConsumerGroupHeartbeatRequest(
        group_id=GROUP,
        member_id=member_id,
        member_epoch=epoch,
        rebalance_timeout_ms=30_000,
        subscribed_topic_names=("in",) if epoch == 0 else None,
        server_assignor="uniform" if epoch == 0 else None,
        topic_partitions=() if epoch == 0 else None,
    )
    header = RequestHeader(
        api_key=CONSUMER_GROUP_HEARTBEAT_API_KEY, api_version=1, correlation_id=1, client_id="t"
    )
    frame = await h.handle(header, codec.encode_heartbeat_request(request, 1), "h")
    assert frame is not None
    return codec.decode_heartbeat_response(frame[9:], 1)


async def _txn_commit(h: Handlers, member_id: str, generation: int) -> dict[int, int]:
    request = TxnOffsetCommitRequest(
        transactional_id="eos-p1",  # type: ignore[arg-type]
        group_id=GROUP,  # type: ignore[arg-type]
        producer_id=i64(11),  # type: ignore[arg-type]
        producer_epoch=i16(0),
        generation_id=i32(generation),
        member_id=member_id,
        group_instance_id=None,
        topics=(
            TxnOffsetCommitRequestTopic(
                name="in",  # type: ignore[arg-type]
                partitions=(
                    TxnOffsetCommitRequestPartition(
                        partition_index=i32(0), committed_offset=i64(42), committed_metadata=None
                    ),
                ),
            ),
        ),
    )
    return await _partition_errors(h, TXN_OFFSET_COMMIT, 3, request, TxnOffsetCommitResponse)


async def _partition_errors(
    h: Handlers, api_key: int, version: int, request: Any, answer_type: Any
) -> dict[int, int]:
    """Send a commit request through the handlers: its answer's error code per partition."""
    header = RequestHeader(api_key=api_key, api_version=version, correlation_id=2, client_id="t")
    frame = await h.handle(header, encode_body(request), "h")
    assert frame is not None
    answer = decode_body(answer_type, frame[9:])
    return {int(p.partition_index): int(p.error_code.value) for t in answer.topics for p in t.partitions}


def test_a_leave_waits_for_the_forwarded_commit_and_the_commit_goes_as_a_simple_commit() -> None:
    async def run() -> None:
        log, cluster = MemoryLog(), HeldCluster()
        h = _handlers(log, cluster)
        joined = await _heartbeat(h, "m1", 0)
        epoch = joined.member_epoch
        assert epoch > 0
        commit = asyncio.create_task(_txn_commit(h, "m1", epoch))
        await cluster.called.wait()
        leave = asyncio.create_task(_heartbeat(h, "m1", -1))
        for _ in range(20):
            await asyncio.sleep(0)
        assert not leave.done()  # held: m1 is still in the group while its commit is in flight
        group = h.coordinator.group(GROUP)
        assert group is not None
        assert "m1" in group.members
        assert h.txn.holds.held() == {GROUP}
        cluster.release.set()
        assert await commit == {0: 0}
        await leave
        group = h.coordinator.group(GROUP)
        assert group is None or "m1" not in group.members
        forwarded = cluster.sent[0]
        assert (forwarded.member_id, int(forwarded.generation_id), forwarded.group_instance_id) == (
            "",
            -1,
            None,
        )
        assert int(forwarded.topics[0].partitions[0].committed_offset) == 42
        assert [r for r in log.records if isinstance(r, TransactionalGroupRecord)] == [
            TransactionalGroupRecord(group_id=GROUP)
        ]
        assert GROUP in h.txn.transactional
        # m1 left: its next commit is fenced by the server, nothing is forwarded
        assert await _txn_commit(h, "m1", epoch) == {0: 25}  # UNKNOWN_MEMBER_ID
        assert len(cluster.sent) == 1

    asyncio.run(run())


async def _plain_commit(h: Handlers, member_id: str, epoch: int) -> dict[int, int]:
    request = OffsetCommitRequest(
        group_id=GROUP,  # type: ignore[arg-type]
        generation_id_or_member_epoch=i32(epoch),
        member_id=member_id,
        group_instance_id=None,
        topics=(
            OffsetCommitRequestTopic(
                name="in",  # type: ignore[arg-type]
                partitions=(
                    OffsetCommitRequestPartition(
                        partition_index=i32(0),
                        committed_offset=i64(43),
                        committed_leader_epoch=i32(-1),
                        committed_metadata=None,
                    ),
                ),
            ),
        ),
    )
    return await _partition_errors(h, OFFSET_COMMIT, 9, request, OffsetCommitResponse)


def test_a_plain_commit_behind_a_waiting_leave_is_checked_after_it_not_before() -> None:
    """A transactional group's plain OffsetCommit is checked once no write of the group waits:
    checked while a leave waited behind a forward, it would be forwarded after the leave, for a
    member the group no longer has."""

    async def run() -> None:
        log, cluster = MemoryLog(), HeldCluster()
        h = _handlers(log, cluster)
        epoch = (await _heartbeat(h, "m1", 0)).member_epoch
        commit = asyncio.create_task(_txn_commit(h, "m1", epoch))
        await cluster.called.wait()  # a forward in flight: GROUP is transactional and held
        leave = asyncio.create_task(_heartbeat(h, "m1", -1))
        for _ in range(20):
            await asyncio.sleep(0)
        plain = asyncio.create_task(_plain_commit(h, "m1", epoch))
        for _ in range(20):
            await asyncio.sleep(0)
        assert not leave.done()
        assert not plain.done()
        cluster.release.set()
        assert await commit == {0: 0}
        await leave
        assert await plain == {0: 25}  # UNKNOWN_MEMBER_ID: m1 left before its commit was checked
        assert len(cluster.sent) == 1  # only the transactional commit went to the cluster

    asyncio.run(run())


def test_a_stale_generation_is_refused_without_a_forward() -> None:
    async def run() -> None:
        log, cluster = MemoryLog(), HeldCluster()
        h = _handlers(log, cluster)
        epoch = (await _heartbeat(h, "m1", 0)).member_epoch
        assert await _txn_commit(h, "m1", epoch + 1) == {0: 22}  # ILLEGAL_GENERATION
        assert await _txn_commit(h, "nobody", epoch) == {0: 25}  # UNKNOWN_MEMBER_ID
        assert cluster.sent == []
        assert GROUP not in h.txn.transactional

    asyncio.run(run())


def test_a_held_group_with_a_timer_due_keeps_new_commits_back_until_its_timers_fired() -> None:
    async def run() -> None:
        h = _handlers(MemoryLog(), HeldCluster())
        txn = h.txn
        txn.holds.begin(GROUP)  # a forward in flight
        assert txn.timers_due([GROUP, "other"]) == {GROUP}  # the poll skips GROUP's timers
        assert not txn.holds.may_commit(GROUP)  # and new commits of GROUP wait for them
        assert txn.holds.may_commit("other")
        txn.holds.end(GROUP)  # the answer came
        assert txn.timers_due([GROUP]) == frozenset()  # the timers fire at this tick
        assert txn.holds.may_commit(GROUP)

    asyncio.run(run())


def test_a_transactional_groups_fetch_takes_the_clusters_offsets_and_the_stores_for_the_rest() -> None:
    from kio.schema.offset_fetch.v8.request import OffsetFetchRequest, OffsetFetchRequestGroup

    from streamtasks.coordinator.record_codec import OffsetCommitRecord
    from streamtasks.server import offset_api
    from streamtasks.server.offset_api import ClusterOffsets

    store = OffsetStore()
    for partition, offset in ((0, 5), (1, 6), (2, 7)):  # committed before the group went transactional
        store.replay(OffsetCommitRecord(group_id=GROUP, topic="in", partition=partition, offset=offset))
    cluster = ClusterOffsets(
        partitions={("in", 0): (40, 2, "m", 0), ("in", 1): (-1, -1, "", 88), ("in", 3): (9, 1, "", 0)}
    )
    asked = OffsetFetchRequestGroup(group_id=GROUP, topics=None)  # type: ignore[arg-type]
    request = OffsetFetchRequest(groups=(asked,), require_stable=True)
    response = offset_api.fetch(
        request, 8, coordinator=GroupCoordinator(CoordinatorConfig()), store=store, cluster={GROUP: cluster}
    )
    (group,) = response.groups
    got = {
        (str(t.name), int(p.partition_index)): (int(p.committed_offset), int(p.error_code.value))
        for t in group.topics
        for p in t.partitions
    }
    # the cluster's offset, its UNSTABLE_OFFSET_COMMIT (a transaction holds partition 1), the
    # store's offset where the cluster has none, and a partition only the cluster has
    assert got == {("in", 0): (40, 0), ("in", 1): (-1, 88), ("in", 2): (7, 0), ("in", 3): (9, 0)}
    failed = offset_api.fetch(
        request,
        8,
        coordinator=GroupCoordinator(CoordinatorConfig()),
        store=store,
        cluster={GROUP: ClusterOffsets(error=15)},
    )
    assert int(failed.groups[0].error_code.value) == 15  # COORDINATOR_NOT_AVAILABLE: the client asks again
    assert failed.groups[0].topics == ()
