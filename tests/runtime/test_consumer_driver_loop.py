"""The KIP-848 driver's loop end to end without a broker: two ``ConsumerGroupDriver``s on real
asyncio time, their requests encoded by the driver's wire code and answered by streamtasks' own
coordinator (``streamtasks.coordinator``) from the decoded bytes, as a ``streamtasks
coordinator`` server would. This is the one place the client-side path (ShouldComputeAssignment
→ PrepareAssignment → assignor → InstallAssignment) runs through the driver; Apache Kafka has no
such RPCs (live tests: tests/integration/test_consumer_kip848.py)."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Mapping
from typing import Any

from assignors.partition.range import RangeAssignor
from assignors.partition.uniform import UniformAssignor
from streamtasks.coordinator import CoordinatorConfig, GroupCoordinator, MetadataImage, TopicMetadata
from streamtasks.membership.classic import AssignmentChanged, ErrorReported, InvokeListener, ListenerKind
from streamtasks.membership.consumer import ConsumerMember, ConsumerMemberConfig, MemberState
from streamtasks.protocol import assignment_rpc as rpc
from streamtasks.protocol import classic_group as cg
from streamtasks.protocol.consumer_group import CONSUMER_GROUP_HEARTBEAT_API_KEY
from streamtasks.protocol.consumer_group_codec import decode_heartbeat_request, encode_heartbeat_response
from streamtasks.protocol.errors import KafkaErrorCode
from streamtasks.runtime import consumer_driver
from streamtasks.runtime.consumer_driver import ConsumerGroupDriver
from streamtasks.runtime.member_loop import monotonic_ms
from topology.ids import TopicPartition

TOPIC = "foo"
TOPIC_ID = uuid.uuid5(uuid.NAMESPACE_OID, TOPIC)
ALL = frozenset(TopicPartition(TOPIC, p) for p in range(4))


class InProcessCoordinator:
    """Stands where ``GroupCoordinatorClient`` stands: request bodies in, response bodies out,
    answered by the pure coordinator (its timers run on a task of their own)."""

    def __init__(self) -> None:
        self.coordinator = GroupCoordinator(
            CoordinatorConfig(
                session_timeout_ms=3_000, heartbeat_interval_ms=100, server_assignors=("uniform",)
            ),
            assignors={"uniform": UniformAssignor()},
            image=MetadataImage((TopicMetadata(topic_id=TOPIC_ID, name=TOPIC, num_partitions=4),)),
        )
        self.calls: dict[int, int] = {}
        self.commits: list[int] = []

    async def ensure_coordinator(self) -> None:
        return None

    async def send_raw(self, api_key: int, api_version: int, body: bytes, *, timeout_s: float) -> bytes:
        self.calls[api_key] = self.calls.get(api_key, 0) + 1
        c, now = self.coordinator, monotonic_ms()
        if api_key == CONSUMER_GROUP_HEARTBEAT_API_KEY:
            response = c.apply(c.heartbeat(decode_heartbeat_request(body, api_version), now))
            return encode_heartbeat_response(response, api_version)
        if api_key == rpc.PREPARE_ASSIGNMENT_API_KEY:
            return rpc.encode_prepare_response(
                c.apply(c.prepare_assignment(rpc.decode_prepare_request(body), now))
            )
        assert api_key == rpc.INSTALL_ASSIGNMENT_API_KEY
        return rpc.encode_install_response(
            c.apply(c.install_assignment(rpc.decode_install_request(body), now))
        )

    async def send_entity(
        self, entity: Any, response_cls: Any, *, timeout_s: float
    ) -> cg.OffsetCommitResponse:
        self.commits.append(int(entity.generation_id_or_member_epoch))
        return cg.OffsetCommitResponse(
            errors=tuple(
                (TopicPartition(str(t.name), int(p.partition_index)), KafkaErrorCode.NONE)
                for t in entity.topics
                for p in t.partitions
            )
        )

    async def reset(self) -> None:
        return None

    async def timers(self) -> None:
        while True:
            self.coordinator.poll(monotonic_ms())
            await asyncio.sleep(0.05)


class Host:
    """The consumer side of one driver: what it owns and the listener calls, in order."""

    def __init__(self) -> None:
        self.owned: frozenset[TopicPartition] = frozenset()
        self.calls: list[tuple[ListenerKind, tuple[TopicPartition, ...]]] = []
        self.errors: list[ErrorReported] = []

    def positions(self) -> Mapping[TopicPartition, int]:
        return dict.fromkeys(self.owned, 7)

    def commit_metadata(self) -> Mapping[TopicPartition, str]:
        return {}

    async def assignment_changed(self, change: AssignmentChanged) -> None:
        self.owned = frozenset(change.owned)

    async def invoke_listener(self, call: InvokeListener) -> None:
        self.calls.append((call.kind, call.partitions))

    async def before_commit(self, partitions: tuple[TopicPartition, ...]) -> None:
        return None

    def error_reported(self, error: ErrorReported) -> None:
        self.errors.append(error)

    async def partition_counts(self, topics: tuple[str, ...]) -> Mapping[str, int]:
        return (await self.topic_metadata(topics)).partitions

    async def topic_metadata(self, topics: tuple[str, ...]) -> consumer_driver.TopicMetadata:
        return consumer_driver.TopicMetadata(partitions={TOPIC: 4}, topic_ids={TOPIC: TOPIC_ID})


async def until(check: Any, what: str, timeout_s: float = 20) -> None:
    async with asyncio.timeout(timeout_s):
        while not check():
            await asyncio.sleep(0.01)


def _members(rebalance_timeout_ms: int = 30_000, **config: Any) -> dict[str, ConsumerMember]:
    return {
        n: ConsumerMember(
            ConsumerMemberConfig(
                group_id="g",
                member_id=consumer_driver.new_member_id(),
                topics=(TOPIC,),
                rebalance_timeout_ms=rebalance_timeout_ms,
                session_timeout_ms=3_000,
                **config,
            ),
            monotonic_ms(),
        )
        for n in ("a", "b")
    }


def _shared(hosts: dict[str, Host]) -> Any:
    return lambda: (
        hosts["a"].owned | hosts["b"].owned == ALL
        and not hosts["a"].owned & hosts["b"].owned
        and len(hosts["b"].owned) == 2
    )


async def two_members_client_side() -> tuple[
    InProcessCoordinator, dict[str, Host], dict[str, ConsumerMember]
]:
    server = InProcessCoordinator()
    timers = asyncio.get_running_loop().create_task(server.timers())
    hosts = {n: Host() for n in ("a", "b")}
    members = _members(client_assignors=(RangeAssignor(),))
    drivers = {n: ConsumerGroupDriver(members[n], server, hosts[n]) for n in hosts}  # type: ignore[arg-type]
    runs = {}
    try:
        for name, driver in drivers.items():
            await driver.refresh_metadata()
            runs[name] = asyncio.get_running_loop().create_task(driver.run())
            if name == "a":
                await until(lambda: hosts["a"].owned == ALL, "a owns everything")
        await until(_shared(hosts), "a and b share")
        await drivers["b"].leave("test", timeout_s=5)
        await until(lambda: hosts["a"].owned == ALL, "a owns everything again")
        await drivers["a"].leave("test", timeout_s=5)
    finally:
        timers.cancel()
        for task in runs.values():
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(timers, *runs.values(), return_exceptions=True)
    return server, hosts, members


def test_client_side_assignment_runs_through_the_driver() -> None:
    server, hosts, members = asyncio.run(two_members_client_side())
    assert server.calls[rpc.PREPARE_ASSIGNMENT_API_KEY] >= 2  # a alone, then a and b
    assert server.calls[rpc.INSTALL_ASSIGNMENT_API_KEY] >= 2
    assert all(m.state is MemberState.UNSUBSCRIBED for m in members.values())
    # a gave two partitions up: revoked (after committing them with its epoch) before b got them
    a_calls = [kind for kind, parts in hosts["a"].calls if parts]
    assert a_calls[:2] == [ListenerKind.ASSIGNED, ListenerKind.REVOKED]
    assert server.commits
    assert min(server.commits) > 0
    assert not [e for e in hosts["a"].errors + hosts["b"].errors if e.fatal]


async def poll_timer() -> tuple[list[tuple[ListenerKind, tuple[TopicPartition, ...]]], list[MemberState]]:
    """Member b's application stops asking for records for longer than its rebalance timeout
    (Kafka's max.poll.interval.ms); a keeps polling."""
    server = InProcessCoordinator()
    timers = asyncio.get_running_loop().create_task(server.timers())
    hosts = {n: Host() for n in ("a", "b")}
    members = _members(rebalance_timeout_ms=1_500)
    drivers = {n: ConsumerGroupDriver(members[n], server, hosts[n]) for n in hosts}  # type: ignore[arg-type]
    runs = {}
    states: list[MemberState] = []

    async def a_polls() -> None:
        while True:
            drivers["a"].note_poll()
            await asyncio.sleep(0.05)

    polling = asyncio.get_running_loop().create_task(a_polls())
    try:
        for name, driver in drivers.items():
            await driver.refresh_metadata()
            runs[name] = asyncio.get_running_loop().create_task(driver.run())
            driver.note_poll()
        await until(_shared(hosts), "a and b share")
        await until(lambda: members["b"].state is MemberState.STALE, "b stale after 1.5 s without a poll")
        states.append(members["b"].state)
        await until(lambda: hosts["a"].owned == ALL, "a owns everything")
        drivers["b"].note_poll()  # the application is back: b rejoins at epoch 0
        await until(_shared(hosts), "a and b share again")
        states.append(members["b"].state)
    finally:
        polling.cancel()
        timers.cancel()
        for task in runs.values():
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(polling, timers, *runs.values(), return_exceptions=True)
    return hosts["b"].calls, states


def test_a_member_whose_application_stops_polling_goes_stale_and_rejoins_when_it_polls() -> None:
    calls, states = asyncio.run(poll_timer())
    assert states[0] is MemberState.STALE
    assert states[1] in (MemberState.RECONCILING, MemberState.ACKNOWLEDGING, MemberState.STABLE)
    kinds = [kind for kind, parts in calls if parts]
    # b's partitions were lost (no commit, no revocation) when it went stale, then assigned again
    assert kinds == [ListenerKind.ASSIGNED, ListenerKind.LOST, ListenerKind.ASSIGNED]


class FailsOnce(InProcessCoordinator):
    """Its first heartbeat after ``armed`` raises a plain exception (a bug on the client side,
    not a broker or decode error)."""

    armed = False

    async def send_raw(self, api_key: int, api_version: int, body: bytes, *, timeout_s: float) -> bytes:
        if self.armed and api_key == CONSUMER_GROUP_HEARTBEAT_API_KEY:
            self.armed = False
            raise RuntimeError("boom")
        return await super().send_raw(api_key, api_version, body, timeout_s=timeout_s)


async def heartbeat_raises() -> tuple[int, int, list[ListenerKind], int, int]:
    """A member whose request timeout is ten minutes: an unexpected exception in a request
    must fail that request at once (the member keeps its epoch and partitions and heartbeats
    on), not leave it with a request in flight that never ends."""
    server = FailsOnce()
    timers = asyncio.get_running_loop().create_task(server.timers())
    host = Host()
    member = _members(request_timeout_ms=600_000)["a"]
    driver = ConsumerGroupDriver(member, server, host)  # type: ignore[arg-type]
    await driver.refresh_metadata()
    run = asyncio.get_running_loop().create_task(driver.run())
    try:
        await until(lambda: host.owned == ALL and member.state is MemberState.STABLE, "a owns everything")
        epoch, host.calls = member.member_epoch, []
        server.armed = True
        await until(lambda: not server.armed, "the failing heartbeat was sent")
        before = server.calls[CONSUMER_GROUP_HEARTBEAT_API_KEY]
        await until(
            lambda: server.calls[CONSUMER_GROUP_HEARTBEAT_API_KEY] > before + 1, "heartbeats again", 60
        )
        kinds, after_epoch = [kind for kind, _ in host.calls], member.member_epoch
        await driver.leave("test", timeout_s=5)
    finally:
        timers.cancel()
        run.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(timers, run, return_exceptions=True)
    return before, server.calls[CONSUMER_GROUP_HEARTBEAT_API_KEY], kinds, epoch, after_epoch


def test_an_unexpected_exception_in_a_request_fails_it_at_once() -> None:
    before, after, kinds, epoch, after_epoch = asyncio.run(heartbeat_raises())
    assert after > before + 1
    assert kinds == []  # nothing lost, revoked or assigned again
    assert after_epoch == epoch
