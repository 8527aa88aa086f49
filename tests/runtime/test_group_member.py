"""Offset commits and fetches while the coordinator moves (a broker died): sent again to the
coordinator looked up again, never given up at the first NOT_COORDINATOR, and never an
assigned partition started at auto.offset.reset because the coordinator could not answer."""

from __future__ import annotations

import asyncio
from collections import deque

import pytest

from streamtasks.errors import BrokerError, CommitFailedError
from streamtasks.membership.classic import ClassicMember
from streamtasks.protocol import classic_group as cg
from streamtasks.protocol.errors import KafkaErrorCode as E
from streamtasks.runtime.config import ConsumerConfig, make_config
from streamtasks.runtime.connection import GroupCoordinatorClient
from streamtasks.runtime.group_member import (
    fetch_answered,
    fetch_committed,
    generation_left,
    make_member,
    member_epoch,
    send_offset_commit_retrying,
)
from streamtasks.runtime.member_loop import monotonic_ms
from tests.runtime.fake_coordinator import FakeCoordinator
from topology import TopicPartition

TP = TopicPartition("t", 0)


def _config(address: str, **kw: object) -> ConsumerConfig:
    settings: dict[str, object] = {
        "bootstrap_servers": address, "group_id": "g", "retry_backoff_ms": 10, "request_timeout_ms": 2_000,
        "session_timeout_ms": 6_000, "heartbeat_interval_ms": 1_000,
    }  # fmt: skip
    return make_config({**settings, **kw})


def test_a_classic_member_is_made_knowing_when_for_its_rebalance_rates() -> None:
    """A live App's ``rebalance_rate_per_hour`` read 6.0 after 6 rebalances in under a minute:
    the member was made with creation time 0, so its rates never extrapolated over its first
    hour (the metric's docs and Kafka's windowed rate do)."""
    member = make_member(_config("127.0.0.1:9"), ("t",), None)
    assert isinstance(member, ClassicMember)
    now = monotonic_ms()
    for _ in range(6):  # six rebalances in its first minute (the only way in: its metrics owner)
        member._metrics.rebalance_completed(now)
    rate = member.metrics(now + 60_000)["rebalance-rate-per-hour"]
    assert rate == pytest.approx(6 * 60, rel=0.01)  # 6 per minute, not 6 per hour


def test_offset_fetch_answers_that_are_not_final() -> None:
    assert fetch_answered(cg.OffsetFetchResponse(error=E.NONE, offsets=((TP, 3, E.NONE),)))
    assert not fetch_answered(cg.OffsetFetchResponse(error=E.COORDINATOR_LOAD_IN_PROGRESS))
    assert not fetch_answered(cg.OffsetFetchResponse(error=E.NOT_COORDINATOR))
    assert not fetch_answered(
        cg.OffsetFetchResponse(error=E.NONE, offsets=((TP, -1, E.UNSTABLE_OFFSET_COMMIT),))
    )
    assert fetch_answered(cg.OffsetFetchResponse(error=E.GROUP_AUTHORIZATION_FAILED))


def test_a_commit_meeting_a_moving_coordinator_lands_on_the_new_one() -> None:
    async def go() -> None:
        errors = deque([E.NOT_COORDINATOR, E.COORDINATOR_LOAD_IN_PROGRESS, E.REQUEST_TIMED_OUT])
        async with FakeCoordinator(commit_errors=errors) as fake:
            config = _config(fake.address)
            member = make_member(config, ("t",), None)
            assert isinstance(member, ClassicMember)
            client = GroupCoordinatorClient(fake.address, "g")
            try:
                epoch = member_epoch(member)  # the generation is kept while the coordinator moves
                answer = await send_offset_commit_retrying(client, member, config, {TP: 7}, epoch)
            finally:
                await client.close()
            assert answer.errors == ((TP, E.NONE),)
            assert fake.commits == 4
            # looked up again after NOT_COORDINATOR (not only after the timeout); kept on
            # COORDINATOR_LOAD_IN_PROGRESS (the coordinator is right, still loading the group)
            assert fake.finds == 2

    asyncio.run(asyncio.wait_for(go(), 20))


def test_a_commit_of_a_generation_the_member_has_left_is_not_retried_for_the_whole_timeout() -> None:
    """The coordinator keeps answering NOT_COORDINATOR, and the member is no longer at the
    generation the commit was sent with (its partitions were lost meanwhile): the commit is
    given up after one retry instead of holding the caller for the request timeout (30 s by
    default), as in the broker-crash drill, where that expired the application's poll timer."""

    async def go() -> None:
        errors = deque([E.NOT_COORDINATOR] * 10_000)
        async with FakeCoordinator(commit_errors=errors) as fake:
            config = _config(fake.address, request_timeout_ms=60_000)
            member = make_member(config, ("t",), None)
            client = GroupCoordinatorClient(fake.address, "g")
            try:
                with pytest.raises(CommitFailedError, match="given up: sent with generation/epoch 3"):
                    await send_offset_commit_retrying(client, member, config, {TP: 7}, 3)
            finally:
                await client.close()
            assert member_epoch(member) != 3
            assert fake.commits == 1

    asyncio.run(asyncio.wait_for(go(), 20))


def test_a_commit_rejected_for_a_reason_of_the_group_is_not_sent_again() -> None:
    async def go() -> None:
        async with FakeCoordinator(commit_errors=deque([E.ILLEGAL_GENERATION])) as fake:
            config = _config(fake.address)
            client = GroupCoordinatorClient(fake.address, "g")
            try:
                answer = await send_offset_commit_retrying(
                    client, make_member(config, ("t",), None), config, {TP: 7}, 1
                )
            finally:
                await client.close()
            assert answer.errors == ((TP, E.ILLEGAL_GENERATION),)
            assert fake.commits == 1

    asyncio.run(asyncio.wait_for(go(), 20))


def test_committed_offsets_are_asked_again_while_the_coordinator_loads_the_group() -> None:
    async def go() -> None:
        errors = deque([E.COORDINATOR_NOT_AVAILABLE, E.COORDINATOR_LOAD_IN_PROGRESS])
        async with FakeCoordinator(fetch_errors=errors, committed={("t", 0): 42}) as fake:
            client = GroupCoordinatorClient(fake.address, "g")
            try:
                got = await fetch_committed(client, _config(fake.address), (TP, TopicPartition("t", 1)))
            finally:
                await client.close()
            assert got == {TP: 42}  # partition 1 has no commit: left to auto.offset.reset
            assert fake.fetches == 3

    asyncio.run(asyncio.wait_for(go(), 20))


def test_committed_offsets_never_answered_are_an_error_not_a_silent_reset() -> None:
    async def go() -> None:
        errors = deque([E.COORDINATOR_LOAD_IN_PROGRESS] * 10_000)
        async with FakeCoordinator(fetch_errors=errors) as fake:
            client = GroupCoordinatorClient(fake.address, "g")
            try:
                with pytest.raises(BrokerError, match="COORDINATOR_LOAD_IN_PROGRESS"):
                    await fetch_committed(client, _config(fake.address, request_timeout_ms=1_000), (TP,))
            finally:
                await client.close()

    asyncio.run(asyncio.wait_for(go(), 20))


def test_a_kip848_member_leaves_the_generation_only_when_it_is_out_of_the_group() -> None:
    config = _config("127.0.0.1:9092", group_protocol="consumer")
    member = make_member(config, ("t",), None)
    assert member_epoch(member) == 0  # not joined: out of the group
    assert generation_left(member, 4)
    assert not generation_left(member, 0)
