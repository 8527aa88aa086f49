"""The classic group RPCs, decoded → kio → the real broker → decoded, one member end to end."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass

import pytest

from streamtasks.embedded import EmbeddedBroker, ExternalCluster
from streamtasks.errors import BrokerError
from streamtasks.protocol import classic_group as cg
from streamtasks.protocol.errors import KafkaErrorCode
from streamtasks.runtime.connection import (
    SILENT_OPEN_S,
    ConnectionLost,
    GroupCoordinatorClient,
    parse_bootstrap,
)
from topology import TopicPartition

pytestmark = [pytest.mark.integration, pytest.mark.smoke]


def join(group: str, member_id: str, instance: str | None = None) -> cg.JoinGroupRequest:
    return cg.JoinGroupRequest(
        group_id=group,
        member_id=member_id,
        group_instance_id=instance,
        session_timeout_ms=6000,
        rebalance_timeout_ms=6000,
        protocol_type="consumer",
        protocols=(cg.ProtocolMetadata(name="range", metadata=b"\x00\x01opaque"),),
        reason="test",
    )


async def first_send(client: GroupCoordinatorClient, request: cg.JoinGroupRequest) -> cg.JoinGroupResponse:
    """Send, retrying while the coordinator is not there yet, as every Kafka client does: on a
    fresh Apache Kafka cluster the first FindCoordinator creates ``__consumer_offsets`` and is
    answered COORDINATOR_NOT_AVAILABLE, then the coordinator answers COORDINATOR_LOAD_IN_PROGRESS
    for a moment (Tansu answers at once)."""
    deadline = asyncio.get_running_loop().time() + 30
    while True:
        try:
            response: cg.JoinGroupResponse = await client.send(request)
        except ConnectionLost:
            if asyncio.get_running_loop().time() > deadline:
                raise
        else:
            if not response.error.retriable or asyncio.get_running_loop().time() > deadline:
                return response
        await asyncio.sleep(0.1)


@dataclass(frozen=True, slots=True, kw_only=True)
class LoneMember:
    """A group's only member after JoinGroup and SyncGroup: its id and the coordinator's answers."""

    member_id: str
    joined: cg.JoinGroupResponse
    synced: cg.SyncGroupResponse

    @property
    def generation(self) -> int:
        return self.joined.generation_id

    def heartbeat(self, group: str, generation: int | None = None) -> cg.HeartbeatRequest:
        """A heartbeat of this member (at ``generation``, default its own)."""
        return cg.HeartbeatRequest(
            group_id=group,
            generation_id=self.generation if generation is None else generation,
            member_id=self.member_id,
            group_instance_id=None,
        )


async def join_and_sync(client: GroupCoordinatorClient, group: str) -> LoneMember:
    """Join ``group`` as its only member (the first JoinGroup is answered MEMBER_ID_REQUIRED with
    the id to join with) and sync with one assignment for itself, ``b"\\x00\\x03mine"``."""
    first = await first_send(client, join(group, cg.UNKNOWN_MEMBER_ID))
    assert first.error is KafkaErrorCode.MEMBER_ID_REQUIRED
    assert first.member_id
    joined = await client.send(join(group, first.member_id), timeout_s=30)
    assert joined.error is KafkaErrorCode.NONE, joined
    synced = await client.send(
        cg.SyncGroupRequest(
            group_id=group,
            generation_id=joined.generation_id,
            member_id=first.member_id,
            group_instance_id=None,
            protocol_type="consumer",
            protocol_name="range",
            assignments=(cg.SyncGroupAssignment(member_id=first.member_id, assignment=b"\x00\x03mine"),),
        )
    )
    assert synced.error is KafkaErrorCode.NONE
    return LoneMember(member_id=first.member_id, joined=joined, synced=synced)


async def lone_member_round_trip(bootstrap: str) -> None:
    group = f"wire-{uuid.uuid4().hex[:8]}"
    client = GroupCoordinatorClient(bootstrap, group)
    try:
        member = await join_and_sync(client, group)
        joined = member.joined
        assert joined.leader == member.member_id
        assert joined.protocol_name == "range"
        assert [m.metadata for m in joined.members] == [b"\x00\x01opaque"]
        assert member.synced.assignment == b"\x00\x03mine"
        beat = await client.send(member.heartbeat(group))
        assert beat.error is KafkaErrorCode.NONE
        stale = await client.send(member.heartbeat(group, member.generation + 7))
        assert stale.error is KafkaErrorCode.ILLEGAL_GENERATION
        committed = await client.send(
            cg.OffsetCommitRequest(
                group_id=group,
                generation_id=member.generation,
                member_id=member.member_id,
                group_instance_id=None,
                offsets=(cg.CommittedOffset(partition=TopicPartition("wire-topic", 0), offset=42),),
            )
        )
        assert committed.errors == ((TopicPartition("wire-topic", 0), KafkaErrorCode.NONE),)
        fetched = await client.send(
            cg.OffsetFetchRequest(
                group_id=group, partitions=(TopicPartition("wire-topic", 0), TopicPartition("wire-topic", 1))
            )
        )
        assert fetched.error is KafkaErrorCode.NONE
        offsets = {tp: off for tp, off, _ in fetched.offsets}
        assert offsets[TopicPartition("wire-topic", 0)] == 42
        assert offsets.get(TopicPartition("wire-topic", 1), -1) == -1
        left = await client.send(cg.LeaveGroupRequest(group_id=group, member_id=member.member_id))
        assert left.error is KafkaErrorCode.NONE
    finally:
        await client.close()


def test_lone_member_joins_syncs_beats_commits_and_leaves(kafka: EmbeddedBroker | ExternalCluster) -> None:
    kafka.create_topics({"wire-topic": 2})
    asyncio.run(asyncio.wait_for(lone_member_round_trip(kafka.bootstrap_servers), 60))


def test_unreachable_coordinator_is_connection_lost() -> None:
    async def go() -> None:
        client = GroupCoordinatorClient("127.0.0.1:1", "g")
        with pytest.raises(ConnectionLost, match="not found"):
            await client.send(
                cg.HeartbeatRequest(group_id="g", generation_id=1, member_id="m", group_instance_id=None)
            )

    asyncio.run(go())


@pytest.mark.parametrize("bad", ["", "host", "host:", ":9092", "a:1,b"])
def test_bootstrap_must_be_host_port(bad: str) -> None:
    with pytest.raises(BrokerError, match="host:port"):
        parse_bootstrap(bad)


def test_connection_closed_by_the_peer_closes_its_transport() -> None:
    """A connection whose peer went away (a coordinator killed with -9) is dropped unclosed by
    whoever finds it closed when they next send; it must not leave its socket open behind it
    (a ResourceWarning, an error under this suite's filterwarnings)."""
    import gc
    import warnings

    from streamtasks.runtime.connection import AsyncConnection

    async def go() -> list[warnings.WarningMessage]:
        async def hang_up(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            writer.close()

        server = await asyncio.start_server(hang_up, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        conn = await AsyncConnection.open("127.0.0.1", port)
        async with asyncio.timeout(10):
            while not conn.closed:
                await asyncio.sleep(0.01)
        with pytest.raises(ConnectionLost, match="closed"):
            await conn.call_raw(18, 3, b"\x00")
        await asyncio.sleep(0)  # the transport's own close callback
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ResourceWarning)
            del conn
            gc.collect()
        server.close()
        await server.wait_closed()
        return [w for w in caught if issubclass(w.category, ResourceWarning)]

    assert asyncio.run(go()) == []


def test_a_partition_level_not_coordinator_says_the_coordinator_moved() -> None:
    """OffsetCommit carries NOT_COORDINATOR per partition, with no top-level error: the client
    must forget the coordinator on it too, or it asks the old broker again and again."""
    from streamtasks.runtime.connection import coordinator_moved

    tp = TopicPartition("t", 0)
    gone = [KafkaErrorCode.NOT_COORDINATOR, KafkaErrorCode.COORDINATOR_NOT_AVAILABLE]
    for code in gone:
        assert coordinator_moved(cg.OffsetCommitResponse(errors=((tp, KafkaErrorCode.NONE), (tp, code))))
        assert coordinator_moved(cg.OffsetFetchResponse(error=code))
        assert coordinator_moved(cg.OffsetFetchResponse(error=KafkaErrorCode.NONE, offsets=((tp, -1, code),)))
        assert coordinator_moved(cg.HeartbeatResponse(error=code))
    # still loading the group: the broker is the coordinator, kept (its connection too)
    loading = KafkaErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    for code in [
        KafkaErrorCode.NONE,
        KafkaErrorCode.ILLEGAL_GENERATION,
        KafkaErrorCode.REQUEST_TIMED_OUT,
        loading,
    ]:
        assert not coordinator_moved(cg.OffsetCommitResponse(errors=((tp, code),)))
        assert not coordinator_moved(cg.HeartbeatResponse(error=code))


def _commit(group: str) -> cg.OffsetCommitRequest:
    return cg.OffsetCommitRequest(
        group_id=group, generation_id=1, member_id="m", group_instance_id=None,
        offsets=(cg.CommittedOffset(partition=TopicPartition("t", 0), offset=5),),
    )  # fmt: skip


def test_a_commit_answered_not_coordinator_looks_the_coordinator_up_again() -> None:
    from collections import deque

    from tests.runtime.fake_coordinator import FakeCoordinator

    async def go() -> None:
        async with FakeCoordinator(commit_errors=deque([KafkaErrorCode.NOT_COORDINATOR])) as fake:
            client = GroupCoordinatorClient(fake.address, "g")
            try:
                first = await client.send(_commit("g"))
                assert first.errors == ((TopicPartition("t", 0), KafkaErrorCode.NOT_COORDINATOR),)
                second = await client.send(_commit("g"))
                assert second.errors == ((TopicPartition("t", 0), KafkaErrorCode.NONE),)
                assert fake.finds == 2  # before the fix: 1, the old connection was kept
            finally:
                await client.close()

    asyncio.run(asyncio.wait_for(go(), 20))


def test_a_bootstrap_server_that_dies_mid_find_coordinator_is_passed_over() -> None:
    """The first bootstrap server hangs up on FindCoordinator (killed mid-request): the lookup
    goes on to the next server instead of failing, and starts there next time."""
    from tests.runtime.fake_coordinator import FakeCoordinator

    async def go() -> None:
        async with FakeCoordinator(hang_up_finds=1) as dying, FakeCoordinator() as alive:
            client = GroupCoordinatorClient(f"{dying.address},{alive.address}", "g")
            try:
                answer = await client.send(_commit("g"))
                assert answer.errors == ((TopicPartition("t", 0), KafkaErrorCode.NONE),)
                assert (dying.finds, alive.finds) == (1, 1)
                await client.reset()
                await client.send(_commit("g"))
                assert (dying.finds, alive.finds) == (1, 2)  # the one that answered is asked first
            finally:
                await client.close()

    asyncio.run(asyncio.wait_for(go(), 20))


def test_a_commit_answered_load_in_progress_keeps_the_coordinator_and_its_connection() -> None:
    """A coordinator still loading the group after a failover answers the members' commits
    COORDINATOR_LOAD_IN_PROGRESS every ``retry.backoff.ms``: the client keeps it. Before, each
    such answer closed the connection, failing the heartbeat or JoinGroup in flight on it
    ("connection closed", seen in the broker-crash drills' worker logs) and costing a lookup."""
    from collections import deque

    from tests.runtime.fake_coordinator import FakeCoordinator

    async def go() -> None:
        loading = KafkaErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        async with FakeCoordinator(commit_errors=deque([loading, loading])) as fake:
            client = GroupCoordinatorClient(fake.address, "g")
            try:
                for expected in (loading, loading, KafkaErrorCode.NONE):
                    answer = await client.send(_commit("g"))
                    assert answer.errors == ((TopicPartition("t", 0), expected),)
                assert (fake.finds, fake.commits) == (1, 3)
            finally:
                await client.close()

    asyncio.run(asyncio.wait_for(go(), 20))


def test_a_request_failed_on_an_older_connection_does_not_close_the_new_one() -> None:
    """``reset(used)``: a request that failed on a connection the client already replaced (it
    was in flight while the coordinator moved) leaves the new coordinator's connection open."""
    from tests.runtime.fake_coordinator import FakeCoordinator

    async def go() -> None:
        async with FakeCoordinator() as fake:
            client = GroupCoordinatorClient(fake.address, "g")
            try:
                await client.ensure_coordinator()
                old = client._coordinator
                await client.reset(old)  # this one was current: forgotten and closed
                assert old is not None
                assert old.closed
                await client.ensure_coordinator()
                new = client._coordinator
                await client.reset(old)  # a late failure on the old one: nothing happens
                assert new is not None
                assert not new.closed
                assert client._coordinator is new
                answer = await client.send(_commit("g"))
                assert answer.errors == ((TopicPartition("t", 0), KafkaErrorCode.NONE),)
                assert fake.finds == 2
            finally:
                await client.close()

    asyncio.run(asyncio.wait_for(go(), 20))


def test_a_commit_answered_coordinator_not_available_does_not_fail_the_request_behind_it() -> None:
    """A commit answered COORDINATOR_NOT_AVAILABLE makes the client look the coordinator up
    again, but the request sent behind it on the same connection (a heartbeat, in the drills)
    still gets its answer: the forgotten connection closes once nothing is in flight on it."""
    from collections import deque

    from tests.runtime.fake_coordinator import FakeCoordinator

    async def go() -> None:
        errors = deque([KafkaErrorCode.COORDINATOR_NOT_AVAILABLE])
        async with FakeCoordinator(commit_errors=errors, delay_s=0.3) as fake:
            client = GroupCoordinatorClient(fake.address, "g")
            try:
                await client.ensure_coordinator()
                old = client._coordinator
                commit = asyncio.ensure_future(client.send(_commit("g")))
                await asyncio.sleep(0.05)  # the commit is on the wire; the fetch goes behind it
                fetch = cg.OffsetFetchRequest(group_id="g", partitions=(TopicPartition("t", 0),))
                moved, fetched = await asyncio.gather(commit, client.send(fetch))
                assert moved.errors == ((TopicPartition("t", 0), KafkaErrorCode.COORDINATOR_NOT_AVAILABLE),)
                assert fetched.error is KafkaErrorCode.NONE  # before: ConnectionLost, "connection closed"
                await asyncio.sleep(0.05)
                assert old is not None
                assert old.closed  # closed once idle
                await client.send(_commit("g"))
                assert fake.finds == 2
            finally:
                await client.close()

    asyncio.run(asyncio.wait_for(go(), 20))


def test_an_abandoned_silent_coordinator_fails_the_commit_waiting_on_it_and_is_asked_last() -> None:
    """A hung coordinator (here: one that takes a minute over each commit) holds a commit; the
    member gives it up as silent (``abandon``, at its session lapse): the commit fails at once
    with ConnectionLost instead of at its request timeout (it held the drill worker's poll loop
    past its poll timer), the next lookup asks the other bootstrap server first, and the commit
    sent again lands on the coordinator that one names."""
    from tests.runtime.fake_coordinator import FakeCoordinator

    async def go() -> None:
        async with FakeCoordinator(delay_s=60) as hung, FakeCoordinator() as alive:
            client = GroupCoordinatorClient(f"{hung.address},{alive.address}", "g", timeout_s=30)
            try:
                commit = asyncio.ensure_future(client.send(_commit("g"), timeout_s=30))
                await asyncio.sleep(0.2)
                assert (hung.finds, commit.done()) == (1, False)  # the commit waits there
                started = asyncio.get_running_loop().time()
                await client.abandon()
                with pytest.raises(ConnectionLost):
                    await commit
                assert asyncio.get_running_loop().time() - started < 1.0
                answer = await client.send(_commit("g"))
                assert answer.errors == ((TopicPartition("t", 0), KafkaErrorCode.NONE),)
                assert (hung.finds, alive.finds, alive.commits) == (1, 1, 1)
            finally:
                await client.close()

    asyncio.run(asyncio.wait_for(go(), 20))


def test_a_lookup_that_names_the_silent_coordinator_again_fails_fast_then_finds_the_new_one() -> None:
    """While the group moves off a hung broker, a lookup may still name it: the connection to
    it (its ApiVersions) is given ``SILENT_OPEN_S``, not the request timeout, so the lookup
    fails fast and the next one finds the coordinator the group moved to."""
    from tests.runtime.fake_coordinator import FakeCoordinator

    async def go() -> None:
        async with (
            FakeCoordinator(mute=True) as hung,
            FakeCoordinator() as moved,
            FakeCoordinator(names_port=hung.port) as stale,
        ):
            client = GroupCoordinatorClient(stale.address, "g", timeout_s=30)
            try:
                client._silent_peer = hung.address  # as abandon() leaves it
                started = asyncio.get_running_loop().time()
                with pytest.raises(ConnectionLost, match="timed out"):
                    await client.ensure_coordinator()
                assert asyncio.get_running_loop().time() - started < SILENT_OPEN_S + 1
                stale.names_port = moved.port  # the group moved
                answer = await client.send(_commit("g"))
                assert answer.errors == ((TopicPartition("t", 0), KafkaErrorCode.NONE),)
                assert moved.commits == 1
            finally:
                await client.close()

    asyncio.run(asyncio.wait_for(go(), 20))
