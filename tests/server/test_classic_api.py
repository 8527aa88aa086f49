"""JoinGroup / SyncGroup / Heartbeat / LeaveGroup on kio's classes at every version the server
serves, the parked joins' futures, and the offset rules for classic members (their generation
is their member epoch; ILLEGAL_GENERATION otherwise, at any OffsetCommit version)."""

from __future__ import annotations

import asyncio
import datetime
from typing import Any

import pytest

from streamtasks.coordinator.classic import LeaveGroupMemberResult, LeaveGroupsResponse
from streamtasks.coordinator.parked import AnswerJoin, ParkedJoin, ParkJoin
from streamtasks.coordinator.types import EMPTY_PARTITIONS
from streamtasks.errors import BrokerError
from streamtasks.protocol.classic_group import HeartbeatResponse, JoinGroupResponse, SyncGroupResponse
from streamtasks.protocol.errors import KafkaErrorCode
from streamtasks.server import classic_api as api
from streamtasks.server.handlers import REFUSED_APIS, SERVED_VERSIONS
from streamtasks.server.offset_api import element
from streamtasks.server.offset_api import make as build
from streamtasks.server.offsets import OffsetCommitCheck, check_commit, check_fetch
from streamtasks.server.routing import decode_kio_response
from streamtasks.server.wire import encode_kio_response, kio_request_class
from tests.coordinator.classic_support import ClassicHarness
from tests.coordinator.support import GROUP

MS = datetime.timedelta(milliseconds=1)


def make(api_key: int, version: int, **values: Any) -> Any:
    return build(kio_request_class(api_key, version), **values)


def test_the_classic_apis_are_served_not_refused() -> None:
    for key in (11, 12, 13, 14):
        assert key not in REFUSED_APIS
        assert SERVED_VERSIONS[key] == api.VERSIONS[key]
    assert api.VERSIONS[11] == (0, 9)


@pytest.mark.parametrize("version", range(10))
def test_join_request_and_response_at_every_version(version: int) -> None:
    protocol_cls = element(kio_request_class(11, version), "protocols")
    request = make(
        11,
        version,
        group_id="g",
        session_timeout=10_000 * MS,
        rebalance_timeout=30_000 * MS,
        member_id="m",
        group_instance_id="i" if version >= 5 else None,
        protocol_type="consumer",
        protocols=(protocol_cls(name="range", metadata=b"\x00\x01"),),
        reason="because" if version >= 8 else None,
    )
    join = api.join_request(request)
    assert join.session_timeout_ms == 10_000
    assert join.rebalance_timeout_ms == (10_000 if version == 0 else 30_000)
    assert join.group_instance_id == ("i" if version >= 5 else None)
    assert [(p.name, p.metadata) for p in join.protocols] == [("range", b"\x00\x01")]
    for response in (
        JoinGroupResponse(
            error=KafkaErrorCode.NONE,
            generation_id=4,
            protocol_type="consumer",
            protocol_name="range",
            member_id="m",
        ),
        JoinGroupResponse(error=KafkaErrorCode.MEMBER_ID_REQUIRED, member_id="m-new"),
    ):
        frame = encode_kio_response(api.join_response(response, version), 5)
        _, decoded = decode_kio_response(11, version, frame)
        assert int(decoded.error_code) == response.error
        assert decoded.member_id == response.member_id
        assert decoded.generation_id == response.generation_id
        assert decoded.leader == ""
        assert decoded.members == ()
        if version >= 7:
            assert decoded.protocol_type == response.protocol_type


@pytest.mark.parametrize("version", range(6))
def test_sync_at_every_version(version: int) -> None:
    request = make(
        14,
        version,
        group_id="g",
        generation_id=3,
        member_id="m",
        group_instance_id=None,
        protocol_type="consumer",
        protocol_name="range",
        assignments=(),
    )
    sync = api.sync_request(request)
    assert (sync.generation_id, sync.member_id) == (3, "m")
    assert sync.protocol_name == ("range" if version >= 5 else None)
    response = SyncGroupResponse(
        error=KafkaErrorCode.NONE, protocol_type="consumer", protocol_name="range", assignment=b"\x00\x03abc"
    )
    _, decoded = decode_kio_response(
        14, version, encode_kio_response(api.sync_response(response, version), 1)
    )
    assert decoded.assignment == b"\x00\x03abc"


@pytest.mark.parametrize("version", range(5))
def test_heartbeat_at_every_version(version: int) -> None:
    request = make(12, version, group_id="g", generation_id=3, member_id="m", group_instance_id=None)
    assert api.heartbeat_request(request).generation_id == 3
    encoded = api.heartbeat_response(HeartbeatResponse(error=KafkaErrorCode.REBALANCE_IN_PROGRESS), version)
    _, decoded = decode_kio_response(12, version, encode_kio_response(encoded, 1))
    assert int(decoded.error_code) == KafkaErrorCode.REBALANCE_IN_PROGRESS


@pytest.mark.parametrize("version", range(6))
def test_leave_at_every_version(version: int) -> None:
    if version < 3:
        request = make(13, version, group_id="g", member_id="m")
    else:
        identity = element(kio_request_class(13, version), "members")
        request = make(13, version, group_id="g", members=(identity(member_id="", group_instance_id="i"),))
    leave = api.leave_request(request)
    expected = ("m", None) if version < 3 else ("", "i")
    assert [(m.member_id, m.instance_id) for m in leave.members] == [expected]
    response = LeaveGroupsResponse(
        error=KafkaErrorCode.NONE,
        members=(
            LeaveGroupMemberResult(member_id="m", instance_id=None, error=KafkaErrorCode.UNKNOWN_MEMBER_ID),
        ),
    )
    _, decoded = decode_kio_response(
        13, version, encode_kio_response(api.leave_response(response, version), 1)
    )
    if version < 3:  # one member: its error is the request's
        assert int(decoded.error_code) == KafkaErrorCode.UNKNOWN_MEMBER_ID
    else:
        assert int(decoded.error_code) == 0
        assert [int(m.error_code) for m in decoded.members] == [KafkaErrorCode.UNKNOWN_MEMBER_ID]


def test_parked_join_is_answered_after_its_write_is_durable() -> None:
    async def run() -> None:
        futures = api.ParkedJoinFutures()
        waiting = futures.wait("g", "m")
        assert len(futures) == 1
        durable: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        answer = JoinGroupResponse(error=KafkaErrorCode.NONE, generation_id=2, member_id="m")
        futures.answer_when_durable(
            (
                ParkJoin(parked=ParkedJoin(group_id="g", member_id="x", owned=EMPTY_PARTITIONS)),
                AnswerJoin(group_id="g", member_id="m", response=answer),
            ),
            durable,
        )
        await asyncio.sleep(0)
        assert not waiting.done()  # not before the records are durable
        durable.set_result(None)
        assert await waiting is answer
        assert len(futures) == 0
        failing = futures.wait("g", "m")
        lost: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        futures.answer_when_durable((AnswerJoin(group_id="g", member_id="m", response=answer),), lost)
        lost.set_exception(BrokerError("log failed"))
        with pytest.raises(BrokerError):
            await failing

    asyncio.run(run())


def test_classic_member_commits_and_fetches_with_its_generation() -> None:
    h = ClassicHarness({"foo": 2})
    h.add("a")
    h.cjoin("a")
    a = h.classic["a"]
    group = h.coordinator.group(GROUP)

    def commit(epoch: int, version: int) -> KafkaErrorCode:
        return check_commit(
            group,
            OffsetCommitCheck(group_id=GROUP, member_id=a.member_id, member_epoch=epoch, api_version=version),
        )

    for version in (2, 8, 9):
        assert commit(a.generation, version) is KafkaErrorCode.NONE
        assert commit(a.generation - 1, version) is KafkaErrorCode.ILLEGAL_GENERATION
    assert check_fetch(group, a.member_id, a.generation) is KafkaErrorCode.NONE
    assert check_fetch(group, a.member_id, a.generation + 1) is KafkaErrorCode.ILLEGAL_GENERATION
    assert check_fetch(group, None, -1) is KafkaErrorCode.NONE
