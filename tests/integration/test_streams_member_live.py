"""The sans-IO streams member (membership/streams) against the embedded Apache Kafka 4.4.0,
driven by a minimal test driver (one heartbeat at a time, the task callbacks answered at
once): two members of one streams group split the tasks of a 4-partition source without any
task active on both, and when one leaves the other ends up with every task."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import pytest

from streamtasks.embedded import Cluster, EmbeddedBroker
from streamtasks.membership.common import (
    CoordinatorDiscovered,
    ErrorReported,
    FindCoordinator,
    Leave,
    RequestFailed,
)
from streamtasks.membership.streams import (
    InvokeTasksListener,
    JoinStreamsGroup,
    MemberState,
    ResponseReceived,
    SendRequest,
    StreamsMember,
    StreamsMemberConfig,
    Task,
    TasksListenerCompleted,
    TasksListenerKind,
)
from streamtasks.protocol.streams_group import (
    STREAMS_GROUP_HEARTBEAT_API_KEY,
    Subtopology,
    TopicInfo,
    Topology,
)
from streamtasks.protocol.streams_group_codec import (
    decode_streams_heartbeat_response,
    encode_streams_heartbeat_request,
)
from streamtasks.runtime.connection import ConnectionLost, GroupCoordinatorClient
from streamtasks.runtime.consumer_driver import new_member_id

pytestmark = pytest.mark.integration

WAIT_S = 60
PARTITIONS = 4


def now_ms() -> int:
    return int(time.monotonic() * 1000)


class LiveMember:
    """A StreamsMember, its coordinator client and the tasks its callbacks say it runs."""

    def __init__(self, bootstrap: str, group: str, topic: str, shared: dict[Task, str]) -> None:
        topology = Topology(
            epoch=0,
            subtopologies=(
                Subtopology(
                    subtopology_id="0",
                    source_topics=(topic,),
                    state_changelog_topics=(TopicInfo(name=f"{group}-counts-changelog"),),
                ),
            ),
        )
        self.name = new_member_id()
        self.member = StreamsMember(
            StreamsMemberConfig(
                group_id=group,
                member_id=self.name,
                process_id=str(uuid.uuid4()),
                topology=topology,
                rebalance_timeout_ms=10_000,
            )
        )
        self.client = GroupCoordinatorClient(bootstrap, group)
        self.active: set[Task] = set()
        self.shared = shared  # task -> the member running it as active, across members
        self.errors: list[ErrorReported] = []
        self.actions: list[Any] = []

    async def run(self, actions: list[Any]) -> None:
        queue = list(actions)
        while queue:
            action = queue.pop(0)
            self.actions.append(action)
            event: Any = None
            if isinstance(action, FindCoordinator):
                try:
                    await self.client.ensure_coordinator()
                    event = CoordinatorDiscovered(request_id=action.request_id)
                except ConnectionLost:
                    event = RequestFailed(request_id=action.request_id)
            elif isinstance(action, SendRequest):
                body = encode_streams_heartbeat_request(action.request, 1)
                try:
                    raw = await self.client.send_raw(STREAMS_GROUP_HEARTBEAT_API_KEY, 1, body, timeout_s=10)
                    event = ResponseReceived(
                        request_id=action.request_id, response=decode_streams_heartbeat_response(raw, 1)
                    )
                except ConnectionLost:
                    event = RequestFailed(request_id=action.request_id)
            elif isinstance(action, InvokeTasksListener):
                self.apply(action)
                event = TasksListenerCompleted(invocation_id=action.invocation_id)
            elif isinstance(action, ErrorReported):
                self.errors.append(action)
            if event is not None:
                queue += self.member.handle(event, now_ms())

    def apply(self, action: InvokeTasksListener) -> None:
        if action.kind is TasksListenerKind.ASSIGNED:
            for task in action.active:
                owner = self.shared.get(task)
                assert owner in (None, self.name), f"{task} is active on {owner} and {self.name}"
                self.shared[task] = self.name
            for task in self.active - set(action.active):
                assert self.shared.pop(task) == self.name
            self.active = set(action.active)
        else:  # REVOKED or LOST
            for task in action.active if action.kind is TasksListenerKind.REVOKED else tuple(self.active):
                self.active.discard(task)
                assert self.shared.pop(task) == self.name

    async def tick(self) -> None:
        due = self.member.next_deadline_ms()
        if due is not None and now_ms() >= due:
            await self.run(self.member.poll(now_ms()))

    @property
    def stable(self) -> bool:
        return self.member.state is MemberState.STABLE


async def until(members: list[LiveMember], done: Any) -> None:
    deadline = time.monotonic() + WAIT_S
    while not done():
        assert time.monotonic() < deadline, [(m.member.state, sorted(m.active)) for m in members]
        for m in members:
            await m.tick()
        await asyncio.sleep(0.02)


async def scenario(bootstrap: str, group: str, topic: str) -> dict[str, Any]:
    shared: dict[Task, str] = {}
    a, b = LiveMember(bootstrap, group, topic, shared), LiveMember(bootstrap, group, topic, shared)
    all_tasks = {("0", p) for p in range(PARTITIONS)}
    try:
        await a.run(a.member.handle(JoinStreamsGroup(), now_ms()))
        await until([a], lambda: a.stable and a.active == all_tasks)
        await b.run(b.member.handle(JoinStreamsGroup(), now_ms()))
        split = lambda: a.stable and b.stable and len(a.active) == len(b.active) == PARTITIONS // 2  # noqa: E731
        await until([a, b], split)
        halves = (sorted(a.active), sorted(b.active))
        await b.run(b.member.handle(Leave(), now_ms()))
        await until([a, b], lambda: b.member.state is MemberState.UNSUBSCRIBED)
        await until([a], lambda: a.stable and a.active == all_tasks)
    finally:
        await a.client.close()
        await b.client.close()
    return {"halves": halves, "a": a, "b": b, "shared": shared}


def test_two_streams_members_split_the_tasks_and_one_takes_all_when_the_other_leaves(kafka: Cluster) -> None:
    if isinstance(kafka, EmbeddedBroker):
        pytest.skip("Tansu does not serve StreamsGroupHeartbeat (API 88); run with STREAMTASKS_BROKER=kafka")
    if kafka.api_versions().get(STREAMS_GROUP_HEARTBEAT_API_KEY, (0, -1))[1] < 1:
        pytest.skip("the cluster does not serve StreamsGroupHeartbeat v1 (API 88)")
    group = f"streams-member-{uuid.uuid4().hex[:8]}"
    topic = f"{group}-in"
    kafka.create_topics({topic: PARTITIONS})
    found = asyncio.run(scenario(kafka.bootstrap_servers, group, topic))
    a_half, b_half = found["halves"]
    assert set(a_half).isdisjoint(b_half)
    assert found["shared"] == {("0", p): found["a"].name for p in range(PARTITIONS)}
    revoked = [
        x
        for x in found["a"].actions
        if isinstance(x, InvokeTasksListener) and x.kind is TasksListenerKind.REVOKED
    ]
    assert revoked, "member a gave tasks up to b through a revocation"
    assert not [e for e in found["a"].errors + found["b"].errors if e.fatal]
    print(f"\nmember a kept {a_half}, member b got {b_half}; a revoked {[r.active for r in revoked]}")
